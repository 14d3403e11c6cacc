"""A tiny keep-alive JSON client over http.client for this app's API (tests, benchmarks): over
HTTP (the local hosts) or HTTPS (a deployed app, verified with the process's trust store), with
headers sent on every request (a deployed app's function key)."""

from __future__ import annotations

import http.client
import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())


class Client:
    def __init__(
        self, base_url: str, *, timeout: float = 30.0, headers: dict[str, str] | None = None
    ) -> None:
        parts = urlsplit(base_url)
        self.prefix = parts.path.rstrip("/")
        self._https = parts.scheme == "https"
        self._host = parts.hostname or "127.0.0.1"
        self._port = parts.port or (443 if self._https else 80)
        self._timeout = timeout
        self._headers = dict(headers or {})
        self._conn: http.client.HTTPConnection | None = None

    def request(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        raw: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> Reply:
        hdrs = {**self._headers, **(headers or {})}
        body = raw
        if json_body is not None:
            body = json.dumps(json_body).encode()
            hdrs.setdefault("content-type", "application/json")
        for attempt in range(2):
            if self._conn is None:
                connection = (
                    http.client.HTTPSConnection if self._https else http.client.HTTPConnection
                )
                self._conn = connection(self._host, self._port, timeout=self._timeout)
            try:
                self._conn.request(method, self.prefix + path, body=body, headers=hdrs)
                response = self._conn.getresponse()
                data = response.read()
            except (ConnectionError, http.client.HTTPException):
                self.close()
                if attempt:
                    raise
                continue
            return Reply(response.status, {k.lower(): v for k, v in response.getheaders()}, data)
        raise AssertionError("unreachable")

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
