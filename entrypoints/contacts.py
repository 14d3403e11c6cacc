"""The contact API, on cosmos-outbox's route helper (`Outbox.routes`: load, preconditions,
change, one batch, ETag), each operation declared once, plus the contact list. Written once for
either outbox: the async one's routes are `async def` functions (the app's), the sync one's
plain functions running the same handlers in their thread.

The reference sample's one-aspect routes (`POST /contacts/{id}/update-<aspect>`, 204) are
declared from one table (`REFERENCE_UPDATES`): each is a PATCH of that aspect, with a body
derived from `PatchContact` (`application.contacts.commands.update_body`). Its clients also send
the etag they read in a request header named `ETag`: read as If-Match (`etag_request_header`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from application.contacts.commands import CreateContact, PatchContact, patch_of, update_body
from application.contacts.ports import ContactList
from application.contacts.views import ContactPage, ContactView
from cosmos_outbox import Outbox
from cosmos_outbox.http import (
    AggregateRoutes,
    HttpCall,
    PathParameter,
    Reply,
    TokenCodec,
    next_token,
)
from cosmos_outbox.ports import Page
from domain.contact import Contact

if TYPE_CHECKING:
    from cosmos_outbox.aio import Outbox as AsyncOutbox

#: The reference sample's routes, one per aspect of PatchContact, kept for its clients.
REFERENCE_UPDATES = ("name", "email", "description", "company")

CONTACT_ID = PathParameter("id", "the contact id")
_READ_ERRORS = (400, 404, 412, 429, 500, 503)
_WRITE_ERRORS = (400, 404, 412, 413, 415, 429, 500, 503)


@dataclass(frozen=True)
class ContactsDependencies:
    """What the contact routes use besides the outbox: the list of live contacts and the key
    that seals its paging tokens."""

    contacts: Callable[[], ContactList]
    tokens: TokenCodec


def contact_routes(
    outbox: Outbox | AsyncOutbox, dependencies: Callable[[], ContactsDependencies]
) -> AggregateRoutes[Contact]:
    """The contact routes (function keys in Azure): create, read and change through the
    outbox, the list through `dependencies()`."""
    contacts = outbox.routes(
        Contact, view=ContactView, id_parameter=CONTACT_ID, etag_request_header=True
    )
    collection, one = Contact.collection, f"{Contact.collection}/{{id}}"

    contacts.create(
        route=collection,
        request=CreateContact,
        build=lambda body: Contact.create(**body.fields()),
        summary="Create a contact (raises ContactCreated)",
    )

    @contacts.api.operation(
        route=collection,
        method="GET",
        status=200,
        paged=True,
        summary="List contacts, one page at a time",
        response=ContactPage,
        errors=(400, 429, 500, 503),
        asynchronous=contacts.asynchronous,
    )
    async def list_contacts(call: HttpCall[None]) -> Reply:
        deps = dependencies()
        cursor = call.cursor(deps.tokens)
        page = await deps.contacts().list_page(
            page_size=call.page_size, continuation=cursor.store_token if cursor else None
        )
        token = next_token(page.continuation_token, cursor, deps.tokens)
        body = ContactPage.of(Page(page.items, token))
        return Reply(body, {"X-Continuation-Token": token} if token else {})

    contacts.read(route=one, summary="Read a contact", errors=_READ_ERRORS)
    contacts.update(
        route=one,
        method="PATCH",
        request=PatchContact,
        apply=Contact.change,
        errors=_WRITE_ERRORS,
        summary="Change any of name, email, description, company (one event per changed aspect)",
    )
    for aspect in REFERENCE_UPDATES:
        contacts.update(
            name=f"update_contact_{aspect}",
            route=f"{one}/update-{aspect}",
            method="POST",
            status=204,
            request=update_body(aspect),
            apply=Contact.change,
            changes=_as_patch(aspect),
            errors=_WRITE_ERRORS,
            summary=f"Change the {aspect}",
        )
    contacts.update(
        route=one,
        method="DELETE",
        status=204,
        apply=Contact.delete,
        errors=(400, 404, 412, 429, 500, 503),
        summary="Soft-delete a contact",
    )
    return contacts


def _as_patch(aspect: str) -> Callable[[Any], dict[str, Any]]:
    """The changes an `update-<aspect>` body stands for: the PATCH of that one aspect."""
    return lambda body: patch_of(aspect, body).changes()
