"""Idempotency-Key on every contact write route (cosmos-outbox's route helper), through the
indexed functions on the in-memory fakes: a retry with the key answers what the first answered
and writes nothing, the key for another request is 422, a malformed key 400; every write route
documents the header and the 422; the relay and the contact list skip the records."""

from __future__ import annotations

import json
from typing import Any

import azure.functions as func
import pytest

from cosmos_outbox.documents import EVENT_TYPE, IDEMPOTENCY_TYPE
from cosmos_outbox.http import KEY_PATTERN
from tests.contacts.conftest import FakeWorld
from tests.contacts.openapi import openapi_document
from tests.contacts.api.test_http_api import ADA, Api, body, created, problem

KEY = "Idempotency-Key"

#: Every contact write: function, method, route suffix, body, success status.
WRITES: list[tuple[str, str, str, dict[str, Any] | None, int]] = [
    ("patch_contact", "PATCH", "", {"description": "retried"}, 200),
    ("update_contact_name", "POST", "/update-name", {"firstName": "A", "lastName": "B"}, 204),
    ("update_contact_email", "POST", "/update-email", {"email": "r@example.com"}, 204),
    ("update_contact_description", "POST", "/update-description", {"description": "d"}, 204),
    (
        "update_contact_company",
        "POST",
        "/update-company",
        {
            "companyName": "C",
            "street": "S",
            "houseNumber": "1",
            "postalCode": "P",
            "city": "X",
            "country": "Y",
        },
        204,
    ),
    ("delete_contact", "DELETE", "", None, 204),
]


def answer_of(response: func.HttpResponse) -> tuple[int, str | None, str | None, bytes]:
    return (
        response.status_code,
        response.headers.get("ETag"),
        response.headers.get("Location"),
        response.get_body(),
    )


@pytest.fixture
def api(world: FakeWorld) -> Api:
    return Api(world.client)


def test_a_retried_create_is_one_contact_one_event_and_the_same_answer(
    api: Api, world: FakeWorld
) -> None:
    first = api.create(headers={KEY: '"c-1"'})
    retry = api.create(headers={KEY: '"c-1"'})
    assert first.status_code == 201
    assert answer_of(retry) == answer_of(first)
    assert retry.headers["Idempotent-Replayed"] == "true"
    assert len(world.store.of_type("contact")) == len(world.store.of_type(EVENT_TYPE)) == 1
    assert world.store.batches == 1  # the retry wrote nothing


@pytest.mark.parametrize(("name", "method", "suffix", "payload", "status"), WRITES)
def test_every_write_retried_with_its_key_writes_once_and_answers_the_same(
    api: Api,
    world: FakeWorld,
    name: str,
    method: str,
    suffix: str,
    payload: dict[str, Any] | None,
    status: int,
) -> None:
    cid, etag = created(api)
    headers = {KEY: f"{name}-1", "If-Match": etag}
    first = api.write(name, method, cid, suffix, body=payload, headers=headers)
    assert first.status_code == status, first.get_body()
    retry = api.write(name, method, cid, suffix, body=payload, headers=headers)
    assert answer_of(retry) == answer_of(first)
    versions = [e["version"] for e in world.store.of_type(EVENT_TYPE)]
    assert sorted(versions) == [1, 2]  # created, and the one change: not twice
    if payload is not None:  # the same key with another body
        other = {
            k: (v + "x" if isinstance(v, str) and k != "email" else v) for k, v in payload.items()
        } | ({"email": "o@example.com"} if "email" in payload else {})
        problem(api.write(name, method, cid, suffix, body=other, headers=headers), 422)


@pytest.mark.parametrize(("name", "method", "suffix", "payload", "status"), WRITES)
def test_a_malformed_key_is_400_on_every_write(
    api: Api,
    world: FakeWorld,
    name: str,
    method: str,
    suffix: str,
    payload: dict[str, Any] | None,
    status: int,
) -> None:
    cid, _ = created(api)
    before = dict(world.store.documents)
    document = problem(
        api.write(name, method, cid, suffix, body=payload, headers={KEY: '"unterminated'}), 400
    )
    assert document["errors"] == [{"field": KEY, "message": document["detail"]}]
    assert world.store.documents == before
    problem(api.create(headers={KEY: "two words"}), 400)


def test_a_create_key_reused_for_another_contact_is_422(api: Api, world: FakeWorld) -> None:
    api.create(headers={KEY: "k"})
    refused = problem(api.create(ADA | {"email": "other@example.com"}, headers={KEY: "k"}), 422)
    assert refused["errors"][0]["field"] == KEY
    assert len(world.store.of_type("contact")) == 1


def test_records_are_neither_events_for_the_relay_nor_contacts_in_the_list(
    api: Api, world: FakeWorld
) -> None:
    cid, _ = created(api)
    api.write("patch_contact", "PATCH", cid, body={"description": "x"}, headers={KEY: "r"})
    api.create(headers={KEY: "c"})
    records = world.store.of_type(IDEMPOTENCY_TYPE)
    assert len(records) == 2
    world.relay(records + world.store.of_type(EVENT_TYPE))
    assert len(world.publisher.messages) == 3  # the events, none of the records
    listed = body(api.call("list_contacts", "GET", "contacts"))["items"]
    assert len(listed) == 2


def test_every_write_route_documents_the_key_and_422_and_no_read_does() -> None:
    document = openapi_document()
    writes = {
        (p, m)
        for p, ops in document["paths"].items()
        for m in ops
        if p.startswith("/contacts") and m != "get"
    }
    assert len(writes) == 7  # POST, PATCH, DELETE and the four update-* routes
    for path, ops in document["paths"].items():
        for method, operation in ops.items():
            names = {p["name"] for p in operation.get("parameters", [])}
            assert (KEY in names) == ((path, method) in writes), (path, method)
            assert ("422" in operation["responses"]) == ((path, method) in writes)
            if (path, method) in writes:
                [header] = [p for p in operation["parameters"] if p["name"] == KEY]
                assert header["schema"]["pattern"] == KEY_PATTERN
                assert json.dumps(operation["responses"]["422"]).count("problem+json") == 1
