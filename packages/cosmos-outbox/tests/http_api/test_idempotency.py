"""Idempotency-Key: the header's value, the fingerprint and the record, and the route helper's
writes with a key (the ticket app on the in-memory services): a retry answers as the first did
and writes nothing; the same key for another request is 422; a malformed key 400; a key past
its TTL is new; without a key nothing changes."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

import azure.functions as func
import pytest
from conftest import TicketWorld, body, problem
from hypothesis import given
from hypothesis import strategies as st
from tickets import OpenTicket, Ticket, TicketView

from cosmos_outbox._mapper import EVENT_TYPE, read_feed
from cosmos_outbox._records import NotAnEvent
from cosmos_outbox._write.idempotency import (
    IDEMPOTENCY_TYPE,
    Answer,
    IdempotencyRecord,
    derived_id,
    idempotency_record,
    record_document,
    record_id,
)
from cosmos_outbox.errors import StoreUnavailableError
from cosmos_outbox.http._idempotency_key import KEY_PATTERN, parse_key, request_fingerprint, scope
from cosmos_outbox.http._problems import HttpProblemError
from cosmos_outbox.ports import BatchOperation

KEY = "Idempotency-Key"

#: Where App Service Authentication is believed to name the caller (`cosmos_outbox.http.
#: sign_in_trust`): the owner says it signs callers in, the platform that it is on, not locally.
BELIEVED = {"WEBSITE_AUTH_ENABLED": "True", "OUTBOX_CONSOLE_SIGN_IN": "app-service-authentication"}
TRUST_SETTINGS = (
    "WEBSITE_AUTH_ENABLED",
    "OUTBOX_CONSOLE_SIGN_IN",
    "FUNCTIONS_CORETOOLS_ENVIRONMENT",
)
ALICE = {"x-ms-client-principal-idp": "aad", "x-ms-client-principal-id": "alice"}
BOB = {"x-ms-client-principal-idp": "aad", "x-ms-client-principal-id": "bob"}


def trust(monkeypatch: pytest.MonkeyPatch, values: dict[str, str]) -> None:
    for name in TRUST_SETTINGS:
        monkeypatch.delenv(name, raising=False)
    for name, value in values.items():
        monkeypatch.setenv(name, value)


def answer_of(response: func.HttpResponse) -> tuple[int, str | None, str | None, bytes]:
    """What a client compares between a write's answer and its retry's."""
    return (
        response.status_code,
        response.headers.get("ETag"),
        response.headers.get("Location"),
        response.get_body(),
    )


def of_type(world: TicketWorld, kind: str) -> list[dict[str, Any]]:
    return world.memory.store.of_type(kind)


# -- the header ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "key"),
    [
        ('"8e03978e-40d5-43e8-bc93-6894a57f9324"', "8e03978e-40d5-43e8-bc93-6894a57f9324"),
        ("8e03978e-40d5-43e8-bc93-6894a57f9324", "8e03978e-40d5-43e8-bc93-6894a57f9324"),
        ('"with space"', "with space"),
        (r'"a\"b\\c"', 'a"b\\c'),
        (' "padded" ', "padded"),
        ('"' + "k" * 255 + '"', "k" * 255),
        ("k" * 255, "k" * 255),
        ("a;b=c,d", "a;b=c,d"),  # bare: the value as it is
    ],
)
def test_a_key_is_a_quoted_sf_string_or_bare(value: str, key: str) -> None:
    assert parse_key(value) == key


@pytest.mark.parametrize(
    "value",
    [
        "",
        '""',
        '"' + "k" * 256 + '"',
        "k" * 256,
        '"abc',
        'abc"',
        '"a"b"',
        '"a\\b"',
        '"abc";p=1',
        '"a", "b"',
        "with space",
        "caf\u00e9",
        '"caf\u00e9"',
        '"tab\t"',
        "a\\b",
        '"\x7f"',
    ],
)
def test_a_malformed_key_is_refused_naming_the_header(value: str) -> None:
    with pytest.raises(HttpProblemError) as info:
        parse_key(value)
    assert info.value.problem.status == 400
    assert info.value.problem.errors is not None
    assert info.value.problem.errors[0].field == KEY


def test_no_header_is_no_key() -> None:
    assert parse_key(None) is None


@given(st.text(max_size=300))
def test_the_published_pattern_is_what_parsing_accepts(value: str) -> None:
    try:
        parse_key(value)
        accepted = True
    except HttpProblemError:
        accepted = False
    assert accepted == bool(re.fullmatch(KEY_PATTERN, value.strip(" \t")))


@given(st.from_regex(KEY_PATTERN, fullmatch=True))
def test_every_value_the_pattern_generates_is_a_key_and_quoting_keeps_it(value: str) -> None:
    key = parse_key(value)
    assert key is not None and 1 <= len(key) <= 255
    quoted = '"' + key.replace("\\", "\\\\").replace('"', '\\"') + '"'
    assert parse_key(quoted) == key


# -- scope, fingerprint, record -----------------------------------------------------------------


def test_the_fingerprint_is_of_the_validated_request_not_its_formatting() -> None:
    one = OpenTicket.model_validate_json('{"title": " Printer ", "code": "ABC"}')
    same = OpenTicket.model_validate_json('{"code":"ABC","title":"Printer"}')
    other = OpenTicket.model_validate_json('{"title": "Printer", "code": "ABD"}')
    fp = request_fingerprint
    assert fp("POST", "tickets", {}, one) == fp("POST", "tickets", {}, same)
    assert fp("POST", "tickets", {}, one) != fp("POST", "tickets", {}, other)
    assert fp("POST", "tickets", {}, one) != fp("PUT", "tickets", {}, one)
    assert fp("POST", "tickets/{id}", {"id": "a"}, None) != fp(
        "POST", "tickets/{id}", {"id": "b"}, None
    )
    # a default left out is not the same request as the value sent (PATCH semantics)
    defaulted = OpenTicket.model_validate_json('{"title": "Printer"}')
    explicit = OpenTicket.model_validate_json('{"title": "Printer", "code": "NEW"}')
    assert fp("POST", "tickets", {}, defaulted) != fp("POST", "tickets", {}, explicit)
    assert re.fullmatch("[0-9a-f]{64}", fp("POST", "tickets", {}, one))


def test_a_key_is_scoped_by_route_and_by_the_caller_the_platform_names() -> None:
    anonymous = scope("POST", "tickets", {}, BELIEVED)
    assert anonymous == "POST tickets"
    assert scope("PATCH", "tickets/{id}", {}, BELIEVED) != anonymous
    alice = scope("POST", "tickets", ALICE, BELIEVED)
    bob = scope("POST", "tickets", BOB, BELIEVED)
    assert len({anonymous, alice, bob}) == 3
    assert record_id(alice, "k") != record_id(bob, "k") != record_id(anonymous, "k")


def test_the_record_id_and_derived_ids_never_show_the_key() -> None:
    rid = record_id("POST tickets", "secret-key")
    assert re.fullmatch("idem-[0-9a-f]{64}", rid)
    ids = {derived_id("POST tickets", "secret-key", g) for g in range(3)}
    assert len(ids) == 3 and not any("secret" in i for i in ids)
    assert derived_id("POST tickets", "secret-key") == derived_id("POST tickets", "secret-key")
    # no ambiguity between the scope and the key
    assert record_id("a", "bc") != record_id("ab", "c")


def test_a_record_round_trips_through_its_document_and_is_no_event() -> None:
    record = IdempotencyRecord(
        record_id=record_id("POST tickets", "k"),
        aggregate_type="ticket",
        aggregate_id="t1",
        fingerprint="f" * 64,
        version=3,
        request="POST tickets",
        answer=Answer(201, {"id": "t1", "title": "Zoë"}, "/api/tickets/t1"),
    )
    document = record_document(record, ttl_seconds=86400)
    assert (document["type"], document["partitionKey"], document["ttl"]) == (
        IDEMPOTENCY_TYPE,
        "t1",
        86400,
    )
    assert idempotency_record(json.loads(json.dumps(document))) == record
    assert [type(i) for i in read_feed([document])] == [NotAnEvent]
    assert idempotency_record({**document, "type": "ticket"}) is None
    assert idempotency_record({**document, "answer": {"status": "201"}}) is None


# -- the route helper with a key ------------------------------------------------------------------


def post(
    world: TicketWorld,
    key: str | None,
    payload: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
) -> func.HttpResponse:
    sent = dict(headers or {})
    if key is not None:
        sent[KEY] = key
    return world.client.request("POST", "tickets", body=payload or {"title": "Zoë"}, headers=sent)


def test_a_create_retried_with_its_key_answers_the_same_and_writes_once(
    world: TicketWorld,
) -> None:
    first = post(world, '"create-1"')
    assert first.status_code == 201
    retry = post(world, "create-1")  # bare: the same key
    assert answer_of(retry) == answer_of(first)
    assert retry.headers["Idempotent-Replayed"] == "true"
    assert "Idempotent-Replayed" not in first.headers
    assert len(of_type(world, "ticket")) == len(of_type(world, EVENT_TYPE)) == 1
    [record] = of_type(world, IDEMPOTENCY_TYPE)
    ticket = body(first)
    assert record["partitionKey"] == ticket["id"]
    assert record["answer"] == {
        "status": 201,
        "location": f"/api/tickets/{ticket['id']}",
        "body": ticket,
    }
    assert "create-1" not in json.dumps(record)


def test_the_body_with_a_key_is_byte_for_byte_the_body_without(world: TicketWorld) -> None:
    keyed, plain = post(world, "bytes"), post(world, None)
    ticket = body(keyed)
    view = TicketView.model_validate({**body(plain), "id": ticket["id"]})
    assert keyed.get_body() == view.model_dump_json(by_alias=True).encode()
    replayed = post(world, "bytes").get_body()
    assert replayed == keyed.get_body() and "ë".encode() in replayed  # UTF-8, not \u00eb


def test_the_same_key_with_another_body_is_422_and_writes_nothing(world: TicketWorld) -> None:
    post(world, "k")
    before = dict(world.memory.store.documents)
    refused = problem(post(world, "k", {"title": "Another"}), 422)
    assert refused["title"] == "Unprocessable Content"
    assert "Idempotency-Key" in refused["detail"]
    assert world.memory.store.documents == before


def test_a_malformed_key_is_400_and_writes_nothing(world: TicketWorld) -> None:
    for value in ('""', "two words", '"a";b=1', "k" * 256):
        document = problem(post(world, value), 400)
        assert document["errors"][0]["field"] == KEY
    assert world.memory.store.documents == {}


def test_without_a_key_nothing_is_recorded_and_ids_are_random(world: TicketWorld) -> None:
    first, second = post(world, None), post(world, None)
    assert body(first)["id"] != body(second)["id"]
    assert of_type(world, IDEMPOTENCY_TYPE) == []
    assert "Idempotent-Replayed" not in first.headers


def test_a_create_whose_answer_was_lost_after_the_commit_is_answered_on_retry(
    world: TicketWorld,
) -> None:
    """The batch commits, then the store fails to answer (a timeout after the commit): the
    client sees 503 and retries with its key."""
    store = world.memory.store
    commit = store.execute_batch

    def lost_answer(partition_key: str, operations: Sequence[BatchOperation]) -> list[str | None]:
        commit(partition_key, operations)
        raise StoreUnavailableError("the store timed out")

    store.execute_batch = lost_answer  # type: ignore[method-assign]
    problem(post(world, "lost"), 503)
    del store.execute_batch
    retry = post(world, "lost")
    assert retry.status_code == 201 and retry.headers["Idempotent-Replayed"] == "true"
    assert len(of_type(world, "ticket")) == len(of_type(world, EVENT_TYPE)) == 1
    assert retry.headers["Location"] == f"/api/tickets/{of_type(world, 'ticket')[0]['id']}"


def test_a_change_retried_after_it_landed_answers_the_same_not_412(world: TicketWorld) -> None:
    created = post(world, None)
    tid, etag = body(created)["id"], created.headers["ETag"]
    change = {"title": "Retitled"}
    first = world.client.request(
        "PATCH", f"tickets/{tid}", body=change, headers={KEY: "p1", "If-Match": etag}
    )
    assert first.status_code == 200
    retry = world.client.request(
        "PATCH", f"tickets/{tid}", body=change, headers={KEY: "p1", "If-Match": etag}
    )
    assert answer_of(retry) == answer_of(first)
    unkeyed = world.client.request(
        "PATCH", f"tickets/{tid}", body=change, headers={"If-Match": etag}
    )
    problem(unkeyed, 412)  # without the key, as before: the client cannot tell
    assert [e["version"] for e in of_type(world, EVENT_TYPE)] == [1, 2]


def test_a_retry_after_later_changes_answers_the_body_of_its_write_with_a_weak_etag(
    world: TicketWorld,
) -> None:
    tid = body(post(world, None))["id"]
    first = world.client.request(
        "PATCH", f"tickets/{tid}", body={"title": "Second"}, headers={KEY: "p2"}
    )
    later = world.client.request("PATCH", f"tickets/{tid}", body={"title": "Third"})
    assert later.status_code == 200
    retry = world.client.request(
        "PATCH", f"tickets/{tid}", body={"title": "Second"}, headers={KEY: "p2"}
    )
    assert (retry.status_code, retry.get_body()) == (200, first.get_body())
    assert body(retry)["title"] == "Second" and body(retry)["version"] == 2
    assert retry.headers["ETag"] == 'W/"2"'
    # a conditional write built on it is refused, as one on the first answer's ETag would be
    stale = world.client.request(
        "PATCH",
        f"tickets/{tid}",
        body={"title": "Fourth"},
        headers={"If-Match": retry.headers["ETag"]},
    )
    problem(stale, 412)


def test_a_refused_retry_of_a_business_rule_answers_as_the_first(world: TicketWorld) -> None:
    created = post(world, None)
    tid, etag = body(created)["id"], created.headers["ETag"]
    close = {KEY: "close-1", "If-Match": etag}
    first = world.client.request("POST", f"tickets/{tid}/close", headers=close)
    assert first.status_code == 200
    retry = world.client.request("POST", f"tickets/{tid}/close", headers=close)
    assert answer_of(retry) == answer_of(first)
    again = world.client.request(
        "POST", f"tickets/{tid}/close", headers={KEY: "close-2", "If-Match": first.headers["ETag"]}
    )
    problem(again, 409)  # a new key: a new request, refused by the rule


def test_a_change_that_changes_nothing_records_its_answer_all_the_same(
    world: TicketWorld,
) -> None:
    created = post(world, None)
    tid, etag = body(created)["id"], created.headers["ETag"]
    same = {"title": "Zoë"}
    first = world.client.request(
        "PATCH", f"tickets/{tid}", body=same, headers={KEY: "noop", "If-Match": etag}
    )
    assert first.status_code == 200 and first.headers["ETag"] == etag
    assert len(of_type(world, IDEMPOTENCY_TYPE)) == 1 and len(of_type(world, EVENT_TYPE)) == 1
    world.client.request("PATCH", f"tickets/{tid}", body={"title": "Changed since"})
    retry = world.client.request(
        "PATCH", f"tickets/{tid}", body=same, headers={KEY: "noop", "If-Match": etag}
    )
    assert (retry.status_code, retry.get_body()) == (200, first.get_body())  # not 412


def test_a_deleted_resource_answers_the_retried_change_that_deleted_it(
    world: TicketWorld,
) -> None:
    """The route helper's 404 for a resource that is gone is checked against the key too."""
    tid = body(post(world, None))["id"]
    first = world.client.request(
        "PATCH", f"tickets/{tid}", body={"code": "ABC"}, headers={KEY: "gone"}
    )
    world.memory.store.documents.pop((tid, tid))  # gone since (as a soft delete reads)
    retry = world.client.request(
        "PATCH", f"tickets/{tid}", body={"code": "ABC"}, headers={KEY: "gone"}
    )
    assert (retry.status_code, retry.get_body()) == (200, first.get_body())
    assert retry.headers["ETag"] == 'W/"2"'
    problem(
        world.client.request("PATCH", f"tickets/{tid}", body={"code": "ABC"}, headers={KEY: "new"}),
        404,
    )


