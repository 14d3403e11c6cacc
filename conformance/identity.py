"""A local managed-identity token endpoint for the SDKs' Azure AD samples.

It answers as App Service's (and Azure Functions') managed identity endpoint does: the client
finds it through ``IDENTITY_ENDPOINT`` and ``IDENTITY_HEADER``, sends
``GET <endpoint>?api-version=2019-08-01&resource=<scope>`` with the header
``X-IDENTITY-HEADER: <secret>``, and gets ``{"access_token", "expires_on", "resource",
"token_type"}``. ``DefaultAzureCredential`` and ``ManagedIdentityCredential`` (azure-identity,
through msal) then hand that token to the SDK, which sends it as it would in Azure. The local
endpoints do not check tokens; the token is a well-formed but unsigned JWT naming the resource.
"""

from __future__ import annotations

import base64
import json
import secrets
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from funcstack.deadlines import LOOPBACK

TOKEN_LIFETIME_S = 3600


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def unsigned_jwt(resource: str, now: int, lifetime: int = TOKEN_LIFETIME_S) -> str:
    """A JWT shaped like Entra ID's (``alg: none``): the endpoints read nothing from it."""
    header = {"alg": "none", "typ": "JWT"}
    claims = {
        "aud": resource,
        "iss": "https://localhost/conformance-identity/",
        "iat": now,
        "nbf": now,
        "exp": now + lifetime,
        "sub": "conformance-samples",
    }
    return ".".join(
        [_b64url(json.dumps(header).encode()), _b64url(json.dumps(claims).encode()), ""]
    )


@dataclass
class IdentityEndpoint:
    """A running token endpoint: the environment a managed identity client reads."""

    server: ThreadingHTTPServer
    thread: threading.Thread
    secret: str
    requests: list[str]

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}/msi/token"

    @property
    def environment(self) -> dict[str, str]:
        return {"IDENTITY_ENDPOINT": self.url, "IDENTITY_HEADER": self.secret}

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=LOOPBACK)  # shut down: its loop ends at its next poll


def start_identity_endpoint() -> IdentityEndpoint:
    secret = secrets.token_hex(16)
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            url = urlsplit(self.path)
            query = parse_qs(url.query)
            resource = (query.get("resource") or [""])[0]
            if self.headers.get("X-IDENTITY-HEADER") != secret:
                # as App Service: a request without the header's secret is refused
                self._reply(401, {"statusCode": 401, "message": "missing X-IDENTITY-HEADER"})
                return
            if url.path != "/msi/token" or not resource:
                self._reply(400, {"statusCode": 400, "message": "resource is required"})
                return
            seen.append(resource)
            now = int(time.time())
            self._reply(
                200,
                {
                    "access_token": unsigned_jwt(resource, now),
                    "expires_on": str(now + TOKEN_LIFETIME_S),
                    "resource": resource,
                    "token_type": "Bearer",
                    "client_id": "00000000-0000-0000-0000-000000000000",
                },
            )

        def _reply(self, status: int, body: dict[str, object]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, name="identity-endpoint", daemon=True)
    thread.start()
    return IdentityEndpoint(server=server, thread=thread, secret=secret, requests=seen)
