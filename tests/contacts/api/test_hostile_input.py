"""Hostile input to the Contacts app's routes and models: generated commands, bodies and header
values never yield a 5xx, and one named regression test per defect an attacker's review found
in what is the app's (its names and emails, its contact list's tokens). Called through the
indexed functions with the in-memory fakes (see test_http_api.py). What holds for any app on
cosmos-outbox's HTTP layer (JSON parsing, conditional requests, the 404/405 fallback, the
query parameters, text rules) is the library's, proven in its package
(packages/cosmos-outbox/tests/http_api/test_hostile_input.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from application.contacts.commands import CreateContact, PatchContact
from cosmos_outbox.http import HttpProblemError, parse_body
from tests.contacts.api.test_http_api import ADA, Api, body, problem
from tests.contacts.conftest import FakeWorld

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


# -- regressions, one per defect an attacker's review found ----------------------------------


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
