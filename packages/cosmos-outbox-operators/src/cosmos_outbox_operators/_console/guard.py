"""Actions from the page, protected against cross-site requests.

A signed-in operator's browser holds App Service Authentication's session cookie, and a browser
attaches it to any request for the app -- a form another site posts, too. So an action (any
method but GET and HEAD) through the signed-in door must show that the page itself sent it:

1. **Same origin.** `Origin` (which browsers send with every POST and DELETE, fetch and form
   alike) must name this app's host (the request's `Host`; `X-Forwarded-Host` /
   `X-Original-Host` only where the app says a proxy in front of it sets them,
   `OUTBOX_TRUST_FORWARDED_HOST=true`: else any client could name the host it claims to come
   from); without `Origin`, `Sec-Fetch-Site`,
   when sent, must be `same-origin` (`same-site` is refused: a sibling app on the same domain is
   another origin). The scheme is not compared: the host sees plain HTTP behind App Service's
   TLS front end.
2. **A token, double-submitted.** The page sets a random token in a cookie (`HttpOnly`,
   `SameSite=Strict`, scoped to the console's path, `Secure` over HTTPS) and writes the same
   token into itself; its script sends it back in the `X-CSRF-Token` header. Another site can
   neither read the cookie nor the page, so it cannot send the header; a header that is not
   the cookie's is refused. Nothing is kept on the server: any instance checks any request.

Why both: the origin check alone trusts every browser to send `Origin` (old ones and some
proxies drop it); the token alone trusts that no one can plant a cookie (a sibling subdomain
can, "cookie tossing"), which the origin check refuses. A script whose Entra ID token App
Service Authentication validated needs no token (`identity.bearer_validated`: authentication
believed here, in Azure, and no session cookie with the request, so the principal is the
token's); any other `Authorization: Bearer` value counts for nothing -- locally nothing validates
one, and a header anyone can write is no proof that the page sent the request.

The admin key's door needs no token: its key travels in the `x-functions-key` header, which no
other site can make a browser send, and never in a URL (`?code=` is refused). But where keys are
not enforced (the local host checks none) a bodyless POST from another site's page (a "simple"
request: no preflight) would reach it, so its actions are refused from another site as well
(`check_same_site`: an `Origin` that is not this host's, a `Sec-Fetch-Site` of `cross-site` or
`same-site`), whether or not keys are enforced; a script or the command line sends neither.

**A local host takes actions only for its own names** (`check_local_host`). The same-origin
check compares `Origin` with the request's own `Host`, and a local host answers to any name: a
page on a name its owner points at 127.0.0.1 (DNS rebinding) sends its own name as both, and
passed (issue 72). So on a local host (`FUNCTIONS_CORETOOLS_ENVIRONMENT=true`: Core Tools,
funcstack) an action through either door needs a `Host` of a loopback name (`localhost`,
`127.0.0.1` and the rest of 127.0.0.0/8, `::1`; any port) or one the owner lists in
`OUTBOX_LOCAL_HOSTS` (comma-separated: a dev container's forwarded name). Reads stay open. In
Azure the platform routes to the app only the names bound to it, and no check is needed."""

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
    _same_origin(headers)
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
    """Refuse (`CrossSiteError`) an action a local host received for a name not its own (the
    module docstring); reads pass, and so does every request where the host is not local."""
    env = os.environ if environment is None else environment
    if method.upper() in SAFE_METHODS or not is_local_host(env):
        return
    sent = headers.get("host", "").strip()
    name = (urlsplit(f"//{sent}").hostname or "") if sent else ""
    configured = {n.strip().lower() for n in env.get(LOCAL_HOSTS_SETTING, "").split(",")}
    if name in _LOOPBACK_NAMES or name in configured - {""} or _loopback_address(name):
        return
    raise CrossSiteError(
        f"this local host takes actions only for its loopback names, not for {sent[:100]!r}: a "
        "page on a name that resolves to this machine would act as you (DNS rebinding). Use "
        f"localhost or 127.0.0.1, or list the name in {LOCAL_HOSTS_SETTING}"
    )


def _loopback_address(name: str) -> bool:
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def check_same_site(
    method: str, headers: Mapping[str, str], environment: Mapping[str, str] | None = None
) -> None:
    """Refuse (`CrossSiteError`) an action the admin key's door received from another site's
    page: an `Origin` that is not this host's, or a `Sec-Fetch-Site` other than `same-origin`
    or `none` (typed by the user). Reads pass; so does a request with neither header (a script,
    the command line: no browser sends an action without one of them). A local host's actions
    need one of its own names (`check_local_host`)."""
    if method.upper() in SAFE_METHODS:
        return
    check_local_host(method, headers, environment)
    origin = headers.get("origin")
    if origin is not None:
        netloc = urlsplit(origin.strip()).netloc.lower() if origin.strip() != "null" else ""
        if not netloc or netloc not in _hosts(headers, environment):
            raise CrossSiteError(
                f"this action was sent from another origin ({origin[:100]}): the operators' "
                "actions are not taken from another site's page"
            )
        return
    site = headers.get("sec-fetch-site")
    if site is not None and site.strip().lower() not in ("same-origin", "none"):
        raise CrossSiteError(
            f"this action was sent from another site (Sec-Fetch-Site: {site[:40]}): the "
            "operators' actions are not taken from another site's page"
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


def _same_origin(headers: Mapping[str, str]) -> None:
    check_local_host("POST", headers)
    hosts = _hosts(headers, None)
    origin = headers.get("origin")
    if origin is not None:
        netloc = urlsplit(origin.strip()).netloc.lower() if origin.strip() != "null" else ""
        if not netloc or netloc not in hosts:
            raise CrossSiteError(
                f"this action was sent from another origin ({origin[:100]}): the console's "
                "actions are taken from its own page only"
            )
        return
    site = headers.get("sec-fetch-site")
    if site is not None and site.strip().lower() != "same-origin":
        raise CrossSiteError(
            f"this action was sent from another site (Sec-Fetch-Site: {site[:40]}): the "
            "console's actions are taken from its own page only"
        )
