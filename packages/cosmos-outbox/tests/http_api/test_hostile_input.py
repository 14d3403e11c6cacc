"""Hostile input to the HTTP layer (`cosmos_outbox.http`: body parsing, the route helper's
conditional requests, the 404/405 fallback, the query parameters an operation declares):
generated bodies and header values never yield a 5xx, and one named regression test per defect
an attacker's review found. Through the tickets app's indexed functions on the test kit's fakes
(tickets.py); the Contacts app's own field rules are its tests'."""

from __future__ import annotations

import json
import re
from typing import Any

import azure.functions as func
import pytest
from conftest import TicketWorld, body, problem
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tickets import ChangeTicket, OpenTicket

from cosmos_outbox.errors import OutboxError, StoreUnavailableError, ThrottledError
from cosmos_outbox.http import MAX_DEPTH, HttpProblemError, RequestModel, parse_body, parse_json
from cosmos_outbox.text import text_pattern

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=5)
    ),
    max_leaves=20,
)
JSON = {"content-type": "application/json"}
#: A generated example may wait for a core under `make test`'s parallel jobs: the time it takes
#: to draw one is no finding (speed lives in `make bench`).
LOADED = settings(suppress_health_check=[HealthCheck.too_slow])


def opened(world: TicketWorld) -> tuple[str, str]:
    reply = world.client.request("POST", "tickets", body={"title": "Printer"})
    assert reply.status_code == 201, reply.get_body()
    return body(reply)["id"], reply.headers["ETag"]


def fallback(world: TicketWorld, method: str, path: str) -> func.HttpResponse:
    """The catch-all function (`zz_not_routed`) called as the host calls it for `path`."""
    return world.client.call(
        method=method, name="zz_not_routed", path=path, route_params={"path": path}
    )


# -- properties -------------------------------------------------------------------------------


@LOADED
@given(st.binary(max_size=300))
def test_any_bytes_are_json_or_a_400(raw: bytes) -> None:
    try:
        parse_json(raw)
    except HttpProblemError as exc:
        assert exc.problem.status == 400


@LOADED
@given(
    st.dictionaries(
        st.sampled_from(["title", "code", "Title", "closed", "x"]), json_values, max_size=4
    )
)
def test_any_object_is_a_request_model_or_a_400_naming_fields(data: dict[str, Any]) -> None:
    try:
        parse_body(json.dumps(data).encode(), "application/json", OpenTicket)
    except HttpProblemError as exc:
        assert exc.problem.status == 400
        assert exc.problem.errors and all(e.field for e in exc.problem.errors)


@LOADED
@given(json_values)
def test_any_json_value_is_a_change_or_a_400(value: Any) -> None:
    try:
        parse_body(json.dumps(value).encode(), "application/json", ChangeTicket)
    except HttpProblemError as exc:
        assert exc.problem.status == 400


@LOADED
@given(st.text(min_size=1, max_size=80))
def test_a_text_is_accepted_exactly_when_the_openapi_pattern_matches_it(title: str) -> None:
    matches = re.fullmatch(text_pattern(True), title) is not None
    try:
        request = parse_body(json.dumps({"title": title}).encode(), "application/json", OpenTicket)
    except HttpProblemError as exc:
        assert not matches
        assert [e.field for e in exc.problem.errors or []] == ["title"]
    else:
        assert matches and request.title == title.strip()


# -- regressions, one per defect an attacker's review found ----------------------------------


def test_deeply_nested_json_is_a_400_not_a_500(world: TicketWorld) -> None:
    for depth in (MAX_DEPTH + 1, 10_000):
        raw = b'{"a":' * depth + b"1" + b"}" * depth
        doc = problem(world.client.request("POST", "tickets", raw=raw, headers=JSON), 400)
        assert "nests deeper" in doc["detail"]


def test_a_huge_integer_literal_is_a_400_not_a_500(world: TicketWorld) -> None:
    raw = b'{"title": ' + b"9" * 5000 + b"}"
    doc = problem(world.client.request("POST", "tickets", raw=raw, headers=JSON), 400)
    assert "digits" in doc["detail"]


def test_a_body_in_another_encoding_or_with_a_bom_is_refused(world: TicketWorld) -> None:
    text = json.dumps({"title": "Printer"})
    for raw in (text.encode("utf-16"), b"\xef\xbb\xbf" + text.encode()):
        problem(world.client.request("POST", "tickets", raw=raw, headers=JSON), 400)
    latin = {"content-type": "application/json; charset=latin-1"}
    problem(world.client.request("POST", "tickets", raw=text.encode(), headers=latin), 415)
    assert world.memory.store.batches == 0


def test_duplicate_json_keys_are_a_400_naming_the_key(world: TicketWorld) -> None:
    raw = b'{"title":"A","title":"B"}'
    doc = problem(world.client.request("POST", "tickets", raw=raw, headers=JSON), 400)
    assert doc["errors"][0]["field"] == "title"


