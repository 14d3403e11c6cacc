"""The signed-in operator, as App Service Authentication ("Easy Auth") names them.

In Azure, App Service Authentication (Entra ID here) sits in front of the Functions host: it
signs the user in, keeps their session, validates bearer tokens, and hands every request it
authenticated to the app with headers naming the caller (Microsoft Learn, "Work with user
identities in Azure App Service authentication"):

* `X-MS-CLIENT-PRINCIPAL`: the claims, Base64-encoded JSON
  `{"auth_typ": "aad", "claims": [{"typ": ..., "val": ...}], "name_typ": ..., "role_typ": ...}`
  (an app role assigned to the user is one claim of type `role_typ`, "roles" for Entra ID);
* `X-MS-CLIENT-PRINCIPAL-ID` (the object id), `-NAME` (a display name: UPN, e-mail), `-IDP`.

"External requests aren't allowed to set these headers, so they're present only if set by App
Service" -- while authentication is enabled on the app, which the platform says by setting the
environment variable `WEBSITE_AUTH_ENABLED=True` (the Functions host reads the same variable:
azure-functions-host, `EnvironmentSettingNames.EasyAuthEnabled`). But that variable is also an
ordinary app setting: anyone can set it where nothing strips a client's headers (a container, a
local host's settings file), and from it alone the app cannot tell. So a principal is believed
only when three things hold (`sign_in_trust`), and each refusal says which one failed:

1. **The app's owner says what signs operators in**, `OUTBOX_CONSOLE_SIGN_IN`:
   `app-service-authentication` (Azure App Service Authentication; the deployment that turns it
   on sets it: deploy/modules/functionapp.bicep) or `local-stand-in` (a local host's stand-in
   that strips client-sent headers as the platform does: funcstack's `FUNCSTACK_SIGN_IN=true`).
   Unset: no principal is believed, whatever else is set. A setting of our own, named for this
   one purpose, is not set by accident or copied from another app's environment listing.
2. **The platform says authentication is on**: `WEBSITE_AUTH_ENABLED=True`.
3. **The host is the one the owner named**: a local host -- Core Tools sets
   `FUNCTIONS_CORETOOLS_ENVIRONMENT=true` on its host and workers (azure-functions-core-tools
   `Program.cs`; the host's `EnvironmentSettingNames.CoreToolsEnvironment`), funcstack too --
   has no App Service Authentication: there `app-service-authentication` is refused, and
   `local-stand-in` is believed only there (a local setting copied to Azure opens nothing).

What remains trusted is the owner's word: `app-service-authentication` set where App Service
Authentication is off (or `local-stand-in` and `WEBSITE_AUTH_ENABLED` written into Core Tools'
local.settings.json, where nothing strips headers) would believe a forged header; the operating
guide says so (docs/operating-the-outbox.md, "Who may act"). The four headers always come
together from the platform, but a forger sends four as easily as one: their presence is not
checked, it would prove nothing.

**A bearer token** is validated by App Service Authentication, which then names its subject in
the same headers. The console's actions need the page's token (`guard`) unless the bearer was
validated (`bearer_validated`): App Service Authentication is believed here, and the request
carries no session cookie of its (`AppServiceAuthSession`), so the principal can only be the
token's -- a browser attaches the cookie by itself, never an `Authorization` header. Locally
nothing validates a bearer (funcstack's stand-in has no tokens): there the page's token is
always required.

The Functions host never grants an auth level to such a principal (`AuthUtility.
PrincipalHasAuthLevelClaim` counts only the key's claim): a route a signed-in operator calls is
one the host lets through (ANONYMOUS), and the check is this package's (`admit`)."""

from __future__ import annotations

import base64
import binascii
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = [
    "APP_SERVICE_AUTHENTICATION",
    "AUTH_ENABLED_SETTING",
    "LOCAL_HOST_SETTING",
    "LOCAL_STAND_IN",
    "OPERATOR_ROLE",
    "PRINCIPAL_HEADER",
    "SIGN_IN_SETTING",
    "Principal",
    "SignInTrust",
    "bearer_validated",
    "principal_of",
    "sign_in_trust",
    "sign_in_trusted",
]

#: Set to "True" by App Service while its authentication is enabled on the app.
AUTH_ENABLED_SETTING = "WEBSITE_AUTH_ENABLED"
#: Set to "true" by Core Tools (and funcstack) on a local host and its workers.
LOCAL_HOST_SETTING = "FUNCTIONS_CORETOOLS_ENVIRONMENT"
#: The app's owner says what signs operators in (module docstring).
SIGN_IN_SETTING = "OUTBOX_CONSOLE_SIGN_IN"
APP_SERVICE_AUTHENTICATION = "app-service-authentication"
LOCAL_STAND_IN = "local-stand-in"
#: App Service Authentication's session cookie (a browser's ambient credential).
SESSION_COOKIE = "AppServiceAuthSession"
PRINCIPAL_HEADER = "x-ms-client-principal"
#: The app role an operator is assigned (deploy/modules/operators-signin.bicep declares it).
OPERATOR_ROLE = "Outbox.Operator"
#: Claim types that carry app roles, whatever the header's `role_typ` says.
_ROLE_TYPES = ("roles", "http://schemas.microsoft.com/ws/2008/06/identity/claims/role")
_ID_TYPES = ("http://schemas.microsoft.com/identity/claims/objectidentifier", "oid")
_NAME_TYPES = ("preferred_username", "name", "email")
#: A principal header larger than this is refused unread (a token's claims are a few KB).
_MAX_HEADER = 16 * 1024