def test_a_key_past_its_ttl_is_a_new_key(world: TicketWorld) -> None:
    first = post(world, "old")
    [record] = of_type(world, IDEMPOTENCY_TYPE)
    world.memory.store.outlive(record["partitionKey"], record["id"])
    again = post(world, "old")
    assert again.status_code == 201 and "Idempotent-Replayed" not in again.headers
    assert body(again)["id"] != body(first)["id"]
    assert post(world, "old").headers["Location"] == again.headers["Location"]
    assert len(of_type(world, "ticket")) == 2


def test_a_key_is_scoped_to_its_route_and_its_caller(
    world: TicketWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    trust(monkeypatch, BELIEVED)
    created = post(world, "shared")
    tid = body(created)["id"]
    changed = world.client.request(
        "PATCH", f"tickets/{tid}", body={"title": "Other"}, headers={KEY: "shared"}
    )
    assert changed.status_code == 200 and "Idempotent-Replayed" not in changed.headers
    alice = post(world, "shared", headers=ALICE)
    assert alice.status_code == 201 and body(alice)["id"] != tid
    assert len(of_type(world, "ticket")) == 2


def test_ids_derived_from_keys_are_ids_of_the_aggregate() -> None:
    assert Ticket.model_fields["id"].metadata  # a length-limited id: a uuid5 fits
    assert len(derived_id("POST tickets", "k" * 255)) == 36


@pytest.mark.parametrize(
    "where",
    [
        {},  # nothing says a platform names callers
        {"WEBSITE_AUTH_ENABLED": "True"},  # a plain app setting anyone can set
        {**BELIEVED, "FUNCTIONS_CORETOOLS_ENVIRONMENT": "true"},  # a local host
    ],
)
def test_a_forged_caller_neither_splits_a_keys_scope_nor_reads_anothers(
    world: TicketWorld, monkeypatch: pytest.MonkeyPatch, where: dict[str, str]
) -> None:
    """Issue 72 item 8: where no principal is believed, `X-MS-CLIENT-PRINCIPAL-*` are anyone's
    writing. Naming oneself bob does not make alice's key a new one (the same key with another
    body is 422, nothing written), and the key's scope is the route's alone."""
    trust(monkeypatch, where)
    first = post(world, "shared", headers=ALICE)
    assert first.status_code == 201
    forged = post(world, "shared", {"title": "Another"}, headers=BOB)
    assert problem(forged, 422)["title"] == "Unprocessable Content"
    assert len(of_type(world, "ticket")) == 1
    assert scope("POST", "tickets", ALICE) == scope("POST", "tickets", {}) == "POST tickets"


def test_where_the_platform_names_callers_each_has_a_scope_of_their_own(
    world: TicketWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    trust(monkeypatch, BELIEVED)
    first = post(world, "shared", headers=ALICE)
    other = post(world, "shared", {"title": "Another"}, headers=BOB)
    assert first.status_code == other.status_code == 201
    assert body(first)["id"] != body(other)["id"]
    assert scope("POST", "tickets", ALICE) != scope("POST", "tickets", BOB)
