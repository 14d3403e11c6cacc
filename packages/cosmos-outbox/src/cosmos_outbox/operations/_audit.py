"""The audit line every recovery action writes: one warning on `cosmos_outbox.operators` (the
category operators filter on), saying what was done, by whom (`cosmos_outbox.operations._actor`: the
operator the operators' routes admitted, "admin key" or the signed-in operator's name and id),
and what subscribers will see, with the same values as fields (`extra`: `outbox.audit`, the
actor's `outbox.actor*`, `outbox.subscribers_will_see`, and the action's own `outbox.*`)."""

from __future__ import annotations

import logging
from typing import Any

from cosmos_outbox.operations._actor import current_actor

__all__ = ["audit", "logger"]

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
