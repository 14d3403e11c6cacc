"""The Contacts app's mappings, held by cosmos-outbox's checks (`cosmos_outbox_testing`),
driven by what the app registers: its aggregates and its declared routes. A class, field or
mapping left out fails here, by name: the steps of docs/changing-the-model.md ("Add a field to
the contact")."""

from __future__ import annotations

import function_app
from application.contacts.commands import CreateContact, PatchContact, update_body
from cosmos_outbox_testing import (
    check_commands,
    check_event_mappings,
    check_fields,
    check_openapi_events,
    check_text_schemas,
)
from domain.contact import Contact
from entrypoints.contacts import REFERENCE_UPDATES
from tests.contacts.openapi import openapi_document

#: The aggregates the app registers.
AGGREGATES = (Contact,)
#: The contact's own bookkeeping: not set by a client.
KEPT_BY_THE_CONTACT = {"created_at", "modified_at", "deleted", "deleted_at"}


def test_every_event_maps_to_the_document_the_message_and_a_cloudevent() -> None:
    check_event_mappings(AGGREGATES)


def test_the_openapi_document_lists_exactly_the_events_of_the_app() -> None:
    check_openapi_events(openapi_document(), AGGREGATES)


def test_every_patch_field_is_accepted_by_the_change_it_calls() -> None:
    check_commands(function_app.app)


def test_every_field_a_client_sets_travels_in_events_and_can_be_changed_through_patch() -> None:
    check_fields(Contact, patch=PatchContact, kept=KEPT_BY_THE_CONTACT)


def test_every_field_a_client_sets_can_be_given_on_create() -> None:
    create = CreateContact.model_validate(
        {"firstName": "Ada", "lastName": "L", "email": "ada@example.com", "companyName": "E"}
    )
    settable = set(Contact.model_fields) - {"id", "version"} - KEPT_BY_THE_CONTACT
    assert set(create.fields()) == settable


def test_every_text_field_publishes_what_it_validates() -> None:
    check_text_schemas(
        [CreateContact, PatchContact, *(update_body(aspect) for aspect in REFERENCE_UPDATES)]
    )
