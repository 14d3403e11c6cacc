"""The operators' routes over HTTP (urllib): one call, its JSON answer, and one line saying what
happened when what answered is not the app (connection refused, unknown host, timeout, TLS,
a gateway's HTML page, anything that is not JSON, 401/403). The admin key travels in the
`x-functions-key` header, never in a URL, and is never printed."""

from __future__ import annotations

import getpass
import http.client
import json
import socket
import ssl
import sys
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

__all__ = ["DEFAULT_API", "DEFAULT_TIMEOUT", "KEY_VARIABLE", "OperatorsApi", "OperatorsApiError"]

DEFAULT_API = "http://127.0.0.1:7071/api"
DEFAULT_TIMEOUT = 60.0
#: The environment variable the admin key is read from (never an argument: it would show in
#: the shell's history and the process list).
KEY_VARIABLE = "COSMOS_OUTBOX_KEY"


class OperatorsApiError(Exception):
    """The app could not be reached, or what answered was not the app's API: one line."""


def _why(reason: object) -> str:
    """A short cause for a failed connection."""
    if isinstance(reason, ssl.SSLCertVerificationError):
        return f"TLS certificate not accepted ({reason.verify_message})"
    if isinstance(reason, ssl.SSLError):
        return f"TLS failed ({reason.reason or reason})"
    if isinstance(reason, socket.gaierror):
        return "the host name does not resolve"
    if isinstance(reason, ConnectionRefusedError):
        return "connection refused (is the app running? is the URL right?)"
    if isinstance(reason, OSError):
        return reason.strerror or type(reason).__name__
    return str(reason)


class OperatorsApi:
    """The operators' routes of one app (`base`: its API's base URL, `.../api`), with the admin
    key (`key`; None: none sent, as locally). `ask_key`: when the app answers 401 or 403 and
    the terminal is interactive, the key is asked for once (not echoed) and the call made
    again."""

    def __init__(
        self,
        base: str,
        key: str | None,
        timeout: float = DEFAULT_TIMEOUT,
        *,
        prefix: str = "outbox",
        ask_key: bool = False,
    ) -> None:
        self.base = base.rstrip("/")
        self.key = key or None
        self.timeout = timeout
        self.prefix = prefix.strip("/")
        self._ask = ask_key
        scheme = urllib.parse.urlsplit(self.base).scheme
        if scheme not in {"http", "https"}:
            raise OperatorsApiError(
                f"--api must be an http(s) URL such as {DEFAULT_API}, not {self.base!r}"
            )

    def route(self, path: str, **query: Any) -> str:
        """`/<prefix>/<path>?<query>` (None values left out)."""
        given = {k: str(v) for k, v in query.items() if v is not None}
        return f"/{self.prefix}/{path.lstrip('/')}" + (
            f"?{urllib.parse.urlencode(given)}" if given else ""
        )

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """The app's status and JSON answer (None when it has no body)."""
        try:
            return self._call(method, path, body)
        except _UnauthorisedError as refused:
            if self._ask and sys.stdin.isatty():
                self.key = getpass.getpass(
                    f"{refused.status}: the app's admin key (the host's master key): "
                )
                try:
                    return self._call(method, path, body)
                except _UnauthorisedError as again:
                    raise OperatorsApiError(again.line) from None
            raise OperatorsApiError(refused.line) from None

    def _call(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        url = f"{self.base}{path}"
        where = f"{method} {url.split('?')[0]}"
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(url, data=data, method=method)  # noqa: S310
        request.add_header("accept", "application/json")
        if data is not None:
            request.add_header("content-type", "application/json")
        if self.key:
            request.add_header("x-functions-key", self.key)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:  # noqa: S310
                status, ctype, raw = (
                    response.status,
                    response.headers.get_content_type(),
                    response.read(),
                )
        except urllib.error.HTTPError as error:
            status, ctype = error.code, error.headers.get_content_type()
            try:
                raw = error.read()
            except (OSError, http.client.HTTPException):
                raw = b""
        except urllib.error.URLError as error:
            if isinstance(error.reason, TimeoutError):
                raise OperatorsApiError(f"{where}: no answer within {self.timeout:g} s") from None
            raise OperatorsApiError(f"{where}: {_why(error.reason)}") from None
        except TimeoutError:
            raise OperatorsApiError(f"{where}: no answer within {self.timeout:g} s") from None
        except (OSError, http.client.HTTPException) as error:
            raise OperatorsApiError(f"{where}: the connection failed ({_why(error)})") from None
        if status in {401, 403}:
            hint = (
                f"set {KEY_VARIABLE} to the app's admin key (the host's master key)"
                if not self.key
                else "the key was refused: the operators' routes need the host's master key"
            )
            raise _UnauthorisedError(
                status, f"{where}: {status} {http.client.responses.get(status, '')}; {hint}"
            )
        if not raw:
            return status, None
        try:
            return status, json.loads(raw)
        except ValueError:
            kind = "an HTML page" if ctype == "text/html" else f"not JSON ({ctype})"
            raise OperatorsApiError(
                f"{where}: {status} {http.client.responses.get(status, '')}, and the answer is "
                f"{kind}: not the app's API (a gateway or proxy? is the URL right, with /api?)"
            ) from None


class _UnauthorisedError(Exception):
    def __init__(self, status: int, line: str) -> None:
        super().__init__(line)
        self.status = status
        self.line = line