def test_a_field_sent_by_its_python_name_is_refused_naming_both() -> None:
    class Rename(RequestModel):
        first_name: str

    with pytest.raises(HttpProblemError) as refused:
        parse_body(b'{"first_name": "Ada"}', "application/json", Rename)
    assert {e.field for e in refused.value.problem.errors or []} == {"firstName", "first_name"}


def test_null_for_an_optional_field_is_refused_not_ignored(world: TicketWorld) -> None:
    tid, _ = opened(world)
    doc = problem(world.client.request("PATCH", f"tickets/{tid}", body={"title": None}), 400)
    assert doc["errors"][0]["field"] == "title"
    assert "leave the field out" in doc["errors"][0]["message"]


def test_an_unknown_route_is_a_404_problem(world: TicketWorld) -> None:
    problem(fallback(world, "GET", "nope/deeper"), 404)


def test_a_wrong_method_is_a_405_problem_with_allow_from_the_apps_routes(
    world: TicketWorld,
) -> None:
    response = fallback(world, "PUT", "tickets/abc")
    problem(response, 405)
    assert response.headers["Allow"] == "GET, PATCH"


@pytest.mark.parametrize("path", ["tickets//abc", "tickets//", "tickets/abc//close", "/tickets//"])
def test_a_path_with_an_empty_segment_is_404_not_a_405_for_the_method_it_names(
    world: TicketWorld, path: str
) -> None:
    """The host routes no such path (an empty segment matches no `{id}` and no literal), so
    the fallback must not answer "GET is not allowed here; allowed: ... GET ..."."""
    problem(fallback(world, "GET", path), 404)


def test_if_none_match_star_lists_and_weak_tags_give_304(world: TicketWorld) -> None:
    tid, etag = opened(world)
    for value in ("*", f'"x", {etag}', f"W/{etag}", f' "a" ,, W/{etag} '):
        response = world.client.request("GET", f"tickets/{tid}", headers={"If-None-Match": value})
        assert response.status_code == 304, value
        assert response.headers["ETag"] == etag and not response.get_body()


def test_an_if_match_list_holding_the_current_etag_is_accepted(world: TicketWorld) -> None:
    tid, etag = opened(world)
    response = world.client.request(
        "PATCH", f"tickets/{tid}", body={"title": "d"}, headers={"If-Match": f'"old", {etag}'}
    )
    assert response.status_code == 200, response.get_body()


def test_weak_if_match_and_if_none_match_on_writes_are_412(world: TicketWorld) -> None:
    tid, etag = opened(world)
    for headers in ({"If-Match": f"W/{etag}"}, {"If-None-Match": "*"}, {"If-None-Match": etag}):
        problem(
            world.client.request("PATCH", f"tickets/{tid}", body={"title": "d"}, headers=headers),
            412,
        )


def test_a_malformed_conditional_header_is_a_400_naming_it(world: TicketWorld) -> None:
    tid, _ = opened(world)
    for name in ("If-None-Match", "If-Match"):
        response = world.client.request("GET", f"tickets/{tid}", headers={name: "no quotes"})
        assert problem(response, 400)["errors"][0]["field"] == name


def test_unknown_query_parameters_are_refused_but_the_key_parameter_is_not(
    world: TicketWorld,
) -> None:
    tid, _ = opened(world)
    problem(world.client.request("GET", f"tickets/{tid}", params={"page": "2"}), 400)
    assert world.client.request("GET", f"tickets/{tid}", params={"code": "k"}).status_code == 200


def test_a_body_over_64_kib_is_a_413_and_writes_nothing(world: TicketWorld) -> None:
    raw = json.dumps({"title": "T", "padding": "x" * 65_536}).encode()
    doc = problem(world.client.request("POST", "tickets", raw=raw, headers=JSON), 413)
    assert "larger than 65536 bytes" in doc["detail"]
    assert world.memory.store.batches == 0


@pytest.mark.parametrize(
    ("fault", "status"),
    [(ThrottledError("throttled", retry_after=2.0), 429), (StoreUnavailableError("down"), 503)],
)
def test_a_store_that_throttles_or_is_down_is_a_429_or_503_with_retry_after(
    world: TicketWorld, fault: OutboxError, status: int
) -> None:
    """Never a 500 for what the store says: its throttling and its outages are the client's
    cue to retry, with when (the store's Retry-After, else the HTTP layer's)."""
    tid, etag = opened(world)
    batches = world.memory.store.batches
    world.memory.store.fail_next = fault
    reply = world.client.request(
        "PATCH", f"tickets/{tid}", body={"title": "Later"}, headers={"If-Match": etag}
    )
    problem(reply, status)
    assert int(reply.headers["Retry-After"]) >= 1
    assert world.memory.store.batches == batches