@dataclass(frozen=True)
class Principal:
    """Who App Service Authentication says signed in: name, object id, identity provider and the
    app roles assigned to them."""

    name: str
    id: str
    provider: str
    roles: frozenset[str]


@dataclass(frozen=True)
class SignInTrust:
    """Whether a principal header is believed here, by what (`mode`), and if not, why (a
    sentence naming the setting to change)."""

    trusted: bool
    mode: str
    why: str = ""


def _true(env: Mapping[str, str], name: str) -> bool:
    return env.get(name, "").strip().lower() == "true"


def sign_in_trust(environment: Mapping[str, str] | None = None) -> SignInTrust:
    """The rule of the module docstring, read from `environment` (default: the process's)."""
    env = os.environ if environment is None else environment
    mode = env.get(SIGN_IN_SETTING, "").strip().lower()
    local = _true(env, LOCAL_HOST_SETTING)
    if not _true(env, AUTH_ENABLED_SETTING):
        return SignInTrust(
            False,
            mode,
            "App Service Authentication is not enabled on this app "
            f"({AUTH_ENABLED_SETTING} is not true)",
        )
    if mode == APP_SERVICE_AUTHENTICATION and local:
        return SignInTrust(
            False,
            mode,
            f"this is a local host ({LOCAL_HOST_SETTING}=true), which has no App Service "
            f"Authentication: anyone could send the principal header. Locally, sign in through "
            f"funcstack's stand-in (FUNCSTACK_SIGN_IN=true) with {SIGN_IN_SETTING}="
            f"{LOCAL_STAND_IN}",
        )
    if mode == LOCAL_STAND_IN and not local:
        return SignInTrust(
            False,
            mode,
            f"{SIGN_IN_SETTING}={LOCAL_STAND_IN} is a local host's setting, and this host is "
            f"not one ({LOCAL_HOST_SETTING} is not true): in Azure set "
            f"{SIGN_IN_SETTING}={APP_SERVICE_AUTHENTICATION}",
        )
    if mode in (APP_SERVICE_AUTHENTICATION, LOCAL_STAND_IN):
        return SignInTrust(True, mode)
    named = (
        f"{SIGN_IN_SETTING}={mode!r} names nothing known"
        if mode
        else f"{SIGN_IN_SETTING} is not set"
    )
    return SignInTrust(
        False,
        mode,
        f"{named}: {AUTH_ENABLED_SETTING}=True alone is an app setting anyone can set, so the "
        f"principal header is believed only where the app's owner says App Service "
        f"Authentication signs operators in ({SIGN_IN_SETTING}={APP_SERVICE_AUTHENTICATION}, "
        f"set by the deployment that enables it; {LOCAL_STAND_IN} under funcstack's sign-in)",
    )


def sign_in_trusted(environment: Mapping[str, str] | None = None) -> bool:
    """Whether a principal header is believed here (`sign_in_trust`)."""
    return sign_in_trust(environment).trusted


def bearer_validated(headers: Mapping[str, str], trust: SignInTrust) -> bool:
    """Whether the request's `Authorization: Bearer` token was validated by App Service
    Authentication: it is believed here (in Azure), and no session cookie came with the request,
    so the principal it set can only be the token's (module docstring)."""
    if not trust.trusted or trust.mode != APP_SERVICE_AUTHENTICATION:
        return False
    if not headers.get("authorization", "").lower().startswith("bearer "):
        return False
    cookies = headers.get("cookie", "")
    return not any(part.strip().partition("=")[0] == SESSION_COOKIE for part in cookies.split(";"))


def principal_of(headers: Mapping[str, str]) -> Principal | None:
    """The principal of a request's headers (lower-case names, as the worker hands them), or
    None when there is none or it cannot be read. The caller decides whether to believe it
    (`sign_in_trust`)."""
    encoded = headers.get(PRINCIPAL_HEADER)
    if not encoded or len(encoded) > _MAX_HEADER:
        return None
    try:
        payload = json.loads(base64.b64decode(encoded, validate=False))
    except (binascii.Error, ValueError):
        return None
    if not isinstance(payload, dict) or not isinstance(payload.get("claims"), list):
        return None
    claims = [
        (str(c.get("typ", "")), str(c.get("val", "")))
        for c in payload["claims"]
        if isinstance(c, dict)
    ]
    role_type = str(payload.get("role_typ") or "roles")
    name_type = str(payload.get("name_typ") or "name")
    roles = frozenset(v for t, v in claims if t == role_type or t in _ROLE_TYPES)
    name = headers.get("x-ms-client-principal-name") or _first(claims, (name_type, *_NAME_TYPES))
    principal_id = headers.get("x-ms-client-principal-id") or _first(claims, _ID_TYPES)
    if not name and not principal_id:
        return None
    return Principal(
        name=name or principal_id or "",
        id=principal_id or name or "",
        provider=headers.get("x-ms-client-principal-idp") or str(payload.get("auth_typ") or ""),
        roles=roles,
    )


def _first(claims: list[tuple[str, str]], types: tuple[str, ...]) -> str | None:
    for wanted in types:
        for claim_type, value in claims:
            if claim_type == wanted and value:
                return value
    return None
