"""Property: any valid contact survives save -> load -> view with every field, under its name.

Saving and loading go through the in-memory unit of work, which writes and reads the same
documents as the Cosmos adapter (`cosmos_outbox.documents`), as JSON text; the view is the API's
`ContactView`. A field that one layer drops, renames or reformats fails here."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from pydantic.alias_generators import to_camel

from application.contacts.views import ContactView
from cosmos_outbox import Outbox
from cosmos_outbox.documents import aggregate_document
from cosmos_outbox.text import REFUSED_CATEGORIES, text_problem
from cosmos_outbox_testing import in_memory
from domain.contact import Contact
from domain.values import Company, Name

HIDDEN_FROM_THE_API = {"deleted", "deleted_at"}


def trimmed(min_size: int, max_size: int) -> st.SearchStrategy[str]:
    """Text a contact may hold (`cosmos_outbox.text`'s rules), trimmed."""
    allowed = st.characters(exclude_categories=sorted(REFUSED_CATEGORIES))  # type: ignore[arg-type]
    return (
        st.text(allowed, min_size=min_size, max_size=max_size)
        .map(str.strip)
        .filter(lambda s: len(s) >= min_size and text_problem(s, required=min_size > 0) is None)
    )


# "ab--" is reserved for IDNA (RFC 5891 §4.2.3.1): email-validator refuses such labels.
label = st.from_regex(r"[a-z0-9](?:[a-z0-9-]{0,10}[a-z0-9])?", fullmatch=True).filter(
    lambda text: text[2:4] != "--"
)
emails = st.builds(
    lambda local, labels, tld: f"{local}@{'.'.join(labels)}.{tld}",
    st.from_regex(r"[A-Za-z0-9_+-]{1,15}(?:\.[A-Za-z0-9_+-]{1,14})?", fullmatch=True),
    st.lists(label, min_size=1, max_size=2),
    st.from_regex(r"[a-z]{2,6}", fullmatch=True),  # a top-level domain is never numeric
)
times = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
)
names = st.fixed_dictionaries({"first_name": trimmed(1, 100), "last_name": trimmed(1, 100)}).map(
    Name.model_validate
)
companies = st.fixed_dictionaries(
    {
        "company_name": trimmed(1, 250),
        "street": trimmed(0, 250),
        "house_number": trimmed(0, 10),
        "postal_code": trimmed(0, 25),
        "city": trimmed(0, 100),
        "country": trimmed(0, 100),
    }
).map(Company.model_validate)


@st.composite
def contacts(draw: st.DrawFn) -> Contact:
    created = draw(times)
    deleted = draw(st.booleans())
    return Contact(
        id=draw(st.uuids().map(str)),
        version=draw(st.integers(min_value=1, max_value=10**6)),
        name=draw(names),
        email=draw(emails),
        description=draw(trimmed(0, 500)),
        company=draw(companies),
        created_at=created,
        modified_at=draw(times),
        deleted=deleted,
        deleted_at=draw(times) if deleted else None,
    )


def saved_and_loaded(contact: Contact) -> Contact:
    memory = in_memory()
    # The document the unit of work writes; the store keeps its JSON, as Cosmos does.
    memory.store.put(aggregate_document(contact))
    outbox = Outbox([Contact], services=lambda: memory.services)
    with outbox.unit_of_work() as uow:
        return uow.repository(Contact).get(contact.id)


def as_json(contact: Contact) -> dict[str, Any]:
    return json.loads(contact.model_dump_json(by_alias=True))  # type: ignore[no-any-return]


@given(contacts())
def test_a_saved_contact_loads_back_equal_field_for_field(contact: Contact) -> None:
    assert saved_and_loaded(contact).model_dump() == contact.model_dump()


@given(contacts())
def test_the_view_of_a_loaded_contact_shows_every_field_but_the_deletion_marks(
    contact: Contact,
) -> None:
    view = json.loads(ContactView.of(saved_and_loaded(contact)).model_dump_json(by_alias=True))
    hidden = {to_camel(f) for f in HIDDEN_FROM_THE_API}
    assert view == {k: v for k, v in as_json(contact).items() if k not in hidden}
    assert set(view) == {to_camel(f) for f in Contact.model_fields} - hidden


@given(contacts())
def test_the_stored_document_holds_every_field_under_its_camel_case_name(
    contact: Contact,
) -> None:
    document = aggregate_document(contact)
    assert (document["id"], document["partitionKey"], document["type"]) == (
        contact.id,
        contact.id,
        "contact",
    )
    assert document["data"] == {k: v for k, v in as_json(contact).items() if k != "id"}
