"""Who acts: every operators' action is audited with it (`outbox.operator` in the audit line)
and named in the notices it sends (`discardedBy`)."""

from __future__ import annotations

import azure.functions as func

__all__ = ["ADMIN_KEY", "operator_of"]

#: Who acts when the caller holds the admin key (the host's master key: the operators' routes
#: are at auth level ADMIN): the key is shared, so the holder is not named further.
ADMIN_KEY = "admin key"


def operator_of(request: func.HttpRequest) -> str:
    """Who made this operators' request: the holder of the admin key, the only way in for now
    (the host checked the key before the function ran)."""
    return ADMIN_KEY
