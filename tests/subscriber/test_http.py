"""The projection read over HTTP (the subscriber's routes on cosmos-outbox's HTTP layer), through
the app's indexed functions, on an in-memory fake of its reads port: views, 404, paging with
sealed tokens, and hostile input, which is a 400 problem document and never a 5xx; the store's
failures are 429/503 with Retry-After. Also the functions the subscriber app indexes: GET only,
a function key in Azure."""

from __future__ import annotations

import json
from typing import Any

import azure.functions as func
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tests.subscriber  # noqa: F401  (puts subscriber/ on sys.path)
from cosmos_outbox.errors import (
    InvalidContinuationError,
    OutboxError,
    StoreUnavailableError,
    ThrottledError,
)
from cosmos_outbox.http import MAX_PAGE_SIZE, Cursor, TokenCodec
from cosmos_outbox.ports import Page
from cosmos_outbox.subscriber.aio import Projector
from cosmos_outbox_testing import FunctionClient, InMemoryStore
from tests.subscriber import subscriber_functions

from contacts_projection.bootstrap import Services, bootstrap  # isort: skip
from contacts_projection.projection import ContactProjection  # isort: skip
from contacts_projection.reads import ProjectionReads, ProjectionView  # isort: skip


class InMemoryReads(ProjectionReads):
    """Views in a list; the store's token is the index of the next item."""

    def __init__(self, count: int = 0) -> None:
        self.views = [
            ProjectionView.of(
                {
                    "id": f"c{i:03d}",
                    "version": i % 3 + 1,
                    "lastEventId": f"e{i}",
                    "deleted": i % 5 == 0,
                    "data": {"email": f"c{i}@example.com"},
                }
            )
            for i in range(count)
        ]
        self.failure: OutboxError | None = None
        self.continuations: list[str | None] = []

    async def get(self, contact_id: str) -> ProjectionView | None:
        if self.failure:
            raise self.failure
        return next((v for v in self.views if v.id == contact_id), None)

    async def page(self, *, size: int, continuation: str | None) -> Page[ProjectionView]:
        if self.failure:
            raise self.failure
        self.continuations.append(continuation)
        start = int(continuation) if continuation else 0
        end = start + size
        return Page(self.views[start:end], str(end) if end < len(self.views) else None)


TOKENS = TokenCodec(b"tests: the subscriber's token key")


def seal(store_token: str, codec: TokenCodec = TOKENS) -> str:
    """A token of the first page after this store token, as the app issues them."""
    return codec.encode(Cursor(store_token=store_token, page=1))


def client(reads: ProjectionReads) -> FunctionClient:
    """The subscriber app on `reads` (its projector is not reached by the HTTP functions)."""
    projector = Projector(InMemoryStore(), ContactProjection(), inbox_ttl_seconds=3600)
    return FunctionClient(
        bootstrap(lambda: Services(projector=projector, reads=reads, tokens=TOKENS))
    )


def call(
    reads: ProjectionReads,
    name: str,
    path: str,
    *,
    params: dict[str, str] | None = None,
    headers: dict[str, str] | None = None,
    route_params: dict[str, str] | None = None,
) -> func.HttpResponse:
    """One request to HTTP function `name` of the app on `reads` (an `async def` function, run
    on the client's event loop, closed after it)."""
    with client(reads) as functions:
        return functions.call(
            name, "GET", path, params=params, headers=headers, route_params=route_params
        )


def read_projection(
    reads: ProjectionReads,
    contact_id: str,
    *,
    params: dict[str, str] | None = None,
    headers: dict[str, str] | None = None,
) -> func.HttpResponse:
    """GET projections/contacts/{id} with this route value (routable or not)."""
    return call(
        reads,
        "read_contact_projection",
        f"projections/contacts/{contact_id}",
        params=params,
        headers=headers,
        route_params={"id": contact_id},
    )


def read(reads: ProjectionReads, contact_id: str, **params: str) -> func.HttpResponse:
    return read_projection(reads, contact_id, params=params)


def listing(
    reads: ProjectionReads, *, headers: dict[str, str] | None = None, **params: str
) -> func.HttpResponse:
    return call(
        reads, "list_contact_projections", "projections/contacts", params=params, headers=headers
    )


def body(response: func.HttpResponse) -> Any:
    assert response.status_code == 200, response.get_body()
    assert response.mimetype == "application/json"
    return json.loads(response.get_body())


