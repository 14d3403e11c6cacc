"""Function keys, enforced as the Functions host does (opt-in: ``func start`` does not).

As the host (``AuthenticationLevelHandler``, ``SecretManager.GetAuthorizationLevelAsync``,
``AuthUtility.PrincipalHasAuthLevelClaim``, ``FunctionInvocationMiddleware``):

* the key is read from the ``x-functions-key`` header, else the ``code`` query parameter (the
  header takes precedence when present, even with a wrong or empty value; the first value of
  either);
* the master key grants every level; the host's default function key (``functionKeys.default``,
  the key ``az functionapp keys list`` shows) grants ``function``; ``anonymous`` needs nothing;
  ``admin`` (and ``system``/``user``, which need keys or identities funcstack does not issue)
  only the master key; a trigger without ``authLevel`` is ``function`` (the attribute's
  default);
* a request without a key that grants its function's level is answered **401 with an empty
  body** (``UnauthorizedResult``), after routing (an unknown route stays 404) and before the
  body is read;
* keys are compared in constant time; nothing is stripped: ``code`` stays in the URL and the
  query the function sees, and the header in its headers.

Keys: the local-only app settings ``FUNCTIONS_HOST_FUNCTION_KEY`` and ``FUNCTIONS_HOST_MASTER_KEY``
when set (stable keys across runs), else new random ones at each start. They are not passed to
the worker (in Azure the app's environment holds no keys).
"""

from __future__ import annotations

import hmac
import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field

from aiohttp import web

__all__ = [
    "FUNCTION_KEY_SETTING",
    "KEY_HEADER",
    "KEY_QUERY",
    "MASTER_KEY_SETTING",
    "HostKeys",
]

#: Local-only app setting: the host's default function key (``functionKeys.default``).
FUNCTION_KEY_SETTING = "FUNCTIONS_HOST_FUNCTION_KEY"
#: Local-only app setting: the host's master key (``masterKey``).
MASTER_KEY_SETTING = "FUNCTIONS_HOST_MASTER_KEY"
KEY_HEADER = "x-functions-key"
KEY_QUERY = "code"


def _new_key() -> str:
    # 40 random bytes, URL-safe (so ``?code=`` needs no escaping): 54 characters
    return secrets.token_urlsafe(40)


def _same(given: str, expected: str) -> bool:
    return hmac.compare_digest(given.encode("utf-8", "surrogateescape"), expected.encode())


@dataclass(frozen=True)
class HostKeys:
    """The default function key and the master key of one host."""

    function_key: str = field(repr=False)
    master_key: str = field(repr=False)

    @classmethod
    def from_settings(cls, settings: Mapping[str, str] | None = None) -> HostKeys:
        """The keys the settings (default: the environment) give, else new random ones."""
        source = os.environ if settings is None else settings
        return cls(
            function_key=source.get(FUNCTION_KEY_SETTING) or _new_key(),
            master_key=source.get(MASTER_KEY_SETTING) or _new_key(),
        )

    def authorizes(self, auth_level: object, request: web.BaseRequest) -> bool:
        """Whether ``request`` may invoke a function of ``auth_level`` (the trigger's
        ``authLevel``)."""
        level = str(auth_level or "function").strip().lower()
        if level == "anonymous":
            return True
        if KEY_HEADER in request.headers:
            given = request.headers.getone(KEY_HEADER)
        elif KEY_QUERY in request.query:
            given = request.query.getone(KEY_QUERY)
        else:
            return False
        if not given:
            return False
        if _same(given, self.master_key):
            return True
        return level == "function" and _same(given, self.function_key)
