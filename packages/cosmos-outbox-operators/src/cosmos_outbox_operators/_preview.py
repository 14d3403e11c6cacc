"""The preview's token: what an action that gives failures up or sends them again (a failure
group's retry or discard) is confirmed with by a caller that is not the console's page (an agent,
through the MCP server). A preview answers it (the route's `X-Preview-Token` header, the MCP
`preview_group` tool's `previewToken`); the action takes it, and is refused when the same
preview, run again as the action starts, answers another one: the decision is not the one
previewed (another group, action, reason or canary), or the group is no longer what the preview
saw (its count changed). It is a digest of the decision and of what the preview saw, not a
secret: it proves the caller previewed this decision, not who the caller is (the roles do that).
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from cosmos_outbox.operations import GroupOutcome

__all__ = ["PREVIEW_TOKEN_HEADER", "group_preview_token", "preview_token"]

#: The header a preview route answers its token in.
PREVIEW_TOKEN_HEADER = "X-Preview-Token"  # noqa: S105  # a header's name
#: The token's form (a version, then the digest): what its schema says.
PREVIEW_TOKEN_PATTERN = "^pv1\\.[A-Za-z0-9_-]{22}$"  # noqa: S105  # its form


def preview_token(kind: str, decision: Mapping[str, Any], seen: Mapping[str, Any]) -> str:
    """The token of a preview of `kind` for `decision` (what the action would be asked, by its
    fields' wire names, absent fields left out) that saw `seen` (the facts the action must
    still find)."""
    canonical = json.dumps(
        {"kind": kind, "decision": dict(decision), "seen": dict(seen)},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=True,
    )
    digest = hashlib.sha256(canonical.encode("ascii")).digest()[:16]
    return "pv1." + base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def group_preview_token(decision: Mapping[str, Any], outcome: GroupOutcome) -> str:
    """The token of a failure group's preview: `decision` is the group's id (`groupId`) and
    the action's body as sent (`action`, `reason`, `canary`, `canaryWaitSeconds`); the preview
    saw the group's count and the events it looked at."""
    seen = {"count": outcome.group.count, "matching": outcome.matching}
    return preview_token("failure group", decision, seen)
