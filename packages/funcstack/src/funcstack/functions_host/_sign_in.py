"""App Service Authentication ("Easy Auth"), stood in for locally -- opt-in, never on by default.

In Azure, App Service Authentication runs in front of the Functions host: it signs users in with
an identity provider (Entra ID), keeps their session in the ``AppServiceAuthSession`` cookie,
removes any ``X-MS-CLIENT-PRINCIPAL*`` / ``X-MS-TOKEN-*`` header a client sends, and hands each
request of a signed-in user to the app with the headers naming them (``X-MS-CLIENT-PRINCIPAL``:
Base64 JSON of the claims, app roles among them; ``-ID``, ``-NAME``, ``-IDP``); the app's
environment then holds ``WEBSITE_AUTH_ENABLED=True`` (Microsoft Learn, "Work with user
identities in Azure App Service authentication"; azure-functions-host reads the same variable,
``EnvironmentSettingNames.EasyAuthEnabled``).

With the local-only app setting ``FUNCSTACK_SIGN_IN=true`` this host does the same, as far as
an app can tell: the worker's environment gets ``WEBSITE_AUTH_ENABLED=True``; client-sent
principal and token headers are removed from every request; and

* ``GET /.auth/login/aad?post_login_redirect_uri=/path`` answers a form (a user name, app roles,
  those of ``FUNCSTACK_SIGN_IN_ROLES`` proposed) -- no password, no identity provider: whoever
  runs the stack signs in as anyone;
* posting it sets the session cookie and redirects to the path (a path of this host only);
* a request with the cookie reaches the app with the four ``X-MS-CLIENT-PRINCIPAL*`` headers, in
  the shape App Service writes for Entra ID (``auth_typ`` "aad", ``name_typ`` "name",
  ``role_typ`` "roles", the object id claim: a UUID made from the name);
* ``GET /.auth/me`` answers the session's claims (401 without one), ``GET /.auth/logout``
  ends the session and redirects (``post_logout_redirect_uri``, a path): the cookie is removed
  and the session refused from then on, should its value be sent again (a copy kept by a script
  or another browser); a session also ends ``SESSION_SECONDS`` (8 h, App Service's default)
  after it began.

What differs (packages/funcstack/docs/azure-differences.md): no identity provider, no tokens
(``X-MS-TOKEN-*`` are never set, a bearer token is not validated: scripts use keys locally),
Entra ID only (``/.auth/login/aad``), and the session is signed with ``FUNCSTACK_SIGN_IN_SECRET``
when set (the same on every instance and across restarts), else with a key made at start (a
restart signs everyone out); the sessions signed out are remembered by the host that signed them
out, until it stops. Neither setting reaches the worker."""

from __future__ import annotations

import base64
import hashlib
import hmac
import html
import json
import logging
import os
import secrets
import time
import uuid
from collections.abc import Mapping
from urllib.parse import parse_qs

from aiohttp import web
from multidict import CIMultiDict

__all__ = [
    "CORE_TOOLS_ENVIRONMENT",
    "ROLES_SETTING",
    "SECRET_SETTING",
    "SIGN_IN_SETTING",
    "SignIn",
]

logger = logging.getLogger("funcstack.functions_host.sign_in")

#: Local-only app setting: "true" turns the stand-in on.
SIGN_IN_SETTING = "FUNCSTACK_SIGN_IN"
#: How long a session lasts (App Service Authentication's default cookie lifetime: 8 hours).
SESSION_SECONDS = 8 * 3600
#: Local-only app setting: the app roles the sign-in form proposes (separated by spaces).
ROLES_SETTING = "FUNCSTACK_SIGN_IN_ROLES"
#: Local-only app setting: what sessions are signed with (stable across restarts and instances).
SECRET_SETTING = "FUNCSTACK_SIGN_IN_SECRET"  # noqa: S105  # a setting's name
#: What App Service sets in the app's environment while its authentication is on.
AUTH_ENABLED = "WEBSITE_AUTH_ENABLED"
#: What Core Tools sets on its host and workers ("true"): a local host (funcstack sets it too).
CORE_TOOLS_ENVIRONMENT = "FUNCTIONS_CORETOOLS_ENVIRONMENT"
SESSION_COOKIE = "AppServiceAuthSession"
_PLATFORM_HEADERS = ("x-ms-client-principal", "x-ms-token-")
_OID = "http://schemas.microsoft.com/identity/claims/objectidentifier"
_NAMESPACE = uuid.UUID("5c3a5f0e-2f7e-4d0b-9a57-6d3b8f1f0a11")
_MAX_FIELD = 200


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _local_path(value: str | None) -> str:
    """A redirect target of this host only: a path (not `//host`, not a URL), else `/`."""
    if value and value.startswith("/") and not value.startswith("//") and "\\" not in value:
        return value
    return "/"


