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
#: funcstack's word to its workers that its host checks keys (`funcstack run --enforce-keys`).
KEYS_ENFORCED = "FUNCSTACK_KEYS_ENFORCED"
#: Names other than the loopback ones a local host's state-changing routes take.
LOCAL_HOSTS = "OUTBOX_LOCAL_HOSTS"
SETTINGS = (
    "WEBSITE_AUTH_ENABLED",
    "OUTBOX_CONSOLE_SIGN_IN",
    "FUNCTIONS_CORETOOLS_ENVIRONMENT",
    KEYS_ENFORCED,
    LOCAL_HOSTS,
)
LOCAL = {"FUNCTIONS_CORETOOLS_ENVIRONMENT": "true"}
REDRIVE = {"since": "2000-01-01T00:00:00Z"}


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


@pytest.mark.parametrize(
    ("where", "key", "audited"),
    [
        # issue 72 item 1: make run's host checks no key; a bogus one was audited "admin key"
        (
            LOCAL,
            "bogus-not-a-key",
            "nobody: keys not enforced locally (a key was sent, not checked)",
        ),
        (LOCAL, None, "nobody: keys not enforced locally: re-drive"),
        # funcstack's host with --enforce-keys says it checked the key
        ({**LOCAL, KEYS_ENFORCED: "true"}, "the-master-key", "admin key:"),
        # the local host's word is the host's, never a setting's: a plain "false" is no check
        (
            {**LOCAL, KEYS_ENFORCED: "false"},
            "the-master-key",
            "nobody: keys not enforced locally (a key was sent, not checked)",
        ),
        # in Azure the host admits an ADMIN route's request only with the master key
        ({}, "the-master-key", "admin key:"),
    ],
)
def test_the_audit_names_a_key_only_where_the_host_checked_it(
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    where: dict[str, str],
    key: str | None,
    audited: str,
) -> None:
    environment(monkeypatch, where)
    caplog.set_level(logging.WARNING, logger="cosmos_outbox.operators")
    world = TicketWorld()
    try:
        headers = {"host": "127.0.0.1:7071", **({"x-functions-key": key} if key else {})}
        reply = world.client.request("POST", "outbox/redrive", body=REDRIVE, headers=headers)
        assert reply.status_code == 202, reply.get_body()
        [line] = audit_lines(caplog)
        assert f"outbox audit: redrive by {audited}" in line.getMessage()
        assert (key or "bogus") not in line.getMessage()
    finally:
        world.client.close()


FOREIGN = {"host": "evil.example:7071", "origin": "http://evil.example:7071"}


def test_a_local_host_takes_no_action_for_a_foreign_host_name(
    poison: tuple[TicketWorld, list[str]],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Issue 72 item 2: DNS rebinding. A page on evil.example whose name resolves to 127.0.0.1
    sends its own Host and a matching Origin, so the same-site check passes; the local host
    (no key checked) acted. Its state-changing routes take only the loopback names (and those
    of OUTBOX_LOCAL_HOSTS), through either door; reads stay open."""
    world, (event, _) = poison
    caplog.set_level(logging.WARNING, logger="cosmos_outbox.operators")
    environment(
        monkeypatch,
        {**LOCAL, "WEBSITE_AUTH_ENABLED": "True", "OUTBOX_CONSOLE_SIGN_IN": "local-stand-in"},
    )
    sent = len(world.memory.publisher.messages)
    for method, path, params, extra in (
        ("POST", "outbox/redrive", None, {}),
        ("POST", f"outbox/quarantine/{event}/replay", None, {}),
        ("DELETE", f"outbox/quarantine/{event}", {"reason": "x"}, {"x-functions-key": "k"}),
        (
            "POST",
            f"outbox/console/quarantine/{event}/replay",
            None,
            the_page(**FOREIGN, **{PRINCIPAL_HEADER: principal()}),
        ),
    ):
        headers = {**FOREIGN, **extra}
        reply = world.client.request(method, path, headers=headers, params=params, body=REDRIVE)
        refused = problem(reply, 403)
        assert "evil.example" in refused["detail"] and LOCAL_HOSTS in refused["detail"], path
    assert audit_lines(caplog) == []
    assert len(world.memory.publisher.messages) == sent and status_of(world, event) == "quarantined"
    # nor a read (issue 92, M10: a rebinding page read the quarantine's event bodies), through
    # either door, nor the console's page
    for path, extra in (
        ("outbox/status", {}),
        (f"outbox/quarantine/{event}", {}),
        ("outbox/console/quarantine", {PRINCIPAL_HEADER: principal()}),
    ):
        reply = world.client.request("GET", path, headers={**FOREIGN, **extra})
        refused = problem(reply, 403)
        assert "reads only for its loopback names" in refused["detail"], path
    page = world.client.request("GET", "outbox/console", headers=FOREIGN)
    assert page.status_code == 403 and b"evil.example" in page.get_body()
    # what local tools need: the loopback names (any port), a configured one, no Host at all
    for host in ("localhost:7071", "127.0.0.1:7071", "[::1]:7071", "localhost"):
        assert (
            world.client.request("GET", "outbox/status", headers={"host": host}).status_code == 200
        )
    # the loopback names, any port
    for host in ("localhost:7071", "127.0.0.1:7071", "[::1]:7071", "localhost"):
        origin = {"host": host, "origin": f"http://{host}"}
        done = world.client.request("POST", "outbox/redrive", headers=origin, body=REDRIVE)
        assert done.status_code == 202, host
    # a name the owner configured (a dev container's forwarded name)
    monkeypatch.setenv(LOCAL_HOSTS, "box.internal, evil.example")
    done = world.client.request("POST", "outbox/redrive", headers=FOREIGN, body=REDRIVE)
    assert done.status_code == 202
    # not a local host: the platform routes only the app's names to it
    environment(monkeypatch, {})
    done = world.client.request("POST", "outbox/redrive", headers=FOREIGN, body=REDRIVE)
    assert done.status_code == 202
