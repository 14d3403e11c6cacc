"""Keys enforced as the Azure host does, when asked (``enforce_keys``): by the function's auth
level, from the ``x-functions-key`` header or the ``code`` query parameter, 401 with an empty
body otherwise; by default nothing is checked, as with ``func start``. And App Service
Authentication's local stand-in, when the settings turn it on (``FUNCSTACK_SIGN_IN``): a sign-in
at ``/.auth/login/aad``, the principal headers of the session handed to the app, client-sent
ones removed."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode

import pytest

from funcstack.functions_host._host_endpoints import default_host_id, stable_hash
from funcstack.functions_host._keys import FUNCTION_KEY_SETTING, MASTER_KEY_SETTING
from funcstack.functions_host._launcher import RunningRunner, start_runner
from funcstack.functions_host._sign_in import ROLES_SETTING, SECRET_SETTING, SIGN_IN_SETTING
from funcstack.functions_host.testing import Reply, call

from .conftest import make_app_dir

pytestmark = pytest.mark.integration

ROUTES = {"anonymous": "open", "function": "orders", "admin": "operators/status"}


@pytest.fixture(scope="module")
def enforcing(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningRunner]:
    tmp = tmp_path_factory.mktemp("auth")
    app_dir = make_app_dir(
        tmp,
        "sample_auth_app.py",
        {
            "FUNCTIONS_WORKER_RUNTIME": "python",
            SIGN_IN_SETTING: "true",
            SECRET_SETTING: "the-sign-in-secret",
            ROLES_SETTING: "Operator",
        },
    )
    runner = start_runner(
        app_dir=app_dir,
        settings_file=app_dir / "local.settings.json",
        log_path=tmp / "runner.log",
        enforce_keys=True,
    )
    try:
        yield runner
    finally:
        runner.stop()


def key_of(runner: RunningRunner, which: str) -> str:
    key = {
        "function": runner.function_key,
        "master": runner.master_key,
        "wrong": "not-a-key-of-this-host",
    }[which]
    assert key
    return key


def ask(
    runner: RunningRunner,
    level: str,
    *,
    key: str | None = None,
    header: bool = True,
    query: str = "",
) -> Reply:
    url = f"{runner.url}/{ROUTES[level]}"
    if key is not None and not header:
        query = f"code={key}" + (f"&{query}" if query else "")
    headers = {"x-functions-key": key} if key is not None and header else {}
    return call(f"{url}?{query}" if query else url, headers=headers)


# (level, key sent, where) -> status, as the Azure host answers
CASES = [
    ("anonymous", None, "header", 200),
    ("anonymous", "wrong", "header", 200),
    ("anonymous", "function", "query", 200),
    ("anonymous", "master", "header", 200),
    ("function", None, "header", 401),
    ("function", "wrong", "header", 401),
    ("function", "wrong", "query", 401),
    ("function", "function", "header", 200),
    ("function", "function", "query", 200),
    ("function", "master", "header", 200),
    ("function", "master", "query", 200),
    ("admin", None, "header", 401),
    ("admin", "wrong", "header", 401),
    ("admin", "function", "header", 401),
    ("admin", "function", "query", 401),
    ("admin", "master", "header", 200),
    ("admin", "master", "query", 200),
]


@pytest.mark.parametrize(("level", "which", "where", "status"), CASES)
def test_each_auth_level_takes_the_keys_the_azure_host_takes(
    enforcing: RunningRunner,
    level: str,
    which: str | None,
    where: str,
    status: int,
) -> None:
    key = None if which is None else key_of(enforcing, which)
    reply = ask(enforcing, level, key=key, header=where == "header")
    assert reply.status == status, reply.body
    if status == 401:
        assert reply.body == b""  # UnauthorizedResult: no body
    else:
        assert reply.json()["level"] == level  # type: ignore[index]


def test_the_code_parameter_and_the_header_reach_the_function_as_in_azure(
    enforcing: RunningRunner,
) -> None:
    key = key_of(enforcing, "function")
    by_query = ask(enforcing, "function", key=key, header=False, query="page=2").json()
    assert isinstance(by_query, dict)
    assert by_query["params"] == {"code": key, "page": "2"}  # not stripped
    assert by_query["url"].endswith(f"/api/orders?code={key}&page=2")
    by_header = ask(enforcing, "function", key=key).json()
    assert isinstance(by_header, dict)
    assert by_header["key_header"] is True and by_header["params"] == {}
    assert by_header["keys_in_environment"] == []  # the keys are the host's, not the app's


def test_the_header_takes_precedence_over_the_code_parameter(enforcing: RunningRunner) -> None:
    good = key_of(enforcing, "function")
    url = f"{enforcing.url}/orders?code={good}"
    assert call(url, headers={"x-functions-key": "wrong"}).status == 401
    assert call(url, headers={"x-functions-key": ""}).status == 401
    assert call(f"{enforcing.url}/orders?code=", headers={}).status == 401
    assert (
        call(f"{enforcing.url}/orders?code=wrong", headers={"x-functions-key": good}).status == 200
    )


def test_routing_comes_first_and_keys_are_never_logged(enforcing: RunningRunner) -> None:
    assert call(f"{enforcing.url}/nowhere").status == 404  # no function: 404, not 401
    reply = call(f"{enforcing.url}/orders", "POST", body=b"x" * 10)
    assert (reply.status, reply.body) == (401, b"")
    assert enforcing.log_path is not None
    log = Path(enforcing.log_path).read_text()
    for key in (key_of(enforcing, "function"), key_of(enforcing, "master")):
        assert key not in log
    assert "status=401" in log


def test_the_host_endpoints_answer_as_the_azure_hosts(enforcing: RunningRunner) -> None:
    """``/`` (the landing page: 200 HTML for any method, no key), ``/admin/host/ping``
    (anonymous: what health probes call; GET and POST, uncached, no body) and
    ``/admin/host/status`` (admin level: the master key only), outside the route prefix, as
    ``HomepageMiddleware`` and ``HostController`` answer."""
    root = f"http://127.0.0.1:{enforcing.port}"
    for method in ("GET", "POST"):
        page = call(f"{root}/", method)
        assert page.status == 200, method
        assert page.headers["content-type"] == "text/html"
        assert b"<title>Your Azure Function App is up and running.</title>" in page.body
    for method in ("GET", "POST"):
        ping = call(f"{root}/admin/host/ping", method)
        assert (ping.status, ping.body) == (200, b""), method
        assert ping.headers["cache-control"] == "no-store,no-cache"
        assert ping.headers["pragma"] == "no-cache"
    assert call(f"{root}/Admin/Host/Ping/").status == 200  # routing ignores case and a last /
    refused = call(f"{root}/admin/host/ping", "PUT")
    assert (refused.status, refused.headers["allow"]) == (405, "GET, POST")
    assert call(f"{enforcing.url}/admin/host/ping").status == 404  # not under the prefix
    master = key_of(enforcing, "master")
    for headers, query in (
        ({}, ""),
        ({"x-functions-key": key_of(enforcing, "function")}, ""),
        ({"x-functions-key": "wrong"}, ""),
    ):
        status = call(f"{root}/admin/host/status{query}", headers=headers)
        assert (status.status, status.body) == (401, b""), headers
    for headers, query in (({"x-functions-key": master}, ""), ({}, f"?code={master}")):
        status = call(f"{root}/admin/host/status{query}", headers=headers)
        assert status.status == 200, headers
        assert status.headers["content-type"] == "application/json; charset=utf-8"
        data = status.json()
        assert isinstance(data, dict)
        assert set(data) == {
            "id",
            "state",
            "version",
            "versionDetails",
            "platformVersion",
            "instanceId",
            "computerName",
            "processUptime",
            "functionAppContentEditingState",
        }
        assert data["state"] == "Running"
        assert data["functionAppContentEditingState"] == "Unknown"
        assert isinstance(data["processUptime"], int) and data["processUptime"] > 0
        app_dir = Path(enforcing.log_path or "").parent / "app"
        assert data["id"] == default_host_id(app_dir.resolve())
        assert len(data["id"]) <= 32 and data["id"] == data["id"].lower()
    assert call(
        f"{root}/admin/host/status", "POST", headers={"x-functions-key": master}
    ).status == (405)


def test_the_host_id_is_the_hosts_outside_azure() -> None:
    """``ScriptHostIdProvider.GetDefaultHostId``: the machine name's letters and digits, the
    absolute value of ``GetStableHash`` of the script root (32-bit, UTF-16), cut to 32, lower
    case, no trailing ``-``."""
    assert stable_hash("") == 23
    assert stable_hash("a") == 23 * 31 + 97
    assert stable_hash("/home/site/wwwroot") == 2_137_340_777
    assert stable_hash("/srv/app") == -251_135_983  # wrapped: its absolute value is used
    assert default_host_id(Path("/srv/app"), "My-PC.corp") == "mypc-251135983"
    assert default_host_id(Path("/x"), "a" * 40) == "a" * 32
    assert default_host_id(Path("/x"), "b" * 31) == "b" * 31  # "bbb...-" trimmed


def test_keys_given_by_settings_are_the_keys(tmp_path: Path) -> None:
    app_dir = make_app_dir(
        tmp_path,
        "sample_auth_app.py",
        {
            "FUNCTIONS_WORKER_RUNTIME": "python",
            FUNCTION_KEY_SETTING: "fixed-function-key",
            MASTER_KEY_SETTING: "fixed-master-key",
        },
    )
    runner = start_runner(
        app_dir=app_dir,
        settings_file=app_dir / "local.settings.json",
        log_path=tmp_path / "runner.log",
        enforce_keys=True,
    )
    try:
        assert (runner.function_key, runner.master_key) == (
            "fixed-function-key",
            "fixed-master-key",
        )
        assert ask(runner, "function", key="fixed-function-key").status == 200
        assert ask(runner, "admin", key="fixed-master-key", header=False).status == 200
        assert ask(runner, "admin", key="fixed-function-key").status == 401
        seen = ask(runner, "anonymous").json()
        assert isinstance(seen, dict) and seen["keys_in_environment"] == []
    finally:
        runner.stop()


def whoami(runner: RunningRunner, **headers: str) -> dict[str, object]:
    seen = call(f"{runner.url}/whoami", headers=headers).json()
    assert isinstance(seen, dict)
    return seen


def sign_in(runner: RunningRunner, name: str, roles: str, target: str) -> Reply:
    base = runner.url.removesuffix("/api")
    form = urlencode({"name": name, "roles": roles, "post_login_redirect_uri": target})
    return call(
        f"{base}/.auth/login/aad",
        "POST",
        body=form.encode(),
        headers={"content-type": "application/x-www-form-urlencoded"},
    )


def test_the_sign_in_stand_in_hands_the_app_the_principal_of_its_session(
    enforcing: RunningRunner,
) -> None:
    base = enforcing.url.removesuffix("/api")
    form = call(f"{base}/.auth/login/aad?post_login_redirect_uri=/api/whoami")
    assert form.status == 200 and b'name="post_login_redirect_uri" value="/api/whoami"' in form.body
    assert b'name="roles" maxlength="200" value="Operator"' in form.body  # proposed
    signed = sign_in(enforcing, "ada@example.com", "Outbox.Operator Reader", "/api/whoami")
    assert (signed.status, signed.headers["location"]) == (302, "/api/whoami")
    cookie = signed.headers["set-cookie"].split(";")[0]
    assert (
        cookie.startswith("AppServiceAuthSession=") and "HttpOnly" in signed.headers["set-cookie"]
    )
    seen = whoami(enforcing, cookie=cookie)
    principal = json.loads(base64.b64decode(str(seen["principal"])))
    assert (principal["auth_typ"], principal["role_typ"], principal["name_typ"]) == (
        "aad",
        "roles",
        "name",
    )
    claims = {(c["typ"], c["val"]) for c in principal["claims"]}
    assert {
        ("roles", "Outbox.Operator"),
        ("roles", "Reader"),
        ("name", "ada@example.com"),
    } <= claims
    assert (seen["name"], seen["idp"]) == ("ada@example.com", "aad")
    assert (
        seen["id"] == dict(claims)["http://schemas.microsoft.com/identity/claims/objectidentifier"]
    )
    # App Service's environment: authentication on; funcstack's settings are the host's; a
    # local host, as Core Tools says (an app believes no principal from a local host unless it
    # says a stand-in signs in: cosmos-outbox's OUTBOX_CONSOLE_SIGN_IN=local-stand-in)
    assert (seen["auth_enabled"], seen["funcstack_settings"]) == ("True", [])
    assert seen["local_host"] == "true"
    # the host's word that it checks keys (an app can tell a key it was sent was checked)
    assert seen["keys_enforced"] == "true"
    me = call(f"{base}/.auth/me", headers={"cookie": cookie}).json()
    assert isinstance(me, list) and me[0]["user_id"] == "ada@example.com"
    assert call(f"{base}/.auth/me").status == 401
    out = call(
        f"{base}/.auth/logout?post_logout_redirect_uri=/api/whoami", headers={"cookie": cookie}
    )
    assert out.status == 302 and "AppServiceAuthSession=" in out.headers["set-cookie"]
    # signed out: the session's cookie, sent again (a copy a script kept), is nobody's now
    assert call(f"{base}/.auth/me", headers={"cookie": cookie}).status == 401
    assert whoami(enforcing, cookie=cookie)["principal"] is None


def test_a_principal_a_client_sends_never_reaches_the_app(enforcing: RunningRunner) -> None:
    forged = base64.b64encode(json.dumps({"claims": [{"typ": "roles", "val": "Admin"}]}).encode())
    spoofed = {
        "x-ms-client-principal": forged.decode(),
        "x-ms-client-principal-name": "mallory",
        "x-ms-token-aad-access-token": "t",
    }
    seen = whoami(enforcing, **spoofed)
    assert (seen["principal"], seen["name"], seen["token"]) == (None, None, None)
    cookie = sign_in(enforcing, "bo", "", "/").headers["set-cookie"].split(";")[0]
    assert whoami(enforcing, cookie=cookie, **spoofed)["name"] == "bo"
    tampered = cookie[:-3] + ("AAA" if not cookie.endswith("AAA") else "BBB")
    assert whoami(enforcing, cookie=tampered)["principal"] is None
    # back to this host's paths only, never elsewhere
    for target in ("//evil.example/x", "https://evil.example/", "\\\\evil"):
        assert sign_in(enforcing, "bo", "", target).headers["location"] == "/"


def test_by_default_no_key_is_checked_as_with_func_start(tmp_path: Path) -> None:
    app_dir = make_app_dir(
        tmp_path,
        "sample_auth_app.py",
        # App Service's variable as a plain setting: nothing here strips a client's principal,
        # so the host removes it (and says so) rather than let the app believe the header
        # and a setting claiming keys are checked: the host's word overwrites it
        {
            "FUNCTIONS_WORKER_RUNTIME": "python",
            "WEBSITE_AUTH_ENABLED": "True",
            "FUNCSTACK_KEYS_ENFORCED": "true",
        },
    )
    runner = start_runner(
        app_dir=app_dir,
        settings_file=app_dir / "local.settings.json",
        log_path=tmp_path / "runner.log",
    )
    try:
        assert (runner.function_key, runner.master_key) == (None, None)
        assert [ask(runner, level).status for level in ROUTES] == [200, 200, 200]
        # no sign-in either: nothing removed, nothing added, no /.auth (as func start)
        seen = whoami(runner, **{"x-ms-client-principal-name": "as sent"})
        assert (seen["name"], seen["auth_enabled"], seen["local_host"]) == ("as sent", None, "true")
        assert seen["keys_enforced"] == "false"
        assert (
            "WEBSITE_AUTH_ENABLED is App Service's to set" in (tmp_path / "runner.log").read_text()
        )
        base = runner.url.removesuffix("/api")
        assert call(f"{base}/.auth/login/aad").status == 404
    finally:
        runner.stop()