class SignIn:
    """The stand-in of one host (see the module)."""

    def __init__(self, secret: bytes, *, roles: str = "") -> None:
        self._key = hashlib.sha256(b"funcstack-sign-in|" + secret).digest()
        self._roles = roles
        #: the sessions signed out here (their ids), refused if their cookie comes again
        self._ended: set[str] = set()

    @classmethod
    def from_settings(cls, settings: Mapping[str, str] | None = None) -> SignIn | None:
        """The stand-in when the settings (default: the environment) turn it on, else None."""
        source = os.environ if settings is None else settings
        if source.get(SIGN_IN_SETTING, "").strip().lower() != "true":
            return None
        secret = source.get(SECRET_SETTING) or secrets.token_urlsafe(32)
        return cls(secret.encode(), roles=source.get(ROLES_SETTING, ""))

    @staticmethod
    def worker_environment(environment: dict[str, str], *, on: bool = True) -> None:
        """What App Service's environment holds: ``WEBSITE_AUTH_ENABLED=True`` while its
        authentication is on (`on`: the stand-in is), else nothing -- a value of the settings or
        the shell is removed, with a warning naming it: the platform sets that variable, and
        without the stand-in nothing here removes a principal header a client sends, so an app
        believing the variable would believe a forged one. The stand-in's own settings are
        removed too (they are the host's)."""
        if on:
            environment[AUTH_ENABLED] = "True"
        elif environment.pop(AUTH_ENABLED, None) is not None:
            logger.warning(
                "%s is App Service's to set, not a setting's: removed from the app's environment "
                "(nothing here removes a client's X-MS-CLIENT-PRINCIPAL header); set %s=true for "
                "the local stand-in of App Service Authentication",
                AUTH_ENABLED,
                SIGN_IN_SETTING,
            )
        for name in (SECRET_SETTING, SIGN_IN_SETTING, ROLES_SETTING):
            environment.pop(name, None)

    # -- the session ----------------------------------------------------------------------------

    def _seal(self, claims: Mapping[str, object]) -> str:
        payload = _b64url(json.dumps(claims, separators=(",", ":")).encode())
        mac = _b64url(hmac.new(self._key, payload.encode(), hashlib.sha256).digest())
        return f"{payload}.{mac}"

    def _open(self, cookie: str | None) -> dict[str, object] | None:
        payload, _, mac = (cookie or "").partition(".")
        if not payload or not mac:
            return None
        expected = _b64url(hmac.new(self._key, payload.encode(), hashlib.sha256).digest())
        if not hmac.compare_digest(mac, expected):
            return None
        try:
            sealed = json.loads(_unb64url(payload))
        except ValueError:
            return None
        if not isinstance(sealed, dict) or not isinstance(sealed.get("claims"), dict):
            return None
        if sealed.get("sid") in self._ended or float(sealed.get("exp", 0)) < time.time():
            return None
        claims: dict[str, object] = sealed["claims"]
        return claims

    def session_of(self, request: web.BaseRequest) -> dict[str, object] | None:
        return self._open(request.cookies.get(SESSION_COOKIE))

    def _end(self, cookie: str | None) -> None:
        """Remember the session of `cookie` as signed out (its value refused from now on)."""
        payload = (cookie or "").partition(".")[0]
        try:
            sealed = json.loads(_unb64url(payload)) if self._open(cookie) is not None else None
        except ValueError:
            sealed = None
        if isinstance(sealed, dict) and isinstance(sealed.get("sid"), str):
            self._ended.add(sealed["sid"])

    # -- requests -------------------------------------------------------------------------------

    async def answer(self, request: web.BaseRequest) -> web.Response | None:
        """The answer to a request for `/.auth/...`; None for every other request."""
        path = request.path
        if not path.startswith("/.auth/"):
            return None
        if path == "/.auth/login/aad" and request.method == "GET":
            return self._form(
                _local_path(request.query.get("post_login_redirect_uri")), self._roles
            )
        if path == "/.auth/login/aad" and request.method == "POST":
            return await self._sign_in(request)
        if path == "/.auth/me" and request.method == "GET":
            session = self.session_of(request)
            if session is None:
                return web.json_response({"error": "not signed in"}, status=401)
            return web.json_response([_me(session)])
        if path == "/.auth/logout" and request.method == "GET":
            target = _local_path(request.query.get("post_logout_redirect_uri"))
            self._end(request.cookies.get(SESSION_COOKIE))
            response = web.Response(status=302, headers={"Location": target})
            response.del_cookie(SESSION_COOKIE, path="/")
            return response
        return web.Response(status=404)

    def admitted(self, request: web.BaseRequest) -> web.BaseRequest:
        """`request` as the app sees it behind App Service Authentication: the principal headers
        of its session (none without one), whatever the client sent in their place removed."""
        headers = CIMultiDict(
            (k, v)
            for k, v in request.headers.items()
            if not k.lower().startswith(_PLATFORM_HEADERS)
        )
        session = self.session_of(request)
        if session is not None:
            headers["X-MS-CLIENT-PRINCIPAL"] = base64.b64encode(
                json.dumps(session, separators=(",", ":")).encode()
            ).decode()
            headers["X-MS-CLIENT-PRINCIPAL-ID"] = _claim(session, _OID)
            headers["X-MS-CLIENT-PRINCIPAL-NAME"] = _claim(session, "name")
            headers["X-MS-CLIENT-PRINCIPAL-IDP"] = "aad"
        if len(headers) == len(request.headers) and session is None:
            return request
        return request.clone(headers=headers)

    async def _sign_in(self, request: web.BaseRequest) -> web.Response:
        form = parse_qs((await request.read()).decode("utf-8", "replace"))
        name = (form.get("name") or [""])[0].strip()[:_MAX_FIELD]
        if not name:
            return web.Response(status=400, text="a user name is required")
        roles = [
            r.strip()[:_MAX_FIELD]
            for r in (form.get("roles") or [""])[0].replace(",", " ").split()
            if r.strip()
        ]
        oid = str(uuid.uuid5(_NAMESPACE, name))
        claims = {
            "auth_typ": "aad",
            "claims": [
                {"typ": "name", "val": name},
                {"typ": "preferred_username", "val": name},
                {"typ": _OID, "val": oid},
                *({"typ": "roles", "val": role} for role in roles),
            ],
            "name_typ": "name",
            "role_typ": "roles",
        }
        target = _local_path((form.get("post_login_redirect_uri") or ["/"])[0])
        logger.info("signed in (local stand-in) as %s with roles %s", name, ",".join(roles))
        response = web.Response(status=302, headers={"Location": target})
        session = {
            "claims": claims,
            "sid": secrets.token_urlsafe(16),
            "exp": time.time() + SESSION_SECONDS,
        }
        response.set_cookie(
            SESSION_COOKIE, self._seal(session), path="/", httponly=True, samesite="Lax"
        )
        return response

    @staticmethod
    def _form(target: str, roles: str) -> web.Response:
        page = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Sign in (funcstack)</title>
