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
Service" -- while authentication is enabled on the app. The platform then sets the environment
variable `WEBSITE_AUTH_ENABLED=True` (the Functions host reads the same variable to decide
whether to read this header: azure-functions-host, `EnvironmentSettingNames.EasyAuthEnabled`,
`AuthenticationLevelHandler`). So the headers are believed only when that variable is true;
without it anyone could send them, and no one is signed in. Locally, funcstack's sign-in
stand-in plays the platform's part (packages/funcstack/docs/functions-host.md, "Signing in").

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
    "AUTH_ENABLED_SETTING",
    "OPERATOR_ROLE",
    "PRINCIPAL_HEADER",
    "Principal",
    "principal_of",
    "sign_in_trusted",
]

#: Set to "True" by App Service while its authentication is enabled on the app.
AUTH_ENABLED_SETTING = "WEBSITE_AUTH_ENABLED"
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


def sign_in_trusted(environment: Mapping[str, str] | None = None) -> bool:
    """Whether App Service Authentication is on for this app (`WEBSITE_AUTH_ENABLED`), so that
    its principal headers reach the app only from the platform."""
    value = (os.environ if environment is None else environment).get(AUTH_ENABLED_SETTING, "")
    return value.strip().lower() == "true"


def principal_of(headers: Mapping[str, str]) -> Principal | None:
    """The principal of a request's headers (lower-case names, as the worker hands them), or
    None when there is none or it cannot be read. The caller decides whether to believe it
    (`sign_in_trusted`)."""
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
