"""The operators' console through the app's indexed functions, in-process, on the in-memory
services: who is admitted at each door (a signed-in operator, the admin key), actions refused
from another origin or without the page's token, every action audited with who did it, one
implementation answering JSON to scripts and HTML to the page, the page and its files, the
backlog's last hour, and the console's cost at start (nothing of it imported at indexing).

The browser walks the page in tests/contacts/outbox/test_console_in_a_browser.py."""

from __future__ import annotations

import base64
import json
import logging
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import fields
from pathlib import Path

import pytest
from conftest import TicketWorld, body, problem
from deadlines import scaled

from cosmos_outbox import Outbox
from cosmos_outbox.aio import Outbox as AsyncOutbox
from cosmos_outbox.documents import EVENT_TYPE
from cosmos_outbox.http import operation_of
from cosmos_outbox_operators import Operators, operators_blueprint
from cosmos_outbox_operators._console.identity import PRINCIPAL_HEADER, principal_of
from cosmos_outbox_testing import FunctionClient, in_memory, run_sync

PACKAGE = Path(__file__).resolve().parents[2]
ORIGIN = "http://localhost"
TOKEN = "the-page-token"


def principal(
    name: str = "ada@example.com",
    oid: str = "oid-ada",
    roles: tuple[str, ...] = ("Outbox.Operator",),
) -> str:
    """X-MS-CLIENT-PRINCIPAL as App Service Authentication writes it for Entra ID."""
    claims = [
        {"typ": "name", "val": name},
        {"typ": "http://schemas.microsoft.com/identity/claims/objectidentifier", "val": oid},
        *({"typ": "roles", "val": r} for r in roles),
    ]
    payload = {"auth_typ": "aad", "claims": claims, "name_typ": "name", "role_typ": "roles"}
    return base64.b64encode(json.dumps(payload).encode()).decode()


def signed_in(**extra: str) -> dict[str, str]:
    """The headers of the page's own request: the operator, same origin, the page's token."""
    return {
        PRINCIPAL_HEADER: principal(),
        "host": "localhost",
        "origin": ORIGIN,
        "cookie": f"outbox-console-csrf={TOKEN}",
        "x-csrf-token": TOKEN,
        **extra,
    }


@pytest.fixture(autouse=True)
def sign_in_enabled(monkeypatch: pytest.MonkeyPatch) -> None:
    """App Service Authentication on (the platform sets WEBSITE_AUTH_ENABLED=True, the deployment
    that turns it on OUTBOX_CONSOLE_SIGN_IN), in Azure (not a local host)."""
    monkeypatch.setenv("WEBSITE_AUTH_ENABLED", "True")
    monkeypatch.setenv("OUTBOX_CONSOLE_SIGN_IN", "app-service-authentication")
    monkeypatch.delenv("FUNCTIONS_CORETOOLS_ENVIRONMENT", raising=False)


def poisoned(world: TicketWorld, count: int = 1) -> list[str]:
    """`count` tickets whose opening event is too large for a message, relayed: quarantined."""
    ids = []
    for i in range(count):
        reply = world.client.request("POST", "tickets", body={"title": f"Ticket {i}"})
        assert reply.status_code == 201
    for doc in world.memory.store.of_type(EVENT_TYPE):
        doc["body"] = json.dumps({**json.loads(doc["body"]), "title": "x" * 5000})
        world.memory.store.put(doc)
        ids.append(doc["id"])
    world.relay(world.memory.store.of_type(EVENT_TYPE))
    return ids


@pytest.fixture
def poison() -> Iterator[tuple[TicketWorld, list[str]]]:
    world = TicketWorld(max_payload_bytes=0)  # no claim check: too large = quarantined
    try:
        yield world, poisoned(world, 2)
    finally:
        world.client.close()


# -- who is admitted ------------------------------------------------------------------------


