"""The audit line every recovery action writes: one warning on `cosmos_outbox.operators` saying
what was done, by whom (`current_actor`) and what subscribers will see, with the values as fields
(`outbox.audit`, `outbox.actor*`, `outbox.subscribers_will_see`, the action's own `outbox.*`)."""

from __future__ import annotations

import logging
from typing import Any

from cosmos_outbox.operations._actor import current_actor

__all__ = ["audit", "logger", "what_event"]

#: The log category operators filter on (the quarantine's and re-drive's audit lines too).
logger = logging.getLogger("cosmos_outbox.operators")


def audit(action: str, what: str, /, *, will_see: str, **fields: Any) -> None:
    actor = current_actor()
    logger.warning(
        "outbox audit: %s by %s: %s; subscribers will see: %s",
        action,
        actor,
        what,
        will_see,
        extra={
            **actor.log_fields(),
            "outbox.audit": action,
            "outbox.subscribers_will_see": will_see,
            **{f"outbox.{name}": value for name, value in fields.items()},
        },
    )


def what_event(
    aggregate_type: str | None,
    aggregate_id: str | None,
    version: int | None,
    action: str | None = None,
) -> str:
    """An event in words, with what it does not say left out, never "None" ("contact c-1 v3
    ContactRenamed"; "version unknown" for a record that could not be read)."""
    if not aggregate_id:
        return "aggregate unknown" + (f", {action}" if action else "")
    said = f"{aggregate_type or 'aggregate'} {aggregate_id} "
    said += f"v{version}" if version is not None else "version unknown"
    return said + (f" {action}" if action else "")
