"""A failure's cause, as its group is keyed by (ServicePulse's failure groups): its text with
what varies made a placeholder (`cause_of`), a dead letter's reason and description said once
(`failure_text`), and the group's id (`group_id`). The operators' groups
(`cosmos_outbox.operations._groups`) and the failures' ingest
(`cosmos_outbox.operations._failures`) key by the same."""

from __future__ import annotations

import hashlib
import re

__all__ = ["ERROR_TYPE", "cause_of", "failure_text", "group_id"]

_VARIABLE = re.compile(
    r"(?<!\w)'[^']*'(?!\w)|\"[^\"]*\"|\b[0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12}\b"
    r"|\b0x[0-9a-f]+\b|\d+(?:\.\d+)?",
    re.IGNORECASE,
)
ERROR_TYPE = re.compile(r"^\s*([A-Za-z_][\w.]*(?:Error|Exception|Exceeded|Failed|Expired))\b")


def cause_of(text: str | None) -> str:
    """A failure's text, what varies made a placeholder (`<n>` a number, `<id>` a GUID, `'…'` a
    quoted value), its spaces collapsed."""

    def placeholder(found: re.Match[str]) -> str:
        value = found.group(0)
        return "'…'" if value[0] in "'\"" else "<id>" if "-" in value else "<n>"

    return " ".join(_VARIABLE.sub(placeholder, text or "").split())[:300]


def failure_text(reason: str | None, description: str | None) -> str:
    """A dead letter's failure in one text: its reason, then its description, said once when
    the description repeats it ("KeyError" and "KeyError: 'id'" are "KeyError: 'id'", not
    "KeyError: KeyError: 'id'")."""
    reason, description = (reason or "").strip(), (description or "").strip()
    if not description or description == reason:
        return reason
    if not reason or description.startswith(reason):
        return description
    return f"{reason}: {description}"


def group_id(
    source: str, entity: str | None, cause: str, aggregate_type: str | None, action: str | None
) -> str:
    key = f"{source}\n{entity}\n{cause}\n{aggregate_type}\n{action}"
    return hashlib.sha256(key.encode()).hexdigest()[:12]