def test_the_signed_in_door_admits_an_operator_and_refuses_everyone_else(
    world: TicketWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    call = world.client.request
    assert call("GET", "outbox/console/status", headers=signed_in()).status_code == 200
    nobody = problem(call("GET", "outbox/console/status", headers={"host": "localhost"}), 401)
    assert "/.auth/login/aad?post_login_redirect_uri=/api/outbox/console" in nobody["detail"]
    no_role = signed_in(**{PRINCIPAL_HEADER: principal(roles=("Reader",))})
    refused = problem(call("GET", "outbox/console/status", headers=no_role), 403)
    assert "ada@example.com" in refused["detail"] and "Outbox.Operator" in refused["detail"]
    unreadable = signed_in(**{PRINCIPAL_HEADER: "not base64 json"})
    problem(call("GET", "outbox/console/quarantine", headers=unreadable), 401)
    # Without App Service Authentication anyone can send the header: it is not believed.
    monkeypatch.delenv("WEBSITE_AUTH_ENABLED")
    forged = problem(call("GET", "outbox/console/status", headers=signed_in()), 401)
    assert "WEBSITE_AUTH_ENABLED" in forged["detail"]


def test_every_route_of_the_signed_in_door_refuses_a_request_without_an_operator(
    poison: tuple[TicketWorld, list[str]],
) -> None:
    world, (event, _) = poison
    routes = [
        ("GET", "outbox/console/status"),
        ("GET", "outbox/console/backlog"),
        ("GET", "outbox/console/quarantine"),
        ("GET", f"outbox/console/quarantine/{event}"),
        ("POST", f"outbox/console/quarantine/{event}/replay"),
        ("DELETE", f"outbox/console/quarantine/{event}?reason=x"),
        ("POST", "outbox/console/redrive"),
        ("GET", "outbox/console/deadletters"),
        ("GET", "outbox/console/subscribers"),
        ("GET", f"outbox/console/journey/events/{event}"),
        ("GET", "outbox/console/documents/t1"),
        ("GET", "outbox/console"),
        ("GET", "outbox/console/static/console.js"),
    ]
    anonymous = {"host": "localhost", "origin": ORIGIN}
    for method, path in routes:
        path, _, query = path.partition("?")
        params = dict([query.split("=")]) if query else None
        reply = world.client.request(method, path, headers=anonymous, params=params)
        assert reply.status_code in (401, 302), (method, path, reply.status_code)
        no_role = {**anonymous, PRINCIPAL_HEADER: principal(roles=())}
        reply = world.client.request(method, path, headers=no_role, params=params)
        assert reply.status_code == 403, (method, path, reply.status_code)
    assert [d["status"] for d in world.memory.store.of_type("quarantinedEvent")] == [
        "quarantined",
        "quarantined",
    ]


def test_an_action_from_another_origin_or_without_the_pages_token_does_nothing(
    poison: tuple[TicketWorld, list[str]],
) -> None:
    world, (event, _) = poison
    world.memory.publisher.max_batch_bytes = 1024 * 1024  # the fix: a replay would now send
    sent = len(world.memory.publisher.messages)
    replay = f"outbox/console/quarantine/{event}/replay"
    refusals = {
        "another origin": signed_in(origin="https://evil.example"),
        "a null origin": signed_in(origin="null"),
        "a sibling site": {
            k: v for k, v in signed_in(**{"sec-fetch-site": "same-site"}).items() if k != "origin"
        },
        "no token": {k: v for k, v in signed_in().items() if k != "x-csrf-token"},
        "another token": signed_in(**{"x-csrf-token": "guessed"}),
        "no cookie": {k: v for k, v in signed_in().items() if k != "cookie"},
    }
    for why, headers in refusals.items():
        refused = problem(world.client.request("POST", replay, headers=headers), 403)
        assert "console" in refused["detail"], why
    assert len(world.memory.publisher.messages) == sent  # nothing was sent
    # A script with an Entra ID token (App Service Authentication validated it) needs no token.
    bearer = {k: v for k, v in signed_in().items() if k not in ("cookie", "x-csrf-token")}
    done = world.client.request("POST", replay, headers={**bearer, "authorization": "Bearer t"})
    assert body(done)["status"] == "resolved"


def test_the_admin_keys_door_refuses_a_key_in_the_url(world: TicketWorld) -> None:
    assert world.client.request("GET", "outbox/status").status_code == 200
    in_url = problem(world.client.request("GET", "outbox/status", params={"code": "k"}), 400)
    assert "x-functions-key" in in_url["detail"]
    problem(
        world.client.request(
            "GET", "outbox/console/status", headers=signed_in(), params={"code": "k"}
        ),
        400,
    )


# -- who acts -------------------------------------------------------------------------------


def audit_lines(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if getattr(r, "outbox.audit", None)]


def test_every_action_is_audited_with_who_did_it(
    poison: tuple[TicketWorld, list[str]], caplog: pytest.LogCaptureFixture
) -> None:
    world, (first, second) = poison
    caplog.set_level(logging.WARNING, logger="cosmos_outbox.operators")
    world.client.request("POST", f"outbox/console/quarantine/{first}/replay", headers=signed_in())
    world.client.request(
        "DELETE",
        f"outbox/quarantine/{second}",
        params={"reason": "entered by hand"},
        headers={"x-functions-key": "the-master-key"},
    )
    world.client.request(
        "POST",
        "outbox/console/redrive",
        headers=signed_in(),
        body={"since": "2000-01-01T00:00:00Z"},
    )
    replay, discard, redrive = audit_lines(caplog)
    assert f" by ada@example.com (id oid-ada): event {first} " in replay.getMessage()
    assert (
        f": {replay.__dict__['outbox.reason']}; subscribers will see: nothing new"
    ) in replay.getMessage()
    assert (replay.__dict__["outbox.actor_name"], replay.__dict__["outbox.actor_id"]) == (
        "ada@example.com",
        "oid-ada",
    )
    assert f" by admin key: event {second} " in discard.getMessage()
    assert ": entered by hand; subscribers will see: " in discard.getMessage()
    assert discard.__dict__["outbox.actor_kind"] == "admin key"
    assert " by ada@example.com (id oid-ada): " in redrive.getMessage()


KEY_DOOR_REFUSALS = {
    "another origin": {"origin": "https://evil.example"},
    "a null origin": {"origin": "null"},
    "another site": {"sec-fetch-site": "cross-site"},
    "a sibling site": {"sec-fetch-site": "same-site"},
    # a client-sent forwarded host names the attacker's page: not trusted unless configured
    "a forged forwarded host": {
        "origin": "https://evil.example",
        "x-forwarded-host": "evil.example",
    },
}


def test_the_admin_keys_door_refuses_an_action_from_another_site_key_or_no_key(
    poison: tuple[TicketWorld, list[str]], caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 66, item 2: under `make run` the local host checks no key, and a bodyless POST from
    another site's page (a simple request, no preflight) replayed a quarantined event, audited
    "by admin key". Each hostile request is refused with or without a key; nothing is sent."""
    world, (event, other) = poison
    world.memory.publisher.max_batch_bytes = 1024 * 1024  # the fix: a replay would now send
    caplog.set_level(logging.WARNING, logger="cosmos_outbox.operators")
    sent = len(world.memory.publisher.messages)
    replay = f"outbox/quarantine/{event}/replay"
    for key in ({}, {"x-functions-key": "the-master-key"}):
        for why, hostile in KEY_DOOR_REFUSALS.items():
            headers = {"host": "localhost", **key, **hostile}
            refused = problem(world.client.request("POST", replay, headers=headers), 403)
            assert "another" in refused["detail"], why
    assert len(world.memory.publisher.messages) == sent and audit_lines(caplog) == []
    # reads pass from anywhere (the page's links); a script sends neither header
    assert (
        world.client.request(
            "GET", "outbox/status", headers=KEY_DOOR_REFUSALS["another origin"]
        ).status_code
        == 200
    )
    same = world.client.request(
        "POST",
        replay,
        headers={"host": "localhost", "origin": ORIGIN, "sec-fetch-site": "same-origin"},
    )
    assert body(same)["status"] == "resolved"
    world.client.request("POST", f"outbox/quarantine/{other}/replay")
    by_page, by_script = audit_lines(caplog)
    # no key was sent: the audit says so rather than "by admin key"
    for line in (by_page, by_script):
        assert " by nobody: keys not enforced locally" in line.getMessage()
        assert line.__dict__["outbox.actor_kind"] == "nobody"


def test_forwarded_hosts_are_the_apps_only_where_it_says_a_proxy_sets_them(
    poison: tuple[TicketWorld, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    world, (event, _) = poison
    world.memory.publisher.max_batch_bytes = 1024 * 1024
    behind = {
        "host": "app.internal",
        "origin": "https://outbox.example",
        "x-forwarded-host": "outbox.example",
    }
    replay = f"outbox/quarantine/{event}/replay"
    problem(world.client.request("POST", replay, headers=behind), 403)
    monkeypatch.setenv("OUTBOX_TRUST_FORWARDED_HOST", "true")
    assert body(world.client.request("POST", replay, headers=behind))["status"] == "resolved"


def test_a_discard_by_a_signed_in_operator_names_them_in_the_notice_subscribers_get(
    poison: tuple[TicketWorld, list[str]], caplog: pytest.LogCaptureFixture
) -> None:
    """One mechanism says who acted: the console's door sets the actor, and the discard notice
    (`discardedBy`, what the subscribers' accepted gap records), the kept record and the audit
    line all name the signed-in operator, not "admin key"."""
    world, (_, second) = poison
    caplog.set_level(logging.WARNING, logger="cosmos_outbox.operators")
    reply = world.client.request(
        "DELETE",
        f"outbox/console/quarantine/{second}",
        params={"reason": "entered by hand"},
        headers=signed_in(),
    )
    who = "ada@example.com (id oid-ada)"
    assert (reply.status_code, body(reply)["discardedBy"]) == (200, who)
    [notice] = [m for m in world.memory.publisher.messages if m.subject == "OutboxEventDiscarded"]
    assert json.loads(notice.body)["discardedBy"] == who
    [discard] = audit_lines(caplog)
    assert discard.__dict__["outbox.actor"] == who


# -- one implementation, two forms ----------------------------------------------------------


def test_both_doors_are_the_same_operations(world: TicketWorld) -> None:
    """Every route of the admin key's door has its twin under /console with the same
    declaration (method, request, answer, query, summary): the same handler serves both. The
    outbox's health (`outbox/health`) is anonymous, through neither door: no twin."""
    declared = {
        name: operation_of(f.get_user_function()) for name, f in world.client.functions.items()
    }
    keyed = {
        n: op
        for n, op in declared.items()
        if op is not None
        and op.route.startswith("outbox/")
        and not n.startswith("console_")
        and n != "outbox_health"
    }
    assert set(keyed) >= {"outbox_status", "list_quarantine", "redrive_events", "release_held"}
    health = declared["outbox_health"]
    assert health is not None and health.auth_level.value == "anonymous"
    assert "console_outbox_health" not in declared
    same = [
        f.name
        for f in fields(next(iter(keyed.values())))
        if f.name not in {"name", "route", "auth_level", "errors", "security"}
    ]
    for name, op in keyed.items():
        twin = declared[f"console_{name}"]
        assert twin is not None
        assert twin.route == op.route.replace("outbox/", "outbox/console/", 1)
        assert [getattr(twin, f) for f in same] == [getattr(op, f) for f in same], name
        assert set(twin.errors) == set(op.errors) | {401, 403}
        assert (op.auth_level.value, twin.auth_level.value) == ("admin", "anonymous")


def test_scripts_get_the_json_the_key_door_answers_and_the_page_gets_it_as_html(
    poison: tuple[TicketWorld, list[str]],
) -> None:
    world, (event, _) = poison
    for path in ("outbox/status", "outbox/quarantine", f"outbox/quarantine/{event}"):
        keyed = world.client.request("GET", path)
        twin = world.client.request(
            "GET", path.replace("outbox/", "outbox/console/"), headers=signed_in()
        )
        assert (twin.mimetype, twin.get_body()) == (keyed.mimetype, keyed.get_body()), path
        assert twin.headers["Vary"] == "Accept, HX-Request"
    listed = body(world.client.request("GET", "outbox/quarantine"))["items"]
    for asking in ({"hx-request": "true"}, {"accept": "text/html,application/xhtml+xml"}):
        page = world.client.request("GET", "outbox/console/quarantine", headers=signed_in(**asking))
        html = page.get_body().decode()
        assert page.mimetype == "text/html" and page.status_code == 200
        for item in listed:  # the rows are the JSON's items, and their actions the routes
            assert f'data-event-id="{item["eventId"]}"' in html
            assert f'hx-post="/api/outbox/console/quarantine/{item["eventId"]}/replay"' in html
            assert item["reason"].replace("'", "&#39;") in html
    missing = world.client.request(
        "GET", "outbox/console/quarantine/nope", headers=signed_in(**{"hx-request": "true"})
    )
    assert missing.status_code == 404 and 'role="alert"' in missing.get_body().decode()


def test_what_an_event_or_an_operator_wrote_is_text_on_the_page(
    poison: tuple[TicketWorld, list[str]],
) -> None:
    world, (event, _) = poison
    reason = '<script>alert("x")</script>'
    reply = world.client.request(
        "DELETE",
        f"outbox/console/quarantine/{event}",
        params={"reason": reason},
        headers=signed_in(**{"hx-request": "true"}),
    )
    html = reply.get_body().decode()
    assert reply.status_code == 200 and "<script>" not in html
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in html


def test_each_action_answers_what_subscribers_will_see(
    poison: tuple[TicketWorld, list[str]],
) -> None:
    world, (first, second) = poison
    hx = signed_in(**{"hx-request": "true"})
    still = world.client.request("POST", f"outbox/console/quarantine/{first}/replay", headers=hx)
    assert 'data-status="quarantined"' in still.get_body().decode()
    assert "What subscribers see: nothing new" in still.get_body().decode()
    world.memory.publisher.max_batch_bytes = 1024 * 1024
    sent = world.client.request("POST", f"outbox/console/quarantine/{first}/replay", headers=hx)
    assert 'data-status="resolved"' in sent.get_body().decode()
    assert "arrives in its session" in sent.get_body().decode()
    gone = world.client.request(
        "DELETE", f"outbox/console/quarantine/{second}", params={"reason": "dup"}, headers=hx
    )
    assert gone.status_code == 200 and 'data-status="discarded"' in gone.get_body().decode()
    assert "records an accepted gap" in gone.get_body().decode()
    report = world.client.request(
        "POST", "outbox/console/redrive", headers=hx, body={"since": "2000-01-01T00:00:00Z"}
    )
    assert "accepted by the topic" in report.get_body().decode()
    assert "MessageId of its own" in report.get_body().decode()


def test_a_long_body_is_shortened_on_the_page_with_a_way_to_see_it_whole(
    poison: tuple[TicketWorld, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    world, (event, _) = poison
    whole = body(world.client.request("GET", f"outbox/quarantine/{event}"))
    assert len(whole["body"]["title"]) == 5000 and whole["bodyBytes"] > 5000
    assert whole["traceId"] and len(whole["traceId"]) == 32
    monkeypatch.setenv("OUTBOX_CONSOLE_TRACE_URL", "https://portal.example/logs?op={traceId}")
    hx = signed_in(**{"hx-request": "true"})
    short = world.client.request("GET", f"outbox/console/quarantine/{event}", headers=hx)
    html = short.get_body().decode()
    assert "x" * 3000 in html and "x" * 5000 not in html and "Show the whole body" in html
    assert f'href="https://portal.example/logs?op={whole["traceId"]}"' in html
    full = world.client.request(
        "GET", f"outbox/console/quarantine/{event}", headers=hx, params={"whole": "true"}
    )
    assert "x" * 5000 in full.get_body().decode()


# -- the page -------------------------------------------------------------------------------


def test_the_page_is_an_operators_with_a_strict_policy_and_the_pages_token(
    world: TicketWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    page = world.client.request("GET", "outbox/console", headers={PRINCIPAL_HEADER: principal()})
    html = page.get_body().decode()
    assert page.status_code == 200 and page.mimetype == "text/html"
    assert "script-src 'self'" in page.headers["Content-Security-Policy"]
    assert "frame-ancestors 'none'" in page.headers["Content-Security-Policy"]
    cookie = page.headers["Set-Cookie"]
    token = cookie.split(";")[0].split("=", 1)[1]
    assert (
        "HttpOnly" in cookie
        and "SameSite=Strict" in cookie
        and "Path=/api/outbox/console" in cookie
    )
    assert f'<meta name="outbox-csrf" content="{token}">' in html
    assert "Signed in as <strong>ada@example.com</strong>" in html
    for panel in ("status", "backlog", "quarantine"):
        assert f'hx-get="/api/outbox/console/{panel}"' in html
    assert 'hx-post="/api/outbox/console/redrive/operation"' in html
    assert 'id="dead-letters"' in html and 'id="journey"' in html  # part 2's panels
    assert 'hx-get="/api/outbox/console/groups"' in html  # failure groups (issue 72)
    # its icon is in the page: no request for /favicon.ico, a 404 on every page (issue 72)
    assert '<link rel="icon" href="data:,">' in html
    assert "https://" not in html.replace("https://", "", 0).split("<body")[0]  # no CDN
    # Not signed in: to the sign-in, and back; signed in without the role: said so.
    away = world.client.request("GET", "outbox/console")
    assert away.status_code == 302
    assert away.headers["Location"] == (
        "/.auth/login/aad?post_login_redirect_uri=/api/outbox/console"
    )
    no_role = world.client.request(
        "GET", "outbox/console", headers={PRINCIPAL_HEADER: principal(roles=())}
    )
    assert no_role.status_code == 403 and "Outbox.Operator" in no_role.get_body().decode()
    monkeypatch.delenv("WEBSITE_AUTH_ENABLED")
    off = world.client.request("GET", "outbox/console", headers={PRINCIPAL_HEADER: principal()})
    assert off.status_code == 401 and "WEBSITE_AUTH_ENABLED" in off.get_body().decode()


def test_the_page_serves_its_own_files_and_htmx_with_its_licence(world: TicketWorld) -> None:
    me = {PRINCIPAL_HEADER: principal()}
    for name, media in (
        ("htmx.min.js", "text/javascript"),
        ("console.js", "text/javascript"),
        ("console.css", "text/css"),
    ):
        reply = world.client.request("GET", f"outbox/console/static/{name}", headers=me)
        assert (reply.status_code, reply.mimetype) == (200, media), name
        assert reply.headers["X-Content-Type-Options"] == "nosniff"
    licence = PACKAGE / "src/cosmos_outbox_operators/_console/static/vendor/htmx.LICENSE"
    assert "Zero-Clause BSD" in licence.read_text()
    for name in ("../templates/page.html", "htmx.LICENSE", "nope.js"):
        assert (
            world.client.request("GET", f"outbox/console/static/{name}", headers=me).status_code
            == 404
        )


def test_the_openapi_document_has_the_signed_in_door_but_not_the_page(world: TicketWorld) -> None:
    document = body(world.client.request("GET", "openapi.json"))
    paths = document["paths"]
    assert "/outbox/console" not in paths and "/outbox/console/static/{name}" not in paths
    status = paths["/outbox/console/status"]["get"]
    assert status["security"] == [{"signedInOperator": []}]
    assert {"401", "403"} <= set(status["responses"])
    assert paths["/outbox/status"]["get"]["security"] == [{"masterKey": []}]


def test_an_async_outbox_has_the_same_console() -> None:
    memory = in_memory()
    outbox = AsyncOutbox(services=lambda: memory.services)
    with FunctionClient(outbox.function_app(Operators(), title="async")) as client:
        assert client.request("GET", "outbox/console/status").status_code == 401
        reply = client.request(
            "GET", "outbox/console/quarantine", headers=signed_in(**{"hx-request": "true"})
        )
        assert reply.status_code == 200 and "Nothing is quarantined" in reply.get_body().decode()
        assert client.request("GET", "outbox/console", headers=signed_in()).status_code == 200


# -- the backlog's last hour ----------------------------------------------------------------


def test_the_backlog_route_answers_the_readings_and_the_page_a_chart(world: TicketWorld) -> None:
    history = world.outbox.wiring().backlog_history
    for pending in (4, 2, 0):
        run_sync(history.record(pending, 30.0 if pending else None))
    readings = body(world.client.request("GET", "outbox/backlog"))["readings"]
    assert [(r["pending"], r["oldestPendingAgeSeconds"]) for r in readings] == [
        (4, 30.0),
        (2, 30.0),
        (0, None),
    ]
    html = (
        world.client.request(
            "GET", "outbox/console/backlog", headers=signed_in(**{"hx-request": "true"})
        )
        .get_body()
        .decode()
    )
    assert '<svg xmlns="http://www.w3.org/2000/svg"' in html and 'role="img"' in html
    assert "<script" not in html  # pygal's own script is taken out
    assert "<caption>Backlog readings, oldest first</caption>" in html


# -- what it costs at start ------------------------------------------------------------------


def test_nothing_of_the_console_is_imported_when_the_app_is_indexed(tmp_path: Path) -> None:
    """The worker indexes the app at start: the templates and the chart library wait for the
    first request that renders (measured: python -X importtime, in the report)."""
    script = textwrap.dedent(
        """
        import json, sys, time
        started = time.perf_counter()
        from cosmos_outbox import Outbox
        from cosmos_outbox_testing import in_memory, FunctionClient
        from cosmos_outbox_operators import Operators
        memory = in_memory()
        app = Outbox(services=lambda: memory.services).function_app(Operators(), title="t")
        client = FunctionClient(app)
        indexed = time.perf_counter() - started
        before = sorted(m for m in ("jinja2", "pygal", "cosmos_outbox_operators._console.render",
                                    "cosmos_outbox_operators._console.chart") if m in sys.modules)
        import os
        os.environ["WEBSITE_AUTH_ENABLED"] = "True"
        os.environ["OUTBOX_CONSOLE_SIGN_IN"] = "app-service-authentication"
        client.request("GET", "outbox/console/backlog", headers={"hx-request": "true",
                       "x-ms-client-principal": sys.argv[1]})
        after = sorted(m for m in ("jinja2", "cosmos_outbox_operators._console.render")
                       if m in sys.modules)
        print(json.dumps({"before": before, "after": after, "indexed_s": indexed}))
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script, principal()],
        capture_output=True,
        text=True,
        timeout=scaled(120),
        check=True,
        cwd=tmp_path,
    )
    seen = json.loads(done.stdout.splitlines()[-1])
    assert seen["before"] == []
    assert seen["after"] == ["cosmos_outbox_operators._console.render", "jinja2"]


def test_principal_of_reads_the_platforms_header_and_nothing_else() -> None:
    header = principal(name="bo@example.com", oid="oid-bo", roles=("A", "Outbox.Operator"))
    found = principal_of({PRINCIPAL_HEADER: header, "x-ms-client-principal-idp": "aad"})
    assert found is not None
    assert (found.name, found.id, found.provider, found.roles) == (
        "bo@example.com",
        "oid-bo",
        "aad",
        frozenset({"A", "Outbox.Operator"}),
    )
    long_role = base64.b64encode(
        json.dumps(
            {
                "auth_typ": "aad",
                "claims": [
                    {"typ": "oid", "val": "o"},
                    {
                        "typ": "http://schemas.microsoft.com/ws/2008/06/identity/claims/role",
                        "val": "R",
                    },
                ],
            }
        ).encode()
    ).decode()
    assert principal_of({PRINCIPAL_HEADER: long_role}).roles == frozenset({"R"})  # type: ignore[union-attr]
    assert principal_of({}) is None
    assert principal_of({PRINCIPAL_HEADER: "x" * 20000}) is None
    assert principal_of({PRINCIPAL_HEADER: base64.b64encode(b"[]").decode()}) is None


def test_the_console_beside_a_fastapi_app_on_functions() -> None:
    """An ASGI app (`func.AsgiFunctionApp`: one catch-all function, `http_app_func`) with the
    operators' blueprint registered beside it: the host tries routes in the order of their
    functions' names, and the console's (`console_...`) come before the catch-all."""
    fastapi = pytest.importorskip("fastapi")
    import azure.functions as func

    def hello() -> dict[str, str]:
        return {"hello": "world"}

    api = fastapi.FastAPI()
    api.add_api_route("/hello", hello, methods=["GET"])

    memory = in_memory()
    outbox = AsyncOutbox(services=lambda: memory.services)
    app = func.AsgiFunctionApp(app=api, http_auth_level=func.AuthLevel.FUNCTION)
    app.register_functions(operators_blueprint(outbox))
    with FunctionClient(app, route_prefix="") as client:
        assert body(client.request("GET", "hello")) == {"hello": "world"}
        page = client.request("GET", "outbox/console", headers=signed_in())
        assert page.status_code == 200
        assert 'hx-get="/outbox/console/status"' in page.get_body().decode()
        status = client.request("GET", "outbox/console/status", headers=signed_in())
        assert body(status)["quarantined"] == 0
        assert client.request("GET", "outbox/console/status").status_code == 401


def test_an_app_chooses_the_role_or_leaves_the_console_out() -> None:
    memory = in_memory()
    outbox = Outbox(services=lambda: memory.services)
    import azure.functions as func

    without = func.FunctionApp()
    without.register_functions(operators_blueprint(outbox, console=False))
    names = {str(f.get_function_name()) for f in without.get_functions()}
    assert "outbox_status" in names and not {n for n in names if n.startswith("console_")}
    ours = func.FunctionApp()
    ours.register_functions(operators_blueprint(outbox, operator_role="Ops.OnCall"))
    with FunctionClient(ours) as client:
        assert (
            client.request("GET", "outbox/console/status", headers=signed_in()).status_code == 403
        )
        on_call = {PRINCIPAL_HEADER: principal(roles=("Ops.OnCall",))}
        assert client.request("GET", "outbox/console/status", headers=on_call).status_code == 200
