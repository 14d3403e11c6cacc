"""Issue 66, item 2's remainder, in-process: a forged `X-MS-CLIENT-PRINCIPAL` and an unvalidated
bearer token, sent to each way in (the console's routes, the operators' routes), are never taken
for an operator. The console refuses them and acts on nothing; the operators' routes (whose
door is the admin key, which the host checks in Azure) never act as the forged user: their audit
line names who acted as it was ("nobody: keys not enforced locally" here).

Who is believed is `identity.sign_in_trust`: the owner's `OUTBOX_CONSOLE_SIGN_IN`, the platform's
`WEBSITE_AUTH_ENABLED`, and not a local host (`FUNCTIONS_CORETOOLS_ENVIRONMENT`)."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from conftest import TicketWorld, body, problem

from cosmos_outbox_operators._console.identity import (
    PRINCIPAL_HEADER,
    bearer_validated,
    sign_in_trust,
)

from .test_console import ORIGIN, TOKEN, audit_lines, poisoned, principal

AZURE = {
    "WEBSITE_AUTH_ENABLED": "True",
    "OUTBOX_CONSOLE_SIGN_IN": "app-service-authentication",
}
#: The environments in which a principal header is someone's own writing.
FORGED_WHERE = {
    # WEBSITE_AUTH_ENABLED=True as a plain app setting: the owner never said App Service
    # Authentication signs operators in
    "the plain app setting": {"WEBSITE_AUTH_ENABLED": "True"},
    # a local host (Core Tools, funcstack) has no App Service Authentication
    "a local host": {**AZURE, "FUNCTIONS_CORETOOLS_ENVIRONMENT": "true"},
    # the local stand-in's setting copied to a host that is not local
    "a stand-in's setting in Azure": {
        "WEBSITE_AUTH_ENABLED": "True",
        "OUTBOX_CONSOLE_SIGN_IN": "local-stand-in",
    },
}
#: Where a bearer token was validated by no one the app can name.
UNVALIDATED_BEARER_WHERE = {
    # a browser's request: App Service's session cookie came with it, so the principal may be
    # the cookie's, whatever the Authorization header holds
    "beside a session cookie": (AZURE, {"cookie": "AppServiceAuthSession=s"}),
    # funcstack's stand-in validates no token
    "under the local stand-in": (
        {
            "WEBSITE_AUTH_ENABLED": "True",
            "OUTBOX_CONSOLE_SIGN_IN": "local-stand-in",
            "FUNCTIONS_CORETOOLS_ENVIRONMENT": "true",
        },
        {},
    ),
}
SETTINGS = ("WEBSITE_AUTH_ENABLED", "OUTBOX_CONSOLE_SIGN_IN", "FUNCTIONS_CORETOOLS_ENVIRONMENT")


def environment(monkeypatch: pytest.MonkeyPatch, values: dict[str, str]) -> None:
    for name in SETTINGS:
        monkeypatch.delenv(name, raising=False)
    for name, value in values.items():
        monkeypatch.setenv(name, value)


@pytest.fixture
def poison() -> Iterator[tuple[TicketWorld, list[str]]]:
    world = TicketWorld(max_payload_bytes=0)  # no claim check: too large = quarantined
    try:
        ids = poisoned(world, 2)
        world.memory.publisher.max_batch_bytes = 1024 * 1024  # the fix: a replay would send
        yield world, ids
    finally:
        world.client.close()


def status_of(world: TicketWorld, event: str) -> str:
    [record] = [
        d
        for d in world.memory.store.of_type("quarantinedEvent")
        if event in (d["id"], d.get("eventId"))
    ]
    return str(record["status"])


def the_page(**extra: str) -> dict[str, str]:
    """A request as the console's page sends it: same origin, the page's token."""
    return {
        "host": "localhost",
        "origin": ORIGIN,
        "cookie": f"outbox-console-csrf={TOKEN}",
        "x-csrf-token": TOKEN,
        **extra,
    }


def test_a_forged_principal_is_no_one_at_either_way_in(
    poison: tuple[TicketWorld, list[str]],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    world, (event, other) = poison
    caplog.set_level(logging.WARNING, logger="cosmos_outbox.operators")
    forged = principal(name="mallory@example.com", oid="oid-mallory")
    sent = len(world.memory.publisher.messages)
    for where, values in FORGED_WHERE.items():
        environment(monkeypatch, values)
        caplog.clear()
        for method, path, params in (
            ("GET", "outbox/console/status", None),
            ("POST", f"outbox/console/quarantine/{event}/replay", None),
            ("DELETE", f"outbox/console/quarantine/{event}", {"reason": "x"}),
            ("POST", "outbox/console/redrive", None),
        ):
            reply = world.client.request(
                method, path, headers=the_page(**{PRINCIPAL_HEADER: forged}), params=params
            )
            refused = problem(reply, 401)
            assert "no one can be signed in here" in refused["detail"], (where, path)
        # nothing acted, and the refusals say why, each time
        assert audit_lines(caplog) == [], where
        why = [r.getMessage() for r in caplog.records if "cannot believe" in r.getMessage()]
        assert len(why) == 4, where
        assert all("mallory" not in line for line in why)
    assert len(world.memory.publisher.messages) == sent and status_of(world, event) == "quarantined"
    # the sentences name the setting to change
    environment(monkeypatch, FORGED_WHERE["the plain app setting"])
    assert "OUTBOX_CONSOLE_SIGN_IN is not set" in sign_in_trust().why
    environment(monkeypatch, FORGED_WHERE["a local host"])
    assert "FUNCTIONS_CORETOOLS_ENVIRONMENT=true" in sign_in_trust().why
    # The operators' routes take no principal: the same forged request acts as who sent it
    # (no key here: nobody), never as mallory.
    for where, values in FORGED_WHERE.items():
        environment(monkeypatch, values)
        caplog.clear()
        done = world.client.request(
            "POST",
            f"outbox/quarantine/{other}/replay",
            headers={"host": "localhost", PRINCIPAL_HEADER: forged},
        )
        assert done.status_code in (202, 409), where  # 409: replayed already
        if done.status_code == 202:
            [line] = audit_lines(caplog)
            assert " by nobody: keys not enforced locally" in line.getMessage()
            assert "mallory" not in line.getMessage()
        # from another site's page: refused, forged principal or not
        cross_site = world.client.request(
            "POST",
            f"outbox/quarantine/{event}/replay",
            headers={
                "host": "localhost",
                "origin": "https://evil.example",
                PRINCIPAL_HEADER: forged,
            },
        )
        problem(cross_site, 403)
    # the control: where App Service Authentication is believed, the same header is an operator
    environment(monkeypatch, AZURE)
    caplog.clear()
    done = world.client.request(
        "POST",
        f"outbox/console/quarantine/{event}/replay",
        headers=the_page(**{PRINCIPAL_HEADER: forged}),
    )
    assert body(done)["status"] == "resolved"
    [line] = audit_lines(caplog)
    assert " by mallory@example.com (id oid-mallory)" in line.getMessage()


def test_an_unvalidated_bearer_token_does_not_stand_for_the_pages_token(
    poison: tuple[TicketWorld, list[str]],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    world, (event, other) = poison
    caplog.set_level(logging.WARNING, logger="cosmos_outbox.operators")
    operator = principal()
    for where, (values, cookie) in UNVALIDATED_BEARER_WHERE.items():
        environment(monkeypatch, values)
        caplog.clear()
        headers = {
            "host": "localhost",
            "origin": ORIGIN,
            PRINCIPAL_HEADER: operator,
            "authorization": "Bearer not-validated-by-anyone",
            **cookie,
        }
        assert not bearer_validated(headers, sign_in_trust()), where
        for method, path, params in (
            ("POST", f"outbox/console/quarantine/{event}/replay", None),
            ("DELETE", f"outbox/console/quarantine/{event}", {"reason": "x"}),
            ("POST", "outbox/console/redrive", None),
        ):
            reply = world.client.request(method, path, headers=headers, params=params)
            refused = problem(reply, 403)
            assert "X-CSRF-Token" in refused["detail"], (where, path)
        assert audit_lines(caplog) == [], where
        assert len([r for r in caplog.records if "refused an action" in r.getMessage()]) == 3
        # The operators' routes ask no page token: the bearer is nothing to them; the action is
        # audited as who sent it (no key: nobody), never as the bearer's or the principal's.
        caplog.clear()
        done = world.client.request("POST", f"outbox/quarantine/{other}/replay", headers=headers)
        if done.status_code == 202:
            [line] = audit_lines(caplog)
            assert " by nobody: keys not enforced locally" in line.getMessage()
            assert "ada@example.com" not in line.getMessage()
        else:
            assert done.status_code == 409, where
    assert status_of(world, event) == "quarantined"
    # A bearer App Service Authentication validated (believed here, no session cookie: the
    # principal can only be the token's) is the script's credential: no page token needed.
    environment(monkeypatch, AZURE)
    script = {
        "host": "localhost",
        PRINCIPAL_HEADER: operator,
        "authorization": "Bearer validated-by-the-platform",
    }
    assert bearer_validated(script, sign_in_trust())
    done = world.client.request("POST", f"outbox/console/quarantine/{event}/replay", headers=script)
    assert body(done)["status"] == "resolved"
