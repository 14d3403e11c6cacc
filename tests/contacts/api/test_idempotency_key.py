"""Idempotency-Key on every contact write route (cosmos-outbox's route helper), through the
indexed functions on the in-memory fakes: a retry with the key answers what the first answered
and writes nothing, the key for another request is 422; the contact list skips the records.
The protocol itself (replay, 422, malformed keys, TTL, scope, the OpenAPI document, records the
relay skips) is the library's, proven in its package
(packages/cosmos-outbox/tests/http_api/test_idempotency.py)."""

from __future__ import annotations

from typing import Any

import azure.functions as func
import pytest

from cosmos_outbox.documents import EVENT_TYPE, IDEMPOTENCY_TYPE
from tests.contacts.api.test_http_api import Api, body, created, problem
from tests.contacts.conftest import FakeWorld

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


def test_a_retried_create_answers_the_same_and_the_records_are_no_contacts_in_the_list(
    api: Api, world: FakeWorld
) -> None:
    cid, _ = created(api)
    api.write("patch_contact", "PATCH", cid, body={"description": "x"}, headers={KEY: "r"})
    first = api.create(headers={KEY: "c"})
    assert answer_of(api.create(headers={KEY: "c"})) == answer_of(first)
    assert len(world.store.of_type(IDEMPOTENCY_TYPE)) == 2
    listed = body(api.call("list_contacts", "GET", "contacts"))["items"]
    assert len(listed) == 2