<meta name="viewport" content="width=device-width, initial-scale=1"></head>
<body><main>
<h1>Sign in</h1>
<p>funcstack's local stand-in for App Service Authentication (Entra ID): no password and no
identity provider. Never in Azure.</p>
<form method="post" action="/.auth/login/aad">
<input type="hidden" name="post_login_redirect_uri" value="{html.escape(target)}">
<p><label for="name">User name</label><br>
<input id="name" name="name" required maxlength="{_MAX_FIELD}" value="operator@localhost"></p>
<p><label for="roles">App roles (separated by spaces or commas)</label><br>
<input id="roles" name="roles" maxlength="{_MAX_FIELD}" value="{html.escape(roles)}"></p>
<p><button type="submit">Sign in</button></p>
</form>
</main></body></html>
"""
        return web.Response(
            text=page,
            content_type="text/html",
            headers={"Cache-Control": "no-store", "X-Frame-Options": "DENY"},
        )


def _claim(session: Mapping[str, object], claim_type: str) -> str:
    claims = session.get("claims")
    for claim in claims if isinstance(claims, list) else []:
        if isinstance(claim, dict) and claim.get("typ") == claim_type:
            return str(claim.get("val", ""))
    return ""


def _me(session: Mapping[str, object]) -> dict[str, object]:
    """One entry of `/.auth/me`, as App Service answers it (without tokens)."""
    return {
        "provider_name": "aad",
        "user_id": _claim(session, "name"),
        "user_claims": session.get("claims", []),
    }
