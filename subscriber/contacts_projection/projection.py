"""The read model of one contact and how events change it. Pure: no storage, no I/O. The rest
(inbox, version order, gaps, one batch per event) is cosmos-outbox's projector
(`cosmos_outbox.subscriber.Projector`).

An action this projection does not handle (`HANDLED`) — a new event type the contacts app emits
before this subscriber knows it, or one it deliberately ignores (`IGNORED_ACTIONS`) — changes no
field, but its version is taken as applied, so the versions after it are not held behind it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cosmos_outbox.subscriber import IncomingEvent, Projection

PROJECTION_TYPE = "contactProjection"
#: The fields each action it handles sets, as named in the event data (camelCase, as on the
#: wire). tests/subscriber/test_contract.py holds it to the contacts app's event catalogue.
HANDLED: dict[str, tuple[str, ...]] = {
    "ContactCreatedEvent": ("name", "email", "description", "company"),
    "ContactNameUpdatedEvent": ("name",),
    "ContactEmailUpdatedEvent": ("email",),
    "ContactDescriptionUpdatedEvent": ("description",),
    "ContactCompanyUpdatedEvent": ("company",),
    "ContactDeletedEvent": ("deletedAt",),
}
#: Contact actions this projection ignores on purpose (none yet): listed, so that a new action
#: of the contacts app is a decision here (handle it or list it), not an accident.
IGNORED_ACTIONS: frozenset[str] = frozenset()


class ContactProjection(Projection):
    def handles(self, action: str) -> bool:
        return action in HANDLED

    def apply(self, projection: Mapping[str, Any] | None, event: IncomingEvent) -> dict[str, Any]:
        return apply(projection, event)


def apply(projection: Mapping[str, Any] | None, event: IncomingEvent) -> dict[str, Any]:
    """The projection document after `event` (which must be the next version)."""
    last = int(projection["version"]) if projection is not None else 0
    if event.version != last + 1:
        raise ValueError(f"event version {event.version} does not follow the projection")
    fields = HANDLED.get(event.type, ())  # not handled: only the version moves
    base: dict[str, Any] = (
        dict(projection)
        if projection is not None
        else {
            "id": event.aggregate_id,
            "partitionKey": event.aggregate_id,
            "type": PROJECTION_TYPE,
            "data": {},
            "deleted": False,
        }
    )
    data = dict(base["data"])
    for name in fields:
        if name in event.data:
            data[name] = event.data[name]
    base = {k: v for k, v in base.items() if not k.startswith("_")}
    base.update(
        {
            "data": data,
            "version": event.version,
            "deleted": event.type == "ContactDeletedEvent" or bool(base.get("deleted")),
            "lastEventId": event.event_id,
            "ttl": -1,
        }
    )
    return base
