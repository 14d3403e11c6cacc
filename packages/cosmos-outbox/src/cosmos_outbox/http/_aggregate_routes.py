"""The route helper: an aggregate's routes in a few lines each.

`AggregateRoutes` declares, on an `HttpApi`, the operations every aggregate has, and serves them
with one `AggregateService`:

- `create`: POST a body, build the aggregate from it, commit it and its events in one batch;
  201 with `Location`, `ETag` and the aggregate's view (409 when its id is taken);
- `read`: GET one; 200 with `ETag` and the view; `If-None-Match` matching gives 304, a failing
  `If-Match` 412; a missing (or no longer live) aggregate 404;
- `update`: change one (PATCH, POST to an action route, DELETE...): load, evaluate the
  preconditions (`If-Match`, the reference sample's `ETag` request header, `If-None-Match`:
  RFC 9110 §13), apply the change, commit what it raised in one batch conditioned on the etag
  read; 200 with `ETag` and the view, or 204 with `ETag`. 404 when missing, 409 when a business
  rule refuses it (a DomainError), 412 when a precondition fails or another writer won,
  428 when `precondition_required` and the request has none.

Every write (create and update) takes an optional `Idempotency-Key` (`idempotent=False` turns
it off; `cosmos_outbox.http._idempotency_key`): the key's record, with the answer, is written in the
same batch as the change; a retry with the same key and request answers what the first answered
(status, ETag, Location, body as of that write; `Idempotent-Replayed: true`), without writing;
the same key with another request answers 422. A create with a key derives the new aggregate's
id from the key. Without the header, nothing of this happens.

An update's change is `apply(aggregate, **changes)`: by default the changes are the fields the
client sent (by their Python names), so a PATCH model's fields must be keyword parameters of the
aggregate's method; `cosmos_outbox.testing._checks` holds every declared command to that.

    orders = AggregateRoutes(api, Order, outbox.service(Order), view=OrderView)
    orders.create(route="orders", request=PlaceOrder, build=lambda body: Order.place(...),
                  summary="Place an order")
    orders.read(route="orders/{id}", summary="Read an order")
    orders.update(route="orders/{id}/cancel", method="POST", apply=Order.cancel,
                  summary="Cancel an order")
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Generic, TypeVar

import azure.functions as func
from pydantic import BaseModel

from cosmos_outbox._callables import refuse_async
from cosmos_outbox._domain import Aggregate
from cosmos_outbox._sync_over_async import resolved
from cosmos_outbox._write.idempotency import Answer, IdempotencyKey, Recorded
from cosmos_outbox._write.service import AggregateService, Versioned
from cosmos_outbox.http._api import HttpApi
from cosmos_outbox.http._call import HttpCall, Reply
from cosmos_outbox.http._conditional import Outcome, Preconditions
from cosmos_outbox.http._declaration import Command, ResponseHeader
from cosmos_outbox.http._idempotency_key import key_of
from cosmos_outbox.http._models import View, view_of
from cosmos_outbox.http._problems import HttpProblemError

A = TypeVar("A", bound="Aggregate")
B = TypeVar("B", bound="BaseModel")

__all__ = [
    "CREATE_ERRORS",
    "READ_ERRORS",
    "REPLAYED_HEADER",
    "UPDATE_ERRORS",
    "AggregateRoutes",
    "etag_header",
    "location_header",
    "sent_fields",
]

CREATE_ERRORS = (400, 409, 413, 415, 429, 500, 503)
READ_ERRORS = (400, 404, 412, 429, 500, 503)
UPDATE_ERRORS = (400, 404, 409, 412, 413, 415, 429, 500, 503)
#: Set on an answer given from an idempotency record (a retry's), as Stripe's API does.
REPLAYED_HEADER = "Idempotent-Replayed"


def etag_header(what: str) -> ResponseHeader:
    return ResponseHeader(
        "ETag", f"The entity tag of the stored {what} (strong)", {"type": "string"}
    )


def location_header(what: str) -> ResponseHeader:
    return ResponseHeader(
        "Location", f"The new {what}", {"type": "string", "format": "uri-reference"}
    )


def sent_fields(body: BaseModel) -> dict[str, Any]:
    """The fields the client sent, by their Python names (what `apply` takes by default)."""
    return {name: getattr(body, name) for name in body.model_fields_set}


class AggregateRoutes(Generic[A]):
    """The routes of one aggregate type on `api`, served by `service()` (the async API's
    service: its handlers are written once, as coroutines). Answers carry the aggregate as
    `view` (`View.of(aggregate)`; default: every field of the aggregate). `asynchronous`:
    the routes are `async def` functions on the worker's event loop (an `aio` outbox), which
    take async `build` / `apply` too; else sync functions, whose callables are plain (a
    coroutine function is refused when it is declared)."""

    def __init__(
        self,
        api: HttpApi,
        kind: type[A],
        service: Callable[[], AggregateService[A]],
        *,
        view: type[View] | None = None,
        asynchronous: bool = False,
    ) -> None:
        self.api = api
        self.kind = kind
        self.view = (
            view if view is not None else view_of(kind, name=f"{kind.__name__}View", hidden=set())
        )
        self._service = service
        self.asynchronous = asynchronous
        self.etag = etag_header(kind.aggregate_type)
        self.location = location_header(kind.aggregate_type)

    def _declared(self, fn: object, what: str) -> None:
        """A sync route calls `fn` in its thread: a coroutine function could not be awaited."""
        if not self.asynchronous:
            refuse_async(fn, what)

    def create(
        self,
        *,
        route: str,
        request: type[B],
        build: Callable[[B], A | Awaitable[A]],
        summary: str,
        name: str | None = None,
        errors: tuple[int, ...] = CREATE_ERRORS,
        idempotent: bool = True,
    ) -> None:
        """POST `route`: the aggregate `build` makes of the body, written with its events;
        201, `Location: /api/<route>/<id>`, `ETag`, the view. With an Idempotency-Key
        (unless `idempotent=False`), the aggregate's id is derived from the key."""

        self._declared(build, "build")

        def location(aggregate: A) -> str:
            return f"/api/{route}/{aggregate.id}"

        async def create(call: HttpCall[B]) -> Reply | func.HttpResponse:
            key = key_of(call, self._answer(201, body=True, location=location))
            if key is not None:
                return _answered(
                    key,
                    await self._service().create_idempotent(
                        lambda: build(call.body), key=key, traceparent=call.traceparent
                    ),
                )
            aggregate = await resolved(build(call.body))
            result = await self._service().create(aggregate, traceparent=call.traceparent)
            return self._reply(result, Location=location(aggregate))

        self.api.operation(
            name=name or f"create_{self.kind.aggregate_type}",
            route=route,
            method="POST",
            status=201,
            summary=summary,
            request=request,
            response=self.view,
            headers=(self.location, self.etag),
            errors=errors,
            command=Command(self.kind, "create", build),
            idempotent=idempotent,
            asynchronous=self.asynchronous,
        )(create)

    def read(
        self,
        *,
        route: str,
        summary: str,
        name: str | None = None,
        errors: tuple[int, ...] = READ_ERRORS,
    ) -> None:
        """GET `route` (with the aggregate's id as its one path parameter): 200, `ETag`, the
        view; 304 when If-None-Match matches; 412 when If-Match does not."""

        async def read(call: HttpCall[None]) -> Reply:
            result = await self._service().get(self._id(call))
            match call.preconditions.evaluate(result.etag, safe=True):
                case Outcome.NOT_MODIFIED:
                    return Reply(headers={"ETag": result.etag}, status=304)
                case Outcome.PRECONDITION_FAILED:
                    raise HttpProblemError(
                        412,
                        "Precondition Failed",
                        f"the {self.kind.aggregate_type} does not match the If-Match condition",
                    )
            return self._reply(result)

        self.api.operation(
            name=name or f"get_{self.kind.aggregate_type}",
            route=route,
            method="GET",
            status=200,
            conditional=True,
            summary=summary,
            response=self.view,
            headers=(self.etag,),
            errors=errors,
            asynchronous=self.asynchronous,
        )(read)

    def update(
        self,
        *,
        route: str,
        method: str,
        apply: Callable[..., object],
        summary: str,
        request: type[B] | None = None,
        changes: Callable[[B], Mapping[str, Any] | Awaitable[Mapping[str, Any]]] | None = None,
        status: int = 200,
        name: str | None = None,
        errors: tuple[int, ...] | None = None,
        precondition_required: bool = False,
        idempotent: bool = True,
    ) -> None:
        """`method` `route`: `apply(aggregate, **changes(body))` (the fields sent, unless
        `changes` derives them otherwise; no keyword arguments without a `request`) on the
        aggregate named by the route's id, under the request's preconditions; 200 with `ETag`
        and the view, or `status=204` with `ETag` only. Takes an Idempotency-Key unless
        `idempotent=False`."""
        self._declared(apply, "apply")
        if changes is not None:
            self._declared(changes, "changes")
        derive = changes if changes is not None else sent_fields

        async def update(call: HttpCall[Any]) -> Reply | func.HttpResponse:
            kwargs: Mapping[str, Any] = (
                await resolved(derive(call.body)) if request is not None else {}
            )
            key = key_of(call, self._answer(status, body=status != 204))
            if key is not None:
                return _answered(
                    key,
                    await self._service().change_idempotent(
                        self._id(call),
                        lambda aggregate: apply(aggregate, **kwargs),
                        key=key,
                        precondition=_precondition(call.write_preconditions),
                        traceparent=call.traceparent,
                    ),
                )
            result = await self._service().change(
                self._id(call),
                lambda aggregate: apply(aggregate, **kwargs),
                precondition=_precondition(call.write_preconditions),
                traceparent=call.traceparent,
            )
            if status == 204:
                return Reply(headers={"ETag": result.etag})
            return self._reply(result)

        self.api.operation(
            name=name or f"{method.lower()}_{self.kind.aggregate_type}",
            route=route,
            method=method,
            status=status,
            conditional=True,
            summary=summary,
            request=request,
            response=self.view if status != 204 else None,
            headers=(self.etag,),
            errors=_update_errors(errors, request is not None, precondition_required),
            precondition_required=precondition_required,
            command=Command(self.kind, "change", apply, changes),
            idempotent=idempotent,
            asynchronous=self.asynchronous,
        )(update)

    def _answer(
        self, status: int, *, body: bool, location: Callable[[A], str] | None = None
    ) -> Callable[[A], Answer]:
        """How a write's answer is made from the aggregate as written (what its idempotency
        record keeps): the status, the view as JSON, the Location."""

        def answer(aggregate: A) -> Answer:
            view = self.view.of(aggregate).model_dump(mode="json", by_alias=True) if body else None
            return Answer(status, view, location(aggregate) if location else None)

        return answer

    def _reply(self, result: Versioned[A], **headers: str) -> Reply:
        return Reply(self.view.of(result.aggregate), {"ETag": result.etag, **headers})

    @staticmethod
    def _id(call: HttpCall[Any]) -> str:
        [value] = call.path.values()
        return value


