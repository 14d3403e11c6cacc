"""Hostile input to the HTTP API: generated bodies and header values never yield a 5xx, and one
named regression test per defect found by an attacker's review. Called through the indexed
functions with the in-memory fakes (see test_http_api.py)."""

from __future__ import annotations

import json
import re
from typing import Any

import azure.functions as func
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from application.contacts.commands import CreateContact, PatchContact
from application.contacts.ports import ContactList, ContactSummary
from cosmos_outbox.http import MAX_DEPTH, Cursor, HttpProblemError, parse_body, parse_json
from cosmos_outbox.http import bounded as bounded
from cosmos_outbox.ports import Page
from cosmos_outbox.testing import InMemoryStore
from cosmos_outbox.text import text_pattern
from tests.contacts.conftest import FakeWorld
from tests.contacts.unit.test_admin import never_answers
from tests.contacts.unit.test_http_api import ADA, Api, body, created, problem

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=5)
    ),
    max_leaves=20,
)


@pytest.fixture
def api(world: FakeWorld) -> Api:
    return Api(world.client)


# -- properties -------------------------------------------------------------------------------


@given(st.binary(max_size=300))
def test_any_bytes_are_json_or_a_400(raw: bytes) -> None:
    try:
        parse_json(raw)
    except HttpProblemError as exc:
        assert exc.problem.status == 400


@given(
    st.dictionaries(
        st.sampled_from(
            [
                "firstName",
                "lastName",
                "email",
                "description",
                "companyName",
                "company",
                "first_name",
                "x",
            ]
        ),
        json_values,
        max_size=6,
    )
)
def test_any_object_is_a_create_command_or_a_400_naming_fields(data: dict[str, Any]) -> None:
    try:
        parse_body(json.dumps(data).encode(), "application/json", CreateContact)
    except HttpProblemError as exc:
        assert exc.problem.status == 400
        assert exc.problem.errors and all(e.field for e in exc.problem.errors)


@given(json_values)
def test_any_json_value_is_a_patch_command_or_a_400(value: Any) -> None:
    try:
        parse_body(json.dumps(value).encode(), "application/json", PatchContact)
    except HttpProblemError as exc:
        assert exc.problem.status == 400


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=60)
@given(
    st.dictionaries(
        st.sampled_from(
            [
                "if-match",
                "if-none-match",
                "etag",
                "content-type",
                "traceparent",
                "x-continuation-token",
            ]
        ),
        st.text(max_size=30),
        max_size=4,
    ),
    st.binary(max_size=60),
)
def test_no_header_value_or_body_gives_a_5xx(api: Api, headers: dict[str, str], raw: bytes) -> None:
    for response in (
        api.call("create_contact", "POST", "contacts", raw=raw, headers=headers),
        api.call("list_contacts", "GET", "contacts", headers=headers),
        api.write("patch_contact", "PATCH", "x1", raw=raw, headers=headers),
        api.get("x1", headers=headers),
    ):
        assert response.status_code < 500, response.get_body()


@given(st.text(min_size=1, max_size=100))
def test_a_name_is_accepted_exactly_when_the_openapi_pattern_matches_it(name: str) -> None:
    data = {**ADA, "firstName": name}
    matches = re.fullmatch(text_pattern(True), name) is not None
    try:
        command = parse_body(json.dumps(data).encode(), "application/json", CreateContact)
    except HttpProblemError as exc:
        assert not matches
        assert [e.field for e in exc.problem.errors or []] == ["firstName"]
    else:
        assert matches and command.first_name == name.strip()


# -- regressions, one per defect an attacker's review found ----------------------------------


def test_deeply_nested_json_is_a_400_not_a_500(api: Api) -> None:
    for depth in (MAX_DEPTH + 1, 10_000):
        raw = b'{"a":' * depth + b"1" + b"}" * depth
        doc = problem(
            api.call(
                "create_contact",
                "POST",
                "contacts",
                raw=raw,
                headers={"content-type": "application/json"},
            ),
            400,
        )
        assert "nests deeper" in doc["detail"]


def test_a_huge_integer_literal_is_a_400_not_a_500(api: Api) -> None:
    raw = b'{"firstName": ' + b"9" * 5000 + b"}"
    doc = problem(
        api.call(
            "create_contact",
            "POST",
            "contacts",
            raw=raw,
            headers={"content-type": "application/json"},
        ),
        400,
    )
    assert "digits" in doc["detail"]


