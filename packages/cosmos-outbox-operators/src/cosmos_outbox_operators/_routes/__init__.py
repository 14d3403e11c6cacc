"""The operators' routes (`/outbox/...` by default, auth level ADMIN: the host's master key), one
module per resource (`status` with the anonymous `outbox/health`, `quarantine`, `redrive`,
`dead_letters`, `groups`, `operations`: the bulk operations, `journey`, `failures`: the one set
for a failure of either kind, `subscribers`), each
declaring its routes over the core's operations and answering with their results; the models
an app extends are `models`'. Each route but `outbox/health` is also served to a signed-in
operator under `/outbox/console/...` (`cosmos_outbox_operators._console`: two doors, one
implementation)."""

from __future__ import annotations

from cosmos_outbox_operators._routes import (
    dead_letters,
    failures,
    groups,
    journey,
    operations,
    quarantine,
    redrive,
    status,
    subscribers,
)

__all__ = ["RESOURCES"]

#: The route modules, in the order their routes are declared.
RESOURCES = (
    status,
    quarantine,
    redrive,
    dead_letters,
    groups,
    operations,
    journey,
    failures,
    subscribers,
)
