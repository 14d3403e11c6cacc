"""Every route and every error status, called through the indexed function objects
(`FunctionClient`) with in-memory fakes of the project's ports."""

from __future__ import annotations

import json
from typing import Any

import azure.functions as func
import pytest

from cosmos_outbox.documents import envelope_and_data
from cosmos_outbox.errors import StoreUnavailableError, ThrottledError
from cosmos_outbox_testing import FunctionClient
from domain.contact import Contact
from tests.contacts.conftest import FakeWorld

JSON = {"content-type": "application/json"}
ADA = {
    "firstName": "Ada",
    "lastName": "Lovelace",
    "email": "ada@example.com",
    "companyName": "Engines",
}


class Api:
    """The app's functions called in-process (`FunctionClient`: its `async def` functions on
    the client's event loop, as the worker runs them)."""

    def __init__(self, client: FunctionClient) -> None:
        self.client = client

    def call(
        self,
        name: str,
        method: str,
        path: str,
        *,
        body: Any = None,
        raw: bytes | None = None,
        headers: dict[str, str] | None = None,
        route_params: dict[str, str] | None = None,
        params: dict[str, str] | None = None,
        trace_parent: str = "",
    ) -> func.HttpResponse:
        return self.client.call(
            name,
            method,
            path,
            body=body,
            raw=raw,
            headers=headers,
            route_params=route_params,
            params=params,
            trace_parent=trace_parent,
        )

    def create(self, body: dict[str, Any] | None = None, **kw: Any) -> func.HttpResponse:
        return self.call("create_contact", "POST", "contacts", body=body or ADA, **kw)

    def get(self, cid: str, **kw: Any) -> func.HttpResponse:
        return self.call("get_contact", "GET", f"contacts/{cid}", route_params={"id": cid}, **kw)

    def write(
        self, name: str, method: str, cid: str, suffix: str = "", **kw: Any
    ) -> func.HttpResponse:
        return self.call(name, method, f"contacts/{cid}{suffix}", route_params={"id": cid}, **kw)


def body(response: func.HttpResponse) -> Any:
    return json.loads(response.get_body())