def test_a_body_in_another_encoding_or_with_a_bom_is_refused(api: Api, world: FakeWorld) -> None:
    text = json.dumps(ADA)
    for raw, headers in (
        (text.encode("utf-16"), {"content-type": "application/json"}),
        (b"\xef\xbb\xbf" + text.encode(), {"content-type": "application/json"}),
    ):
        problem(api.call("create_contact", "POST", "contacts", raw=raw, headers=headers), 400)
    problem(
        api.call(
            "create_contact",
            "POST",
            "contacts",
            raw=text.encode(),
            headers={"content-type": "application/json; charset=latin-1"},
        ),
        415,
    )
    assert world.store.batches == 0


def test_duplicate_json_keys_are_a_400_naming_the_key(api: Api) -> None:
    raw = (
        b'{"firstName":"A","firstName":"B","lastName":"L","email":"a@example.com",'
        b'"companyName":"C"}'
    )
    doc = problem(
        api.call(
            "create_contact",
            "POST",
            "contacts",
            raw=raw,
            headers={"content-type": "application/json"},
        ),
        400,
    )
    assert doc["errors"][0]["field"] == "firstName"


def test_snake_case_keys_are_refused(api: Api) -> None:
    doc = problem(
        api.create({**{k: v for k, v in ADA.items() if k != "firstName"}, "first_name": "Ada"}), 400
    )
    assert {e["field"] for e in doc["errors"]} == {"firstName", "first_name"}


@pytest.mark.parametrize("bad", ["Ada\x00", "A\u200bda", "\u202eAda", "Ada\n", "\ufeffAda"])
def test_control_and_invisible_format_characters_are_refused(api: Api, bad: str) -> None:
    doc = problem(api.create({**ADA, "firstName": bad}), 400)
    assert doc["errors"][0]["field"] == "firstName"


@pytest.mark.parametrize(
    "name",
    ["مهر\u200cآذر", "क्\u200dष", "👩\u200d🔬", "👨\u200d👩\u200d👧\u200d👦", "Zoë 👩\u200d🔬"],
)
def test_names_that_need_joiners_are_accepted(api: Api, name: str) -> None:
    response = api.create({**ADA, "firstName": name})
    assert response.status_code == 201, response.get_body()
    assert body(response)["name"]["firstName"] == name


@pytest.mark.parametrize("bad", ["\u3164", "\u2800", "\u0301", "\ue000", "\ufffe", "\ufffd"])
def test_names_that_look_blank_or_are_not_text_are_refused(api: Api, bad: str) -> None:
    doc = problem(api.create({**ADA, "firstName": bad}), 400)
    assert doc["errors"][0]["field"] == "firstName"


@pytest.mark.parametrize(
    "email",
    [
        "a@b",
        "a..b@example.com",
        "a@-example.com",
        "a@example..com",
        "Ada <a@example.com>",
        "a@example.test",
        "é@example.com",
        "a@exämple.com",
        '"a b"@example.com',
    ],
)
def test_emails_a_mail_system_would_reject_are_refused(api: Api, email: str) -> None:
    doc = problem(api.create({**ADA, "email": email}), 400)
    assert doc["errors"][0]["field"] == "email"


def test_null_for_an_optional_field_is_refused_not_ignored(api: Api) -> None:
    doc = problem(api.create({**ADA, "company": None}), 400)
    assert doc["errors"][0]["field"] == "company"


def test_a_garbage_or_tampered_continuation_token_is_a_400(api: Api, world: FakeWorld) -> None:
    for _ in range(3):
        assert api.create({**ADA}).status_code == 201
    first = body(api.call("list_contacts", "GET", "contacts", params={"pageSize": "1"}))
    token = first["continuationToken"]
    assert token
    for bad in ("garbage", "mem:1", token[:-2] + "AA", token.replace("p1.", "p2."), ""):
        problem(
            api.call("list_contacts", "GET", "contacts", headers={"x-continuation-token": bad}), 400
        )
    assert body(
        api.call("list_contacts", "GET", "contacts", headers={"x-continuation-token": token})
    )["items"]


