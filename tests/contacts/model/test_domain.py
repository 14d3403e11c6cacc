from __future__ import annotations

import pytest
from pydantic import ValidationError

from cosmos_outbox_testing import EVENTS
from domain.contact import Contact, ContactCreated, ContactNameUpdated
from domain.errors import ContactDeletedError
from domain.values import Company, Name


def ada() -> Contact:
    return Contact.create(
        name=Name(first_name="Ada", last_name="Lovelace"),
        email="ada@example.com",
        company=Company(company_name="Engines"),
    )


def test_a_new_contact_raises_only_contact_created_at_version_1() -> None:
    contact = ada()
    [event] = contact.collect_events()
    assert isinstance(event, ContactCreated)
    assert (event.aggregate_id, event.version, contact.version) == (contact.id, 1, 1)
    assert event.model_dump(by_alias=True)["contactId"] == contact.id


def test_each_change_raises_one_event_and_grows_the_version_by_one() -> None:
    contact = ada()
    contact.collect_events()
    contact.rename(Name(first_name="Augusta", last_name="King"))
    contact.change_email("augusta@example.com")
    contact.describe("mathematician")
    contact.move_to(Company(company_name="Babbage & Co", city="London"))
    events = contact.collect_events()
    assert [e.version for e in events] == [2, 3, 4, 5]
    assert [type(e).__name__ for e in events] == [
        "ContactNameUpdated",
        "ContactEmailUpdated",
        "ContactDescriptionUpdated",
        "ContactCompanyUpdated",
    ]
    assert contact.version == 5


def test_setting_a_value_to_what_it_already_is_raises_nothing() -> None:
    contact = ada()
    contact.collect_events()
    contact.rename(Name(first_name="Ada", last_name="Lovelace"))
    contact.change_email(" ada@EXAMPLE.com ")  # same address once normalised
    contact.describe("")
    contact.move_to(Company(company_name="Engines"))
    assert contact.collect_events() == []
    assert contact.version == 1


def test_a_deleted_contact_refuses_changes() -> None:
    contact = ada()
    contact.delete()
    assert contact.deleted and contact.deleted_at is not None
    with pytest.raises(ContactDeletedError):
        contact.rename(Name(first_name="X", last_name="Y"))
    with pytest.raises(ContactDeletedError):
        contact.delete()
    actions = [e.model_dump(by_alias=True)["action"] for e in contact.collect_events()]
    assert actions == ["ContactCreatedEvent", "ContactDeletedEvent"]


def test_events_are_frozen_and_round_trip_through_their_json() -> None:
    event = ContactNameUpdated(
        aggregate_id="c1", version=2, name=Name(first_name="A", last_name="B")
    )
    with pytest.raises(ValidationError):
        event.version = 3  # type: ignore[misc]
    data = event.model_dump(mode="json", by_alias=True)
    assert data["action"] == "ContactNameUpdatedEvent"
    assert data["contactId"] == "c1"
    assert EVENTS.parse("contact", data) == event


@pytest.mark.parametrize(
    ("field", "value"),
    [("first_name", ""), ("first_name", "x" * 101), ("last_name", "   "), ("last_name", "y" * 101)],
)
def test_names_are_required_and_at_most_100_characters(field: str, value: str) -> None:
    values = {"first_name": "Ada", "last_name": "Lovelace", field: value}
    with pytest.raises(ValidationError):
        Name(**values)


@pytest.mark.parametrize(
    "fields",
    [
        {"company_name": ""},
        {"company_name": "c" * 251},
        {"company_name": "ok", "house_number": "1" * 11},
        {"company_name": "ok", "postal_code": "1" * 26},
        {"company_name": "ok", "city": "c" * 101},
    ],
)
def test_company_limits(fields: dict[str, str]) -> None:
    with pytest.raises(ValidationError):
        Company(**fields)


@pytest.mark.parametrize(
    "email", ["nope", "a@b", "@example.com", "a b@example.com", "x" * 250 + "@e.com"]
)
def test_invalid_emails_are_refused(email: str) -> None:
    contact = ada()
    with pytest.raises(ValidationError):
        contact.change_email(email)


def test_description_is_at_most_500_characters() -> None:
    contact = ada()
    contact.describe("d" * 500)
    with pytest.raises(ValidationError):
        contact.describe("d" * 501)
