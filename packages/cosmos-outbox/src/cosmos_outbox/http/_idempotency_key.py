"""The `Idempotency-Key` request header (IETF httpapi draft "The Idempotency-Key HTTP Header
Field") on the write operations of the route helper: parsed and checked here, turned into an
`IdempotencyKey` (`cosmos_outbox._write.idempotency`) whose record the service writes in the same
batch as the change.

- **The value.** The draft makes the key a Structured Field String: `Idempotency-Key:
  "8e03978e-40d5-43e8-bc93-6894a57f9324"` (quoted; visible ASCII and space inside, `"` and `\\`
  escaped with `\\`). Gateways and client libraries that follow Stripe's older convention send
  it bare (`Idempotency-Key: 8e03978e-...`): a bare value of visible ASCII without `"`, `\\`
  or spaces is accepted too, as the same key (`abc` and `"abc"` are one key). The key is 1-255
  characters; parameters (`"abc";p=1`), an empty value, a list or anything else is a 400.
- **Scope.** A key is unique per route (method and route template: `PATCH contacts/{id}`) and,
  where the platform names the caller, per caller: App Service Authentication (Easy Auth) sets
  `X-MS-CLIENT-PRINCIPAL-IDP` and `-ID` and strips them from what clients send, and they are
  read only where it is believed to (`cosmos_outbox.http.sign_in_trust`: the owner's
  `OUTBOX_CONSOLE_SIGN_IN`, the platform's word, not a local host); elsewhere
  they are anyone's writing and count for nothing (else naming oneself another caller would
  make a used key new). With function keys the app cannot tell callers apart: callers sharing a key
  share key scopes. A change's record lives in the changed aggregate's partition, so on a
  change route a key is also scoped to the aggregate it names.
- **Fingerprint.** SHA-256 of the canonical JSON of the method, the route template, the path
  values and the validated body (the fields sent, after validation: formatting and key order do
  not matter). Headers are not part of it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from pydantic import BaseModel

from cosmos_outbox._domain import Aggregate
from cosmos_outbox._write.idempotency import Answer, IdempotencyKey, fingerprint
from cosmos_outbox.http._call import HttpCall
from cosmos_outbox.http._callers import sign_in_trust
from cosmos_outbox.http._problems import bad_request

A = TypeVar("A", bound="Aggregate")

__all__ = [
    "KEY_HEADER",
    "KEY_MAX_LENGTH",
    "KEY_PATTERN",
    "PRINCIPAL_HEADERS",
    "key_of",
    "parse_key",
]

KEY_HEADER = "Idempotency-Key"
KEY_MAX_LENGTH = 255
#: The header's value: a quoted sf-string of 1-255 characters (visible ASCII and space, `"` and
#: `\` escaped), or the same characters bare (no quotes, backslashes or spaces). One pattern for
#: parsing and for the OpenAPI document (ECMA-262 and Python read it alike).
KEY_PATTERN = (
    r'^(?:"(?:[\x20\x21\x23-\x5B\x5D-\x7E]|\\["\\]){1,255}"'
    r"|[\x21\x23-\x5B\x5D-\x7E]{1,255})$"
)
_KEY = re.compile(KEY_PATTERN)
_ESCAPE = re.compile(r'\\(["\\])')
#: What App Service authentication (Easy Auth) sets to name the caller.
PRINCIPAL_HEADERS = ("x-ms-client-principal-idp", "x-ms-client-principal-id")
_MALFORMED = (
    f"{KEY_HEADER} must be 1-{KEY_MAX_LENGTH} visible ASCII characters, quoted as a "
    "structured-field string or bare (then without quotes, backslashes or spaces)"
)


def parse_key(value: str | None) -> str | None:
    """The key a header value carries (None when the header is absent); 400 (HttpProblemError
    naming the header) when it is malformed."""
    if value is None:
        return None
    value = value.strip(" \t")
    if not _KEY.fullmatch(value):
        raise bad_request(_MALFORMED, KEY_HEADER)
    if value.startswith('"'):
        return _ESCAPE.sub(r"\1", value[1:-1])
    return value


def scope(
    method: str,
    route: str,
    headers: Mapping[str, str],
    environment: Mapping[str, str] | None = None,
) -> str:
    """Where a key is unique: the route, and the caller when a believed platform names one
    (`sign_in_trust` of `environment`, default the process's)."""
    if not sign_in_trust(environment).trusted:
        return f"{method} {route}"
    caller = "/".join(str(headers.get(name) or "") for name in PRINCIPAL_HEADERS)
    return f"{method} {route}" + (f" {caller}" if caller.strip("/") else "")


def request_fingerprint(method: str, route: str, path: Mapping[str, str], body: object) -> str:
    """The fingerprint of a request (see the module's docstring)."""
    data = (
        body.model_dump(mode="json", by_alias=True, exclude_unset=True)
        if isinstance(body, BaseModel)
        else None
    )
    return fingerprint({"method": method, "route": route, "path": dict(path), "body": data})


def key_of(call: HttpCall[Any], answer: Callable[[A], Answer]) -> IdempotencyKey[A] | None:
    """The Idempotency-Key of an `HttpCall` that carries one (None without one)."""
    key = call.idempotency_key
    if key is None:
        return None
    operation = call.operation
    return IdempotencyKey(
        scope=scope(operation.method, operation.route, call.request.headers),
        value=key,
        fingerprint=request_fingerprint(operation.method, operation.route, call.path, call.body),
        answer=answer,
        request=f"{operation.method} {operation.route}",
    )
