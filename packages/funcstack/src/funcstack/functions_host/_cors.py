"""CORS as `func start` applies it: the `Host` section of local.settings.json,

```json
"Host": {"CORS": "http://localhost:3000,https://app.example.com", "CORSCredentials": true}
```

becomes ASP.NET Core's CORS middleware in front of the host, with the policy Core Tools builds
(`WithOrigins(CORS.Split(','))`, `AllowAnyHeader`, `AllowAnyMethod`, `AllowCredentials` when
`CORSCredentials`):

* a request without `Origin` passes untouched;
* a preflight (`OPTIONS` with `Origin` and `Access-Control-Request-Method`) is answered by the
  host, **204**, whatever the route; for an allowed origin with `Access-Control-Allow-Origin`
  (the origin, or `*` when `CORS` is `*`), `Access-Control-Allow-Methods` (the requested
  method), `Access-Control-Allow-Headers` (the requested headers, if any) and
  `Access-Control-Allow-Credentials: true` with `CORSCredentials`; no `Access-Control-Max-Age`
  (the policy sets none); for another origin with no `Access-Control-*` header at all;
* any other request from an allowed origin gets `Access-Control-Allow-Origin` (and
  `-Credentials`) on its answer, whatever its status;
* `Vary: Origin` when the list has more than one origin (ASP.NET Core's rule);
* origins are compared exactly (ordinal) with the list lower-cased; the list is split on commas
  with no trimming ("with no spaces", as `func start --cors` says); `*` with credentials is
  refused at start, as ASP.NET Core refuses that policy.

An empty or absent `CORS` means no CORS handling at all (`func start`'s default).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

from funcstack.functions_host._config import SettingError

ANY_ORIGIN = "*"


@dataclass(frozen=True)
class CorsPolicy:
    origins: tuple[str, ...]
    credentials: bool = False

    def __post_init__(self) -> None:
        if self.any_origin and self.credentials:
            raise SettingError(
                "Host.CORS '*' with Host.CORSCredentials true: the CORS protocol does not "
                "allow a wildcard origin with credentials; list the origins instead"
            )

    @property
    def any_origin(self) -> bool:
        return ANY_ORIGIN in self.origins

    @classmethod
    def parse(cls, origins: str, credentials: bool = False) -> CorsPolicy | None:
        """Core Tools' reading of `Host.CORS`: None when empty (no CORS)."""
        if not origins:
            return None
        listed = tuple(o.lower() for o in origins.split(",") if o)
        return cls(listed, credentials) if listed else None

    def allows(self, origin: str) -> bool:
        return bool(origin) and (self.any_origin or origin in self.origins)

    def _common(self, origin: str) -> dict[str, str]:
        headers = {"Access-Control-Allow-Origin": ANY_ORIGIN if self.any_origin else origin}
        if self.credentials:
            headers["Access-Control-Allow-Credentials"] = "true"
        return headers

    def preflight(self, request: web.BaseRequest) -> web.Response:
        """The host's answer to a preflight request."""
        response = web.Response(status=204)
        origin = request.headers.get("Origin", "")
        if not self.allows(origin):
            return response
        headers = self._common(origin)
        requested = [
            h.strip()
            for v in request.headers.getall("Access-Control-Request-Headers", [])
            for h in v.split(",")
            if h.strip()
        ]
        if requested:
            headers["Access-Control-Allow-Headers"] = ",".join(requested)
        method = request.headers.get("Access-Control-Request-Method", "")
        if method:
            headers["Access-Control-Allow-Methods"] = method
        response.headers.update(headers)
        self._vary(response)
        return response

    def apply(self, request: web.BaseRequest, response: web.StreamResponse) -> None:
        """Headers on the answer to an actual (not preflight) request."""
        origin = request.headers.get("Origin", "")
        if not self.allows(origin):
            return
        response.headers.update(self._common(origin))
        self._vary(response)

    def _vary(self, response: web.StreamResponse) -> None:
        if len(self.origins) > 1 or (self.any_origin and self.credentials):
            response.headers.add("Vary", "Origin")


def is_preflight(request: web.BaseRequest) -> bool:
    return (
        request.method.upper() == "OPTIONS"
        and "Origin" in request.headers
        and "Access-Control-Request-Method" in request.headers
    )


def load_cors(path: Path | None) -> CorsPolicy | None:
    """The policy from the `Host` section of a local.settings.json file, if any."""
    if path is None or not path.is_file():
        return None
    data = json.loads(path.read_text(encoding="utf-8-sig"))
    host = data.get("Host") if isinstance(data, dict) else None
    if not isinstance(host, dict):
        return None
    origins = host.get("CORS") or ""
    credentials = host.get("CORSCredentials", False)
    if not isinstance(origins, str):
        raise SettingError(f"'Host.CORS' in {path} is not a string of comma-separated origins")
    if isinstance(credentials, str):
        credentials = credentials.strip().lower() == "true"
    return CorsPolicy.parse(origins, bool(credentials))