def problem(response: func.HttpResponse, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.get_body()
    assert response.mimetype == "application/problem+json"
    document: dict[str, Any] = json.loads(response.get_body())
    assert document["status"] == status and document["title"] and document["detail"]
    assert document["type"] == "about:blank"
    return document


def test_a_projection_is_read_with_its_version_last_event_and_deleted_flag() -> None:
    reads = InMemoryReads(3)
    assert body(read(reads, "c001")) == {
        "id": "c001",
        "version": 2,
        "lastEventId": "e1",
        "deleted": False,
        "data": {"email": "c1@example.com"},
    }
    assert body(read(reads, "c000", code="function-key"))["deleted"] is True


def test_an_unknown_contact_is_a_404_problem() -> None:
    assert "no projection" in problem(read(InMemoryReads(1), "c999"), 404)["detail"]


@pytest.mark.parametrize(
    "contact_id", ["", "-x", ".", "a" * 129, "a/b", "a b", "é", "a\x00", "%2F", "a\u202e"]
)
def test_an_id_that_is_not_one_is_a_400_naming_it(contact_id: str) -> None:
    document = problem(read(InMemoryReads(1), contact_id), 400)
    assert document["errors"] == [{"field": "id", "message": document["detail"]}]


def test_unknown_query_parameters_are_refused() -> None:
    problem(read(InMemoryReads(1), "c000", page="2"), 400)
    document = problem(listing(InMemoryReads(1), sort="id"), 400)
    assert document["errors"][0]["field"] == "sort"


def test_the_list_pages_through_every_projection_once_with_sealed_tokens() -> None:
    reads = InMemoryReads(25)
    seen: list[str] = []
    page = body(listing(reads, pageSize="10"))
    while True:
        seen += [v["id"] for v in page["items"]]
        if not page["hasMore"]:
            assert page["continuationToken"] is None
            break
        token = page["continuationToken"]
        assert token.startswith("p1.") and "10" not in token.split(".")[0]
        page = body(listing(reads, headers={"x-continuation-token": token}, pageSize="10"))
    assert seen == [v.id for v in reads.views]
    assert reads.continuations == [None, "10", "20"]
    first = listing(reads, pageSize="10")
    assert first.headers["X-Continuation-Token"] == body(first)["continuationToken"]
    assert len(body(listing(reads))["items"]) == 10  # the default page size


@pytest.mark.parametrize(
    "size", ["0", str(MAX_PAGE_SIZE + 1), "-1", "1e1", " 5", "", "x", "99999999999999999999"]
)
def test_a_bad_page_size_is_a_400(size: str) -> None:
    assert (
        problem(listing(InMemoryReads(1), pageSize=size), 400)["errors"][0]["field"] == "pageSize"
    )


def test_a_token_it_did_not_issue_is_a_400_and_never_reaches_the_store() -> None:
    reads = InMemoryReads(25)
    token = body(listing(reads, pageSize="10"))["continuationToken"]
    version, payload, mac = token.split(".")
    forged = seal("10", TokenCodec(b"another key, not the app's"))
    for bad in (
        "garbage",
        token + "x",
        f"{version}.{payload}x.{mac}",
        forged,
        "p1..",
        "p1." + "A" * 9000 + "." + mac,
        "t1." + payload + "." + mac,
    ):
        problem(listing(reads, continuationToken=bad), 400)
    assert reads.continuations == [None]
    problem(listing(reads, continuationToken=token, headers={"x-continuation-token": forged}), 400)


def test_a_store_token_that_does_not_move_ends_the_listing() -> None:
    class Stuck(InMemoryReads):
        async def page(self, *, size: int, continuation: str | None) -> Page[ProjectionView]:
            return Page([], "same")

    first = body(listing(Stuck(), continuationToken=seal("same")))
    assert (first["hasMore"], first["continuationToken"]) == (False, None)


@pytest.mark.parametrize(("status", "retry"), [(503, 1.0), (429, 2.5)])
def test_the_store_failing_is_a_503_or_429_with_retry_after(status: int, retry: float) -> None:
    reads = InMemoryReads(1)
    failure = ThrottledError if status == 429 else StoreUnavailableError
    reads.failure = failure("the store failed", retry_after=retry)
    for response in (read(reads, "c000"), listing(reads)):
        problem(response, status)
        assert response.headers["Retry-After"] == str(int(-(-retry // 1)))


def test_a_token_the_store_refuses_is_a_400() -> None:
    reads = InMemoryReads(1)
    reads.failure = InvalidContinuationError("the store refused it")
    assert (
        problem(listing(reads, continuationToken=seal("0")), 400)["errors"][0]["field"]
        == "continuationToken"
    )


@settings(max_examples=200)
@given(
    st.text(max_size=200),
    st.dictionaries(
        st.sampled_from(["pageSize", "continuationToken", "code", "x"]),
        st.text(max_size=50),
        max_size=3,
    ),
    st.dictionaries(
        st.sampled_from(["x-continuation-token", "accept"]), st.text(max_size=50), max_size=2
    ),
)
def test_no_id_query_or_header_gives_a_5xx(
    contact_id: str, params: dict[str, str], headers: dict[str, str]
) -> None:
    reads = InMemoryReads(5)
    for response in (
        read_projection(reads, contact_id, params=params, headers=headers),
        listing(reads, headers=headers, **params),
    ):
        assert response.status_code < 500, response.get_body()
        json.loads(response.get_body())


def test_the_routes_are_get_only_and_take_a_function_key_in_azure() -> None:
    functions = subscriber_functions()
    routes = {}
    for name, function in functions.items():
        for binding in function["bindings"]:
            if binding["type"] == "httpTrigger":
                routes[name] = (binding["route"], binding["methods"], binding["authLevel"])
    assert routes == {
        "read_contact_projection": ("projections/contacts/{id}", ["GET"], "FUNCTION"),
        "list_contact_projections": ("projections/contacts", ["GET"], "FUNCTION"),
    }
