"""The operators' routes (`/outbox/...` by default, auth level ADMIN: the host's master key), one
module per resource, each declaring its routes over the core's one operators' API
(`cosmos_outbox.operations`) and answering with its results: `status` (the relay's state, the
backlog's last hour, the anonymous `outbox/health`), `quarantine`, `redrive`, `dead_letters`,
`groups` (failures by cause), `journey` (and an aggregate's documents), `subscribers`; the
models an app extends are `models`'.

Each route but `outbox/health` (anonymous) is also served to a signed-in operator under
`/outbox/console/...`, and the console page at `/outbox/console` shows them
(`cosmos_outbox_operators._console`: two doors, one implementation); who acts is the operator a
door admitted (`cosmos_outbox.operations.acting_as`). The command line (`cosmos-outbox`) and the
console call these routes, and nothing else. Every action's answer says what subscribers will
see (`subscribersWillSee`), as its audit line does."""

from __future__ import annotations

from cosmos_outbox_operators._routes import (
    dead_letters,
    groups,
    journey,
    quarantine,
    redrive,
    status,
    subscribers,
)
from cosmos_outbox_operators._routes.models import (
    OperatorModels,
    QuarantineItem,
    QuarantineListPage,
    RedriveRequest,
)
from cosmos_outbox_operators._types import parse_instant

__all__ = [
    "RESOURCES",
    "OperatorModels",
    "QuarantineItem",
    "QuarantineListPage",
    "RedriveRequest",
    "parse_instant",
]

#: The route modules, in the order their routes are declared.
RESOURCES = (status, quarantine, redrive, dead_letters, groups, journey, subscribers)
