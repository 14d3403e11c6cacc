"""The contact API as a Functions blueprint: each operation declared once, next to its handler
(`entrypoints.http.operations`). Handlers call the use cases and map the result; they never
touch storage.

The reference sample's one-aspect routes (`POST /contacts/{id}/update-<aspect>`, 204) are
declared from one table (`REFERENCE_UPDATES`): each is a PATCH of that aspect, with a body
derived from `PatchContact` (`application.contacts.commands.update_body`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import azure.functions as func

from application.conditional import Outcome
from application.contacts.commands import CreateContact, PatchContact, patch_of, update_body
from application.contacts.service import ContactService, Versioned
from application.contacts.views import ContactPage, ContactView
from domain.contact import Contact
from entrypoints.http.operations import (
    HttpApi,
    HttpCall,
    PathParameter,
    Reply,
    ResponseHeader,
)
from entrypoints.http.paging import TokenCodec, next_token
from entrypoints.http.problems import HttpProblemError

#: The reference sample's routes, one per aspect of PatchContact, kept for its clients.
REFERENCE_UPDATES = ("name", "email", "description", "company")

CONTACT_ID = PathParameter("id", "the contact id")
ETAG = ResponseHeader("ETag", "The entity tag of the stored contact (strong)",
                      {"type": "string"})
LOCATION = ResponseHeader("Location", "The new contact",
                          {"type": "string", "format": "uri-reference"})
_READ_ERRORS = (400, 404, 412, 429, 500, 503)
_WRITE_ERRORS = (400, 404, 412, 413, 415, 429, 500, 503)


@dataclass(frozen=True)
class ContactsDependencies:
    """What the contact routes use: the service and the key that seals the list's tokens."""

    service: ContactService
    tokens: TokenCodec


def _contact(result: Versioned, **headers: str) -> Reply:
    return Reply(ContactView.of(result.contact), {"ETag": result.etag, **headers})


def _no_content(result: Versioned) -> Reply:
    return Reply(headers={"ETag": result.etag})


def contacts_blueprint(dependencies: Callable[[], ContactsDependencies]) -> func.Blueprint:
    """The contact routes (function keys in Azure), served with `dependencies()`."""
    bp = func.Blueprint()  # type: ignore[no-untyped-call]  # untyped in azure-functions
    api = HttpApi(bp, parameters={"id": CONTACT_ID})
    collection = Contact.collection

    @api.operation(route=collection, method="POST", status=201,
                   summary="Create a contact (raises ContactCreated)",
                   request=CreateContact, response=ContactView, headers=(LOCATION, ETAG),
                   errors=(400, 409, 413, 415, 429, 500, 503))
    def create_contact(call: HttpCall[CreateContact]) -> Reply:
        result = dependencies().service.create(call.body, traceparent=call.traceparent)
        return _contact(result, Location=f"/api/{collection}/{result.contact.id}")

    @api.operation(route=collection, method="GET", status=200, paged=True,
                   summary="List contacts, one page at a time", response=ContactPage,
                   errors=(400, 429, 500, 503))
    def list_contacts(call: HttpCall[None]) -> Reply:
        deps = dependencies()
        cursor = call.cursor(deps.tokens)
        page = deps.service.list_page(page_size=call.page_size,
                                      continuation=cursor.store_token if cursor else None)
        token = next_token(page.continuation_token, cursor, deps.tokens)
        body = ContactPage.of(type(page)(page.items, token))
        return Reply(body, {"X-Continuation-Token": token} if token else {})

    @api.operation(route=f"{collection}/{{id}}", method="GET", status=200, conditional=True,
                   summary="Read a contact", response=ContactView, headers=(ETAG,),
                   errors=_READ_ERRORS)
    def get_contact(call: HttpCall[None]) -> Reply:
        result = dependencies().service.get(call.path["id"])
        match call.preconditions.evaluate(result.etag, safe=True):
            case Outcome.NOT_MODIFIED:
                return Reply(headers={"ETag": result.etag}, status=304)
            case Outcome.PRECONDITION_FAILED:
                raise HttpProblemError(412, "Precondition Failed",
                                       "the contact does not match the If-Match condition")
        return _contact(result)

    @api.operation(route=f"{collection}/{{id}}", method="PATCH", status=200,
                   conditional=True, request=PatchContact, response=ContactView,
                   headers=(ETAG,), errors=_WRITE_ERRORS,
                   summary="Change any of name, email, description, company "
                           "(one event per changed aspect)")
    def patch_contact(call: HttpCall[PatchContact]) -> Reply:
        return _contact(_patch(call, call.body))

    def _patch(call: HttpCall[Any], command: PatchContact) -> Versioned:
        return dependencies().service.patch(
            call.path["id"], command, preconditions=call.write_preconditions,
            traceparent=call.traceparent)

    def reference_update(aspect: str) -> Callable[[HttpCall[Any]], Reply]:
        def update(call: HttpCall[Any]) -> Reply:
            return _no_content(_patch(call, patch_of(aspect, call.body)))

        return update

    for aspect in REFERENCE_UPDATES:
        api.operation(name=f"update_contact_{aspect}", route=f"{collection}/{{id}}/update-{aspect}",
                      method="POST", status=204, conditional=True, request=update_body(aspect),
                      headers=(ETAG,), errors=_WRITE_ERRORS,
                      summary=f"Change the {aspect}")(reference_update(aspect))

    @api.operation(route=f"{collection}/{{id}}", method="DELETE", status=204, conditional=True,
                   summary="Soft-delete a contact", headers=(ETAG,),
                   errors=(400, 404, 412, 429, 500, 503))
    def delete_contact(call: HttpCall[None]) -> Reply:
        return _no_content(dependencies().service.delete(
            call.path["id"], preconditions=call.write_preconditions,
            traceparent=call.traceparent))

    return bp
