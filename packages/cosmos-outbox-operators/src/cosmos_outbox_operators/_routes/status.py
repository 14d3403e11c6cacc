"""The outbox's status routes: the relay's state and backlog (`outbox/status`), the backlog
timer's last hour (`outbox/backlog`, the console's chart), and the outbox's health for any app
(`outbox/health`, anonymous: through neither door, bounded like them)."""

from __future__ import annotations

from cosmos_outbox.http import HttpCall, Model, Reply
from cosmos_outbox.operations import OutboxStatus, Reading
from cosmos_outbox_operators._routes._context import Routes

_ERRORS = (400, 429, 500, 503)


class BacklogHistory(Model):
    """The backlog timer's readings of the last hour, oldest first (the console's chart)."""

    readings: list[Reading]


def declare(routes: Routes) -> None:
    operations = routes.operations

    @routes.get("status", OutboxStatus, errors=_ERRORS)
    async def outbox_status(call: HttpCall[None]) -> Reply:
        """Operators: the relay's state (healthy: moving; stalled: since when, which dependency
        does not answer, the last error; not ready), its backlog per lease, the quarantined
        events, the scheduled events waiting, and the dead letters that left their queue
        without being applied"""
        return Reply(await operations().status.now())

    @routes.get("backlog", BacklogHistory, errors=_ERRORS)
    async def backlog_history(call: HttpCall[None]) -> Reply:
        """Operators: the backlog timer's readings of the last hour (pending events and the
        oldest one's age), oldest first"""
        return Reply(BacklogHistory(readings=await operations().status.backlog()))

    @routes.get(
        "health", None, anonymous=True, response_schema={"type": "object"}, errors=(400, 500, 503)
    )
    async def outbox_health(call: HttpCall[None]) -> Reply:
        """The outbox's health for any app (anonymous): the store answers; degraded, with what
        the relay is stuck on, when the relay says it is blocked"""
        return Reply(await operations().status.health())
