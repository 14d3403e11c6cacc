"""Actions protected against cross-site requests (docs/operating-the-outbox.md, "Who may act",
says what each check refuses and why): through the signed-in door, the same origin and the
page's token, double-submitted (`check_action`: a browser attaches the session cookie to any
request for the app, a form another site posts too); through the admin key's door, no action
from another site's page (`check_same_site`: where keys are not enforced, a bodyless POST from
another site would reach it); on a local host, every request -- reads too: a rebinding page
would read event bodies -- only for its own names (`check_local_host`: DNS rebinding). Nothing
is kept on the server: any instance checks any request."""

from __future__ import annotations

import hmac
import ipaddress
import os
import secrets
from collections.abc import Mapping
from urllib.parse import urlsplit

from cosmos_outbox.http import is_local_host

__all__ = [
    "CSRF_COOKIE",
    "CSRF_HEADER",
    "LOCAL_HOSTS_SETTING",
    "TRUST_FORWARDED_SETTING",
    "CrossSiteError",
    "check_action",
    "check_local_host",
    "check_same_site",
    "new_token",
    "token_cookie",
]

CSRF_COOKIE = "outbox-console-csrf"
CSRF_HEADER = "x-csrf-token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
#: `true` where a proxy in front of the app (Front Door, Application Gateway) rewrites `Host` and
#: sets `X-Forwarded-Host` / `X-Original-Host`: only then are they taken for this app's host.
TRUST_FORWARDED_SETTING = "OUTBOX_TRUST_FORWARDED_HOST"
#: Names besides the loopback ones a local host takes actions for (comma-separated).
LOCAL_HOSTS_SETTING = "OUTBOX_LOCAL_HOSTS"
_LOOPBACK_NAMES = frozenset({"localhost"})


class CrossSiteError(Exception):
    """An action the page did not send: why, in a sentence an operator can act on."""


def new_token() -> str:
    return secrets.token_urlsafe(32)


def token_cookie(token: str, *, path: str, secure: bool) -> str:
    """The `Set-Cookie` value that keeps `token` for the console under `path`."""
    flags = f"; Path={path}; HttpOnly; SameSite=Strict; Max-Age=43200"
    return f"{CSRF_COOKIE}={token}{flags}{'; Secure' if secure else ''}"


def cookie_value(headers: Mapping[str, str], name: str) -> str | None:
    """The value of cookie `name` in a request's `Cookie` header (the first, when repeated)."""
    for part in headers.get("cookie", "").split(";"):
        key, sep, value = part.strip().partition("=")
        if sep and key == name:
            return value
    return None


def check_action(
    method: str, headers: Mapping[str, str], *, bearer_validated: bool = False
) -> None:
    """Refuse (`CrossSiteError`) an action that is not the page's own; reads pass. The page's
    token is not asked of a script whose bearer token App Service Authentication validated
    (`bearer_validated`, from `identity.bearer_validated`)."""
    if method.upper() in SAFE_METHODS:
        return
    check_same_site(method, headers, page=True)
    if bearer_validated:
        return
    sent = headers.get(CSRF_HEADER, "")
    kept = cookie_value(headers, CSRF_COOKIE) or ""
    if not sent or not kept or not hmac.compare_digest(sent.encode(), kept.encode()):
        raise CrossSiteError(
            "this action did not come from the console page (its X-CSRF-Token header does not "
            "match the page's cookie): reload the page and try again"
        )


def check_local_host(
    method: str, headers: Mapping[str, str], environment: Mapping[str, str] | None = None
) -> None:
    """Refuse (`CrossSiteError`) a request a local host received for a name not its own (the
    module docstring): an action, and a read too (a page on a name that resolves to this
    machine could read the quarantine's event bodies; the console's reads and the admin
    key's, which a local host does not check). Every request passes where the host is not
    local (the platform routes only the app's names to it); `method` names it in the refusal."""
    env = os.environ if environment is None else environment
    if not is_local_host(env):
        return
    sent = headers.get("host", "").strip()
    name = (urlsplit(f"//{sent}").hostname or "") if sent else ""
    configured = {n.strip().lower() for n in env.get(LOCAL_HOSTS_SETTING, "").split(",")}
    if name in _LOOPBACK_NAMES or name in configured - {""} or _loopback_address(name):
        return
    what = "reads" if method.upper() in SAFE_METHODS else "takes actions"
    raise CrossSiteError(
        f"this local host {what} only for its loopback names, not for {sent[:100]!r}: a "
        "page on a name that resolves to this machine would read and act as you (DNS "
        f"rebinding). Use localhost or 127.0.0.1, or list the name in {LOCAL_HOSTS_SETTING}"
    )


def _loopback_address(name: str) -> bool:
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def check_same_site(
    method: str,
    headers: Mapping[str, str],
    environment: Mapping[str, str] | None = None,
    *,
    page: bool = False,
) -> None:
    """Refuse (`CrossSiteError`) an action from another site's page: an `Origin` that is not
    this host's (the scheme is not compared: the host sees plain HTTP behind App Service's TLS
    front end), or a `Sec-Fetch-Site` other than `same-origin`, or `none` (typed by the user)
    but for the console's `page` (`same-site` is another origin: a sibling app). Reads pass;
    so does a request with neither header (a script: no browser sends an action without one).
    A local host's actions need one of its own names (`check_local_host`)."""
    if method.upper() in SAFE_METHODS:
        return
    check_local_host(method, headers, environment)
    refused = (
        "the console's actions are taken from its own page only"
        if page
        else ("the operators' actions are not taken from another site's page")
    )
    origin = headers.get("origin")
    if origin is not None:
        netloc = urlsplit(origin.strip()).netloc.lower() if origin.strip() != "null" else ""
        if not netloc or netloc not in _hosts(headers, environment):
            raise CrossSiteError(
                f"this action was sent from another origin ({origin[:100]}): {refused}"
            )
        return
    site = headers.get("sec-fetch-site")
    allowed = ("same-origin",) if page else ("same-origin", "none")
    if site is not None and site.strip().lower() not in allowed:
        raise CrossSiteError(
            f"this action was sent from another site (Sec-Fetch-Site: {site[:40]}): {refused}"
        )


def _hosts(headers: Mapping[str, str], environment: Mapping[str, str] | None) -> set[str]:
    """This app's host as the request names it: `Host`, and the forwarded ones only where the
    app trusts them (`TRUST_FORWARDED_SETTING`)."""
    env = os.environ if environment is None else environment
    trusted = env.get(TRUST_FORWARDED_SETTING, "").strip().lower() == "true"
    names = ("host", "x-forwarded-host", "x-original-host") if trusted else ("host",)
    return {
        h.strip().lower()
        for name in names
        for h in headers.get(name, "").split(",")[:1]
        if h.strip()
    }