def problem(response: func.HttpResponse, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.get_body()
    assert response.mimetype == "application/problem+json"
    doc = body(response)
    assert doc["status"] == status and doc["title"]
    assert "Traceback" not in response.get_body().decode()
    return doc  # type: ignore[no-any-return]


@pytest.fixture
def api(world: FakeWorld) -> Api:
    return Api(world.client)


def created(api: Api) -> tuple[str, str]:
    response = api.create()
    assert response.status_code == 201
    return body(response)["id"], response.headers["ETag"]


# -- happy paths ------------------------------------------------------------------------------


def test_create_returns_201_location_etag_and_the_contact(api: Api, world: FakeWorld) -> None:
    response = api.create(
        headers={"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
    )
    assert response.status_code == 201
    contact = body(response)
    assert response.headers["Location"] == f"/api/contacts/{contact['id']}"
    assert response.headers["ETag"]
    assert contact["name"] == {"firstName": "Ada", "lastName": "Lovelace"}
    assert contact["company"]["companyName"] == "Engines"
    assert contact["version"] == 1
    [event] = world.store.of_type("domainEvent")
    assert envelope_and_data(event)["action"] == "ContactCreatedEvent"
    assert envelope_and_data(event)["traceparent"].startswith("00-4bf92f3577b34da6")
    assert world.store.batches == 1


def test_events_carry_the_invocation_trace_context_over_the_header(
    api: Api, world: FakeWorld
) -> None:
    invocation = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    api.create(
        trace_parent=invocation,
        headers={"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
    )
    [event] = world.store.of_type("domainEvent")
    assert envelope_and_data(event)["traceparent"] == invocation


def test_create_accepts_a_full_company_object(api: Api) -> None:
    company = {
        "companyName": "Engines",
        "street": "Main",
        "houseNumber": "1",
        "postalCode": "W1",
        "city": "London",
        "country": "UK",
    }
    payload = {k: v for k, v in ADA.items() if k != "companyName"} | {"company": company}
    response = api.create(payload)
    assert response.status_code == 201
    assert body(response)["company"] == company


def test_get_returns_the_contact_with_its_etag_and_304_when_unchanged(api: Api) -> None:
    cid, etag = created(api)
    response = api.get(cid)
    assert response.status_code == 200
    assert response.headers["ETag"] == etag
    assert body(response)["email"] == "ada@example.com"
    not_modified = api.get(cid, headers={"If-None-Match": etag})
    assert not_modified.status_code == 304
    assert not_modified.get_body() == b""


def test_list_pages_with_a_continuation_token_in_query_or_header(api: Api) -> None:
    for i in range(3):
        api.create(ADA | {"email": f"p{i}@example.com"})
    first = api.call("list_contacts", "GET", "contacts", params={"pageSize": "2"})
    page = body(first)
    assert len(page["items"]) == 2 and page["hasMore"] is True
    assert set(page["items"][0]) == {"id", "email", "fullName", "companyName"}
    assert first.headers["X-Continuation-Token"] == page["continuationToken"]
    second = api.call(
        "list_contacts",
        "GET",
        "contacts",
        params={"pageSize": "2"},
        headers={"x-continuation-token": page["continuationToken"]},
    )
    rest = body(second)
    assert len(rest["items"]) == 1 and rest["hasMore"] is False
    assert rest["continuationToken"] is None


def test_list_defaults_to_ten_per_page(api: Api) -> None:
    for i in range(11):
        api.create(ADA | {"email": f"d{i}@example.com"})
    assert len(body(api.call("list_contacts", "GET", "contacts"))["items"]) == 10


def test_patch_raises_one_event_per_changed_aspect_in_one_batch(api: Api, world: FakeWorld) -> None:
    cid, etag = created(api)
    batches = world.store.batches
    response = api.write(
        "patch_contact",
        "PATCH",
        cid,
        body={
            "name": {"firstName": "Augusta", "lastName": "King"},
            "email": "ada@example.com",  # unchanged: raises nothing
            "description": "mathematician",
        },
        headers={"If-Match": etag},
    )
    assert response.status_code == 200
    assert body(response)["version"] == 3
    assert response.headers["ETag"] != etag
    assert world.store.batches == batches + 1
    actions = sorted(envelope_and_data(e)["action"] for e in world.store.of_type("domainEvent"))
    assert actions == [
        "ContactCreatedEvent",
        "ContactDescriptionUpdatedEvent",
        "ContactNameUpdatedEvent",
    ]


def test_patch_with_nothing_changed_writes_nothing(api: Api, world: FakeWorld) -> None:
    cid, etag = created(api)
    batches = world.store.batches
    response = api.write("patch_contact", "PATCH", cid, body={"email": "ada@example.com"})
    assert response.status_code == 200 and response.headers["ETag"] == etag
    assert world.store.batches == batches


@pytest.mark.parametrize(
    ("function", "suffix", "payload", "action"),
    [
        (
            "update_contact_name",
            "/update-name",
            {"firstName": "A", "lastName": "K"},
            "ContactNameUpdatedEvent",
        ),
        (
            "update_contact_email",
            "/update-email",
            {"email": "k@example.com"},
            "ContactEmailUpdatedEvent",
        ),
        (
            "update_contact_description",
            "/update-description",
            {"description": "d"},
            "ContactDescriptionUpdatedEvent",
        ),
        (
            "update_contact_company",
            "/update-company",
            {
                "companyName": "B",
                "street": "S",
                "houseNumber": "2",
                "postalCode": "P",
                "city": "C",
                "country": "X",
            },
            "ContactCompanyUpdatedEvent",
        ),
    ],
)
def test_reference_sample_update_routes_answer_204_with_etag(
    api: Api, world: FakeWorld, function: str, suffix: str, payload: dict[str, str], action: str
) -> None:
    cid, etag = created(api)
    response = api.write(function, "POST", cid, suffix, body=payload, headers={"ETag": etag})
    assert response.status_code == 204
    assert response.headers["ETag"] != etag
    assert action in {envelope_and_data(e)["action"] for e in world.store.of_type("domainEvent")}


def test_delete_is_soft_raises_contact_deleted_and_hides_the_contact(
    api: Api, world: FakeWorld
) -> None:
    cid, _ = created(api)
    response = api.write("delete_contact", "DELETE", cid)
    assert response.status_code == 204 and response.headers["ETag"]
    problem(api.get(cid), 404)
    stored = world.store.read(cid, cid)
    assert stored is not None and stored["data"]["deleted"] is True
    actions = {envelope_and_data(e)["action"] for e in world.store.of_type("domainEvent")}
    assert "ContactDeletedEvent" in actions
    assert body(api.call("list_contacts", "GET", "contacts"))["items"] == []
    problem(api.write("delete_contact", "DELETE", cid), 404)
    problem(
        api.write(
            "update_contact_email", "POST", cid, "/update-email", body={"email": "x@example.com"}
        ),
        404,
    )


def test_health_is_200_when_the_store_answers_and_503_when_not(world: FakeWorld) -> None:
    api = Api(world.client)
    assert api.call("health", "GET", "health").status_code == 200

    world.store.unavailable = StoreUnavailableError("down", retry_after=5)
    response = api.call("health", "GET", "health")
    assert problem(response, 503)
    assert response.headers["Retry-After"] == "5"


def test_openapi_json_is_served(api: Api) -> None:
    response = api.call("openapi", "GET", "openapi.json")
    assert response.status_code == 200
    assert body(response)["openapi"].startswith("3.1")


# -- errors -----------------------------------------------------------------------------------


def test_invalid_fields_give_400_with_one_error_per_field(api: Api, world: FakeWorld) -> None:
    response = api.create(
        {
            "firstName": "",
            "lastName": "x" * 101,
            "email": "nope",
            "companyName": "Engines",
            "nickname": "x",
        }
    )
    doc = problem(response, 400)
    fields = {e["field"] for e in doc["errors"]}
    assert fields == {"firstName", "lastName", "email", "nickname"}
    assert world.store.documents == {}


def test_nested_field_errors_name_the_path(api: Api) -> None:
    cid, _ = created(api)
    doc = problem(
        api.write(
            "patch_contact",
            "PATCH",
            cid,
            body={"company": {"companyName": "ok", "postalCode": "9" * 26}},
        ),
        400,
    )
    assert [e["field"] for e in doc["errors"]] == ["company.postalCode"]


def test_an_empty_patch_is_refused(api: Api) -> None:
    cid, _ = created(api)
    doc = problem(api.write("patch_contact", "PATCH", cid, body={}), 400)
    assert "at least one" in doc["errors"][0]["message"]


def test_company_name_and_company_are_exclusive(api: Api) -> None:
    problem(api.create(ADA | {"company": {"companyName": "Other"}}), 400)
    problem(api.create({k: v for k, v in ADA.items() if k != "companyName"}), 400)


@pytest.mark.parametrize("raw", [b"{not json", b"[1, 2]", b"\xff\xfe"])
def test_bad_json_is_400(api: Api, raw: bytes) -> None:
    doc = problem(api.call("create_contact", "POST", "contacts", raw=raw, headers=JSON), 400)
    assert doc["errors"][0]["field"] == "$"


def test_a_body_that_is_not_json_is_415(api: Api) -> None:
    problem(
        api.call(
            "create_contact",
            "POST",
            "contacts",
            raw=b"a=b",
            headers={"content-type": "application/x-www-form-urlencoded"},
        ),
        415,
    )
    problem(api.call("create_contact", "POST", "contacts", raw=json.dumps(ADA).encode()), 415)


def test_a_body_over_64_kib_is_413_and_nothing_is_written(api: Api, world: FakeWorld) -> None:
    big = json.dumps(ADA | {"description": "x" * (64 * 1024)}).encode()
    problem(api.call("create_contact", "POST", "contacts", raw=big, headers=JSON), 413)
    assert world.store.documents == {}


def test_unknown_contact_is_404(api: Api) -> None:
    problem(api.get("00000000-0000-0000-0000-000000000000"), 404)
    problem(api.write("patch_contact", "PATCH", "missing", body={"email": "a@example.com"}), 404)


def test_a_malformed_id_is_400_naming_the_id(api: Api) -> None:
    doc = problem(api.get("bad id?"), 400)
    assert doc["errors"][0]["field"] == "id"


@pytest.mark.parametrize("size", ["0", "101", "ten", "-1"])
def test_page_size_out_of_range_is_400(api: Api, size: str) -> None:
    doc = problem(api.call("list_contacts", "GET", "contacts", params={"pageSize": size}), 400)
    assert doc["errors"][0]["field"] == "pageSize"


def test_a_garbage_continuation_token_is_400(api: Api) -> None:
    doc = problem(
        api.call("list_contacts", "GET", "contacts", params={"continuationToken": "garbage"}), 400
    )
    assert doc["errors"][0]["field"] == "continuationToken"


def test_a_stale_etag_is_412_and_nothing_is_written(api: Api, world: FakeWorld) -> None:
    cid, stale = created(api)
    first = api.write(
        "update_contact_email",
        "POST",
        cid,
        "/update-email",
        body={"email": "b@example.com"},
        headers={"If-Match": stale},
    )
    assert first.status_code == 204
    before = len(world.store.documents)
    problem(
        api.write(
            "update_contact_email",
            "POST",
            cid,
            "/update-email",
            body={"email": "c@example.com"},
            headers={"If-Match": stale},
        ),
        412,
    )
    problem(api.write("delete_contact", "DELETE", cid, headers={"ETag": stale}), 412)
    assert len(world.store.documents) == before
    assert body(api.get(cid))["email"] == "b@example.com"


def test_a_write_racing_another_without_if_match_gets_412(
    api: Api, world: FakeWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No client etag: the write is still conditional on the etag the server read."""
    cid, _ = created(api)
    write = world.store.execute_batch

    def raced(partition_key: str, operations: Any) -> Any:
        # Another writer commits between this request's read and its write.
        monkeypatch.setattr(world.store, "execute_batch", write)
        with world.uow() as other:
            other.repository(Contact).get(cid).describe("the other writer")
            other.commit()
        return write(partition_key, operations)

    monkeypatch.setattr(world.store, "execute_batch", raced)
    problem(
        api.write(
            "update_contact_description",
            "POST",
            cid,
            "/update-description",
            body={"description": "mine"},
        ),
        412,
    )
    assert body(api.get(cid))["description"] == "the other writer"


@pytest.mark.parametrize(
    ("error", "status", "retry_after"),
    [
        (ThrottledError("busy", retry_after=2.2), 429, "3"),
        (StoreUnavailableError("down", retry_after=0.1), 503, "1"),
    ],
)
def test_throttling_and_outages_give_retry_after(
    api: Api, world: FakeWorld, error: Exception, status: int, retry_after: str
) -> None:
    world.store.fail_next = error  # type: ignore[assignment]
    response = api.create()
    problem(response, status)
    assert response.headers["Retry-After"] == retry_after
    assert world.store.documents == {}


def test_an_unexpected_error_is_a_bare_500(api: Api, world: FakeWorld) -> None:
    world.store.fail_next = RuntimeError(  # type: ignore[assignment]
        "secret internals: AccountKey=abc"
    )
    response = api.create()
    doc = problem(response, 500)
    assert "AccountKey" not in json.dumps(doc) and "RuntimeError" not in json.dumps(doc)