def _update_errors(
    errors: tuple[int, ...] | None, body: bool, precondition_required: bool
) -> tuple[int, ...]:
    """The errors an update declares: `errors`, else UPDATE_ERRORS (but 413 and 415 for one
    that takes no `body`); 428 too where a precondition is required."""
    if errors is None:
        errors = UPDATE_ERRORS if body else tuple(e for e in UPDATE_ERRORS if e not in (413, 415))
    if precondition_required and 428 not in errors:
        errors = tuple(sorted((*errors, 428)))
    return errors


def _answered(key: IdempotencyKey[A], result: Versioned[A] | Recorded) -> func.HttpResponse:
    """The answer of a write made with a key: made from the aggregate as written, or the one
    recorded by the earlier request with that key (marked `Idempotent-Replayed: true`). Both
    are built here, from an `Answer`, so a retry's answer is the first one's."""
    headers: dict[str, str] = {}
    if isinstance(result, Recorded):
        answer, headers["ETag"] = result.answer, result.etag
    else:
        answer, headers["ETag"] = key.answer_for(result.aggregate), result.etag
    if answer.location is not None:
        headers["Location"] = answer.location
    if isinstance(result, Recorded):
        headers[REPLAYED_HEADER] = "true"
    if answer.body is None:
        return func.HttpResponse(status_code=answer.status, headers=headers)
    # As pydantic writes a model (`model_dump_json`): compact, UTF-8 as is.
    return func.HttpResponse(
        json.dumps(answer.body, separators=(",", ":"), ensure_ascii=False),
        status_code=answer.status,
        headers=headers,
        mimetype="application/json",
    )


def _precondition(conditions: Preconditions | None) -> Callable[[str], bool] | None:
    if conditions is None:
        return None
    return lambda etag: conditions.evaluate(etag, safe=False) is Outcome.PROCEED
