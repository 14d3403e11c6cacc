"""The signed-in operator, as App Service Authentication ("Easy Auth") names them in front of the
Functions host: `X-MS-CLIENT-PRINCIPAL`, the claims as Base64-encoded JSON (`{"auth_typ",
"claims": [{"typ", "val"}], "name_typ", "role_typ"}`: an app role is a claim of type
`role_typ`, "roles" for Entra ID), and `X-MS-CLIENT-PRINCIPAL-ID` / `-NAME` / `-IDP` (Microsoft
Learn, "Work with user identities in Azure App Service authentication"). Whether they are
believed is the core's rule (`cosmos_outbox.http.sign_in_trust`), and when a bearer token needs
no page token is `bearer_validated`'s: docs/operating-the-outbox.md, "Who may act". The host
never grants an auth level to such a principal (`AuthUtility.PrincipalHasAuthLevelClaim` counts
the key's claim only), so the check is this package's (`doors.admit_signed_in`)."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from dataclasses import dataclass

from cosmos_outbox.http import SignInTrust, sign_in_trust

__all__ = [
    "OPERATOR_ROLE",
    "PRINCIPAL_HEADER",
    "Principal",
    "SignInTrust",
    "bearer_validated",
    "principal_of",
    "sign_in_trust",
    "sign_in_trusted",
]

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


def sign_in_trusted(environment: Mapping[str, str] | None = None) -> bool:
    """Whether a principal header is believed here (`sign_in_trust`)."""
    return sign_in_trust(environment).trusted


def bearer_validated(headers: Mapping[str, str], trust: SignInTrust) -> bool:
    """Whether the request's `Authorization: Bearer` token was validated by App Service
    Authentication: it is believed here (in Azure), and no session cookie came with the request,
    so the principal it set can only be the token's (module docstring)."""
    if not trust.by_app_service:
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