def test_a_store_token_that_does_not_move_ends_the_listing_instead_of_looping(
    api: Api, world: FakeWorld
) -> None:
    class Stuck(ContactList):
        async def list_page(
            self, *, page_size: int, continuation: str | None
        ) -> Page[ContactSummary]:
            return Page(items=[], continuation_token="stuck")

    world.contacts = Stuck
    token = world.tokens.encode(Cursor(store_token="stuck", page=1))
    page = body(api.call("list_contacts", "GET", "contacts", params={"continuationToken": token}))
    assert page == {"items": [], "continuationToken": None, "hasMore": False}


def test_an_unknown_route_is_a_404_problem(functions: dict[str, Any]) -> None:
    req = func.HttpRequest(
        "GET",
        "http://localhost/api/nope",
        headers={},
        params={},
        route_params={"path": "nope/deeper"},
        body=b"",
    )
    problem(functions["zz_not_routed"].get_user_function()(req), 404)


def test_a_wrong_method_is_a_405_problem_with_allow_from_the_apps_routes(
    functions: dict[str, Any],
) -> None:
    req = func.HttpRequest(
        "PUT",
        "http://localhost/api/contacts/abc",
        headers={},
        params={},
        route_params={"path": "contacts/abc"},
        body=b"",
    )
    response = functions["zz_not_routed"].get_user_function()(req)
    problem(response, 405)
    assert response.headers["Allow"] == "DELETE, GET, PATCH"


@pytest.mark.parametrize(
    "path", ["contacts//abc", "contacts//", "contacts/abc//update-name", "/contacts//"]
)
def test_a_path_with_an_empty_segment_is_404_not_a_405_for_the_method_it_names(
    functions: dict[str, Any],
    path: str,
) -> None:
    """The host routes no such path (an empty segment matches no `{id}` and no literal), so
    the fallback must not answer "GET is not allowed here; allowed: ... GET ..."."""
    req = func.HttpRequest(
        "GET",
        f"http://localhost/api/{path}",
        headers={},
        params={},
        route_params={"path": path},
        body=b"",
    )
    problem(functions["zz_not_routed"].get_user_function()(req), 404)


def test_if_none_match_star_lists_and_weak_tags_give_304(api: Api) -> None:
    cid, etag = created(api)
    for value in ("*", f'"x", {etag}', f"W/{etag}", f' "a" ,, W/{etag} '):
        response = api.get(cid, headers={"If-None-Match": value})
        assert response.status_code == 304, value
        assert response.headers["ETag"] == etag and not response.get_body()


def test_an_if_match_list_holding_the_current_etag_is_accepted(api: Api) -> None:
    cid, etag = created(api)
    response = api.write(
        "update_contact_description",
        "POST",
        cid,
        "/update-description",
        body={"description": "d"},
        headers={"If-Match": f'"old", {etag}'},
    )
    assert response.status_code == 204


def test_weak_if_match_and_if_none_match_on_writes_are_412(api: Api) -> None:
    cid, etag = created(api)
    for headers in ({"If-Match": f"W/{etag}"}, {"If-None-Match": "*"}, {"ETag": '"stale"'}):
        problem(
            api.write(
                "update_contact_description",
                "POST",
                cid,
                "/update-description",
                body={"description": "d"},
                headers=headers,
            ),
            412,
        )


def test_a_malformed_conditional_header_is_a_400_naming_it(api: Api) -> None:
    cid, _ = created(api)
    doc = problem(api.get(cid, headers={"If-None-Match": "no quotes"}), 400)
    assert doc["errors"][0]["field"] == "If-None-Match"


def test_health_answers_503_when_the_store_does_not_answer(
    world: FakeWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(InMemoryStore, "ping", lambda self: never_answers())
    monkeypatch.setattr(bounded, "BOUND_SECONDS", 0.2)
    response = world.client.call("health", "GET", "health")
    problem(response, 503)
    assert response.headers["Retry-After"]


def test_unknown_query_parameters_are_refused_but_the_key_parameter_is_not(api: Api) -> None:
    problem(api.call("list_contacts", "GET", "contacts", params={"page": "2"}), 400)
    assert api.call("list_contacts", "GET", "contacts", params={"code": "k"}).status_code == 200
