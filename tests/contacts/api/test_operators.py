"""The Contacts app's operators' models (entrypoints/operators.py): cosmos-outbox's, with the
`contactId` alias its operators and their scripts know, in a quarantine item and in a re-drive's
scope. Through the indexed functions on the in-memory services. The operators' routes
themselves (list, replay, discard, re-drive, status, their bound) are the library's, proven in
its package (packages/cosmos-outbox/tests/operators)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from cosmos_outbox.documents import EVENT_TYPE
from cosmos_outbox.http import bounded, operation_of
from entrypoints.bootstrap import BOUND_SETTING, bound_from_settings
from tests.contacts.api.test_http_api import ADA, Api, body, problem
from tests.contacts.conftest import FakeWorld


@pytest.fixture
def world() -> Iterator[FakeWorld]:
    """Without the claim check: an event larger than a message is quarantined."""
    world = FakeWorld(max_payload_bytes=0)
    try:
        yield world
    finally:
        world.client.close()


@pytest.fixture
def api(world: FakeWorld) -> Api:
    return Api(world.client)


def created(api: Api, email: str = "a@example.com") -> str:
    reply = api.create({**ADA, "email": email})
    assert reply.status_code == 201, reply.get_body()
    return str(body(reply)["id"])


def redrive(api: Api, payload: Any) -> Any:
    return api.call("redrive_events", "POST", "outbox/redrive", body=payload)


def test_a_quarantined_contact_event_is_listed_with_its_contact_id(
    api: Api, world: FakeWorld
) -> None:
    cid = created(api)
    [stored] = world.store.of_type(EVENT_TYPE)
    stored["body"] = json.dumps({**json.loads(stored["body"]), "description": "x" * 5000})
    world.store.put(stored)
    world.publisher.max_batch_bytes = 4096
    world.relay(world.store.of_type(EVENT_TYPE))
    [item] = body(api.call("list_quarantine", "GET", "outbox/quarantine"))["items"]
    assert (item["contactId"], item["aggregateId"], item["aggregateType"]) == (cid, cid, "contact")


def test_redrive_takes_the_contact_alias_and_the_generic_scope(api: Api) -> None:
    a = created(api, "a@example.com")
    api.write("patch_contact", "PATCH", a, body={"description": "d"})
    created(api, "b@example.com")

    def events(**scope: str) -> int:
        reply = redrive(api, {"since": "2000-01-01T00:00:00Z", **scope})
        assert reply.status_code == 202, reply.get_body()
        return int(body(reply)["events"])

    assert events() == 3
    assert events(aggregateType="contact", aggregateId=a) == 2
    assert events(contactId=a) == 2
    assert events(contactId=a, aggregateType="contact") == 2


@pytest.mark.parametrize(
    "scope",
    [
        {"contactId": "abc", "aggregateId": "abc", "aggregateType": "contact"},
        {"contactId": "abc", "aggregateType": "ticket"},
    ],
)
def test_a_redrive_scope_that_names_the_contact_twice_or_another_type_is_a_400(
    api: Api, scope: dict[str, str]
) -> None:
    doc = problem(redrive(api, {"since": "2000-01-01T00:00:00Z", **scope}), 400)
    assert doc["errors"][0]["field"] == "$"


def test_the_bound_of_the_bounded_routes_is_the_app_settings_and_a_bad_one_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`HTTP_BOUND_SECONDS=12.5`: the app's bounded routes (/health, the operators') answer within
    12.5 s, and its OpenAPI document says so (the bound reaches them through the outbox the app
    builds, never a library global: the document said 4 s when it was assigned); unset, the
    library's default; a bad one is refused naming the setting."""
    monkeypatch.setenv(BOUND_SETTING, "12.5")
    world = FakeWorld()
    try:
        declared = {n: operation_of(f.get_user_function()) for n, f in world.functions.items()}
        bounds = {n: op.bound_seconds for n, op in declared.items() if op and op.bounded}
        assert {"health", "outbox_status", "console_list_operations"} <= set(bounds)
        assert set(bounds.values()) == {12.5}, bounds
        document = body(world.client.call("openapi", "GET", "openapi.json"))
        health = document["paths"]["/health"]["get"]
        assert "answers within 12.5 s" in health["summary"], health["summary"]
        said = [
            op["responses"]["503"]["description"]
            for item in document["paths"].values()
            for op in item.values()
            if "answered within" in str(op.get("responses", {}).get("503", ""))
        ]
        assert len(said) > 20 and all("within 12.5 s" in d for d in said), said
        assert "within 4 s" not in json.dumps(document)
    finally:
        world.client.close()
    assert bound_from_settings({}) == bounded.BOUND_SECONDS == 4.0  # cosmos-outbox's
    for bad in ("soon", "0", "-1", "231", "nan"):
        with pytest.raises(ValueError, match=f"{BOUND_SETTING}='{bad}'"):
            bound_from_settings({BOUND_SETTING: bad})
