"""Who acts: the operator behind an action, known to every audit line. A way in admits a request
(cosmos-outbox-operators' doors: the admin key, a signed-in operator; its command line) and runs
it `acting_as` the `Actor`; the use cases read `current_actor()`. A context variable, so that it
follows the request into the bounded thread or task that runs it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["ADMIN_KEY", "NO_KEY", "UNKNOWN", "Actor", "acting_as", "current_actor"]


@dataclass(frozen=True)
class Actor:
    """An operator: one signed in (`name`, the identity provider's display name, and `id`, its
    object id), the holder of the admin key (the host checked it; which key it was, the app
    cannot tell), nobody (the admin key's door admitted a request that sent no key: a local host,
    which checks no key), the command line run on the stores with the app's settings (`name`:
    the user and machine it ran as; what it could do, the settings' credentials allowed), or
    unknown (an action run outside the operators' routes: a test, a script of the app's own)."""

    kind: Literal["signed-in operator", "admin key", "nobody", "command line", "unknown"]
    name: str | None = None
    id: str | None = None

    def __str__(self) -> str:
        if self.kind == "signed-in operator":
            return f"{self.name} (id {self.id})"
        if self.kind == "nobody":
            return f"nobody: {self.name}"
        if self.kind == "command line":
            return f"the command line as {self.name}"
        return self.kind

    def log_fields(self) -> dict[str, Any]:
        """The audit line's fields naming the actor (never a secret: no key, no token)."""
        return {
            "outbox.actor": str(self),
            "outbox.actor_kind": self.kind,
            "outbox.actor_name": self.name,
            "outbox.actor_id": self.id,
        }


ADMIN_KEY = Actor("admin key")
#: The admin key's door admitted a request without a key: the local host checks none (so the
#: audit does not say "by admin key" when no key was sent).
NO_KEY = Actor("nobody", name="keys not enforced locally")
UNKNOWN = Actor("unknown")
_actor: ContextVar[Actor] = ContextVar("cosmos_outbox_actor", default=UNKNOWN)


def current_actor() -> Actor:
    """The operator the running action was admitted for (`UNKNOWN` outside the routes)."""
    return _actor.get()


@contextlib.contextmanager
def acting_as(actor: Actor) -> Iterator[Actor]:
    """Run the block as `actor` (then as whoever ran before)."""
    token = _actor.set(actor)
    try:
        yield actor
    finally:
        _actor.reset(token)
