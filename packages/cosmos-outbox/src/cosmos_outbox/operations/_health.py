"""Health's answer: the store answers, and whether the relay says it is stuck (the app's
/health and the operators' `outbox/health` answer the same)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from cosmos_outbox._relay.health import RelayBlocked


async def health_answer(
    ping: Callable[[], Awaitable[None]],
    relay_blocked: Callable[[], Awaitable[RelayBlocked | None]] | None,
) -> dict[str, Any]:
    """The health's answer (this /health's, and the operators' `outbox/health` for an app that
    registers the blueprints on a `func.FunctionApp` of its own): the store answers (else it
    raises: 503), and "degraded", with what the relay is stuck on, when the relay says so."""
    await ping()
    blocked = await relay_blocked() if relay_blocked is not None else None
    if blocked is None:
        return {"status": "healthy"}
    return {
        "status": "degraded",
        "relay": {
            "eventId": blocked.event_id,
            "reason": blocked.reason,
            "since": blocked.since.isoformat() if blocked.since else None,
            "attempts": blocked.attempts,
        },
    }
