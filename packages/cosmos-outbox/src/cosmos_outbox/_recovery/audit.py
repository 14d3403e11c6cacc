"""The audit line every operators' action writes: one warning on `application.admin` (the
category operators filter on), saying what was done, by whom, and what subscribers will see,
with the same values as fields (`extra`: `outbox.audit`, `outbox.operator`,
`outbox.subscribers_will_see`, and the action's own `outbox.*`)."""

from __future__ import annotations

import logging
from typing import Any

__all__ = ["audit", "logger"]

#: The log category operators filter on (kept across module moves).
logger = logging.getLogger("application.admin")


def audit(action: str, what: str, *, by: str, will_see: str, **fields: Any) -> None:
    logger.warning(
        "outbox audit: %s by %s: %s; subscribers will see: %s",
        action,
        by,
        what,
        will_see,
        extra={
            "outbox.audit": action,
            "outbox.operator": by,
            "outbox.subscribers_will_see": will_see,
            **{f"outbox.{name}": value for name, value in fields.items()},
        },
    )
