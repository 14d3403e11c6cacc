"""The contract between the two apps, derived from both: every action the contacts app can
emit (its event catalogue) is either handled by the subscriber's projection or listed there as
deliberately ignored; every handled action is one the app emits; and every field the projection
reads from an event is a field that event carries on the wire. A new event class, a renamed
action or field, fails here until the subscriber decides."""

from __future__ import annotations

import pytest

import tests.subscriber  # noqa: F401  (puts subscriber/ on sys.path)
from cosmos_outbox.aggregates import Event
from cosmos_outbox_testing import EVENTS
from domain.contact import Contact

from contacts_projection.bootstrap import CONTACT  # isort: skip
from contacts_projection.projection import HANDLED, IGNORED_ACTIONS  # isort: skip

ENVELOPE = {"id", "contactId", "version", "createdAt", "traceparent", "action", "deliverAt"}


def emitted() -> dict[str, type[Event]]:
    return {e.action_name(): e for e in Contact.event_classes()}


def test_the_subscriber_projects_the_aggregate_type_of_the_contacts_app() -> None:
    assert Contact.aggregate_type == CONTACT


def test_every_action_the_app_emits_is_handled_or_deliberately_ignored() -> None:
    undecided = set(emitted()) - set(HANDLED) - IGNORED_ACTIONS
    assert undecided == set(), (
        f"the contacts app emits {sorted(undecided)}: handle them in the subscriber's "
        "projection (HANDLED) or list them in IGNORED_ACTIONS"
    )


def test_every_action_the_subscriber_handles_or_ignores_is_one_the_app_emits() -> None:
    assert (set(HANDLED) | IGNORED_ACTIONS) - set(emitted()) == set()
    assert set(HANDLED) & IGNORED_ACTIONS == set()


@pytest.mark.parametrize("action", sorted(HANDLED))
def test_the_fields_the_projection_reads_are_fields_the_event_carries(action: str) -> None:
    event = EVENTS.resolve(Contact.aggregate_type, action)
    carried = {field.alias or name for name, field in event.model_fields.items()} - ENVELOPE
    assert set(HANDLED[action]) <= carried
    assert carried <= set(HANDLED[action]), (
        f"{action} carries {sorted(carried - set(HANDLED[action]))}, which the projection drops"
    )
