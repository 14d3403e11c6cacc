"""The projection over HTTP, the subscriber's own small HTTP code (it imports nothing of the
contacts app):

- `GET projections/contacts/{id}`: 200 with the projection (`id`, `version`, `lastEventId`,
  `deleted`, `data`); 404 when there is none;
- `GET projections/contacts?pageSize=N` (1..100, default 10): 200 `{items, continuationToken,
  hasMore}`; the next page with `continuationToken` (query) or `x-continuation-token` (header),
  the token also in the `X-Continuation-Token` response header.

Errors are RFC 9457 problem documents: 400 for bad input (an id that is not one, a bad page
size or token, an unknown query parameter; only `code`, the function key, is let through), 404,
429/503 with Retry-After when the store throttles or fails. Never a traceback, never a 5xx for
what a client sends. Tokens are sealed (HMAC): the store sees only tokens this app issued.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import logging
import math
import re
from collections.abc import Callable, Mapping
from typing import Any

import azure.functions as func

from contacts_projection.reads import ProjectionReads, StoreError

# The page sizes and the function key's query parameter (`code`: the platform reads it, the app
# ignores it) are cosmos-outbox's, as for every route of the Contacts app.
from cosmos_outbox.http._declaration import DEFAULT_PAGE_SIZE, KEY_PARAMETER, MAX_PAGE_SIZE

logger = logging.getLogger(__name__)

PROBLEM_JSON = "application/problem+json"
#: A contact id (the contacts app's identifiers).
CONTACT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_PAGE_SIZE = re.compile(r"[0-9]{1,3}")
_TOKEN_VERSION = "t1"  # noqa: S105  (a format's name, not a secret)
MAX_TOKEN_LENGTH = 8192
_TOKEN = re.compile(
    rf"{_TOKEN_VERSION}\.[A-Za-z0-9_-]{{1,{MAX_TOKEN_LENGTH}}}\.[A-Za-z0-9_-]{{22}}")
_TITLES = {400: "Bad Request", 404: "Not Found", 429: "Too Many Requests",
           500: "Internal Server Error", 503: "Service Unavailable"}


class ProblemError(Exception):
    """An RFC 9457 problem document to answer with."""

    def __init__(self, status: int, detail: str, *, field: str | None = None,
                 headers: Mapping[str, str] | None = None) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.field = field
        self.headers = dict(headers or {})

    def response(self) -> func.HttpResponse:
        document: dict[str, Any] = {"type": "about:blank", "title": _TITLES[self.status],
                                    "status": self.status, "detail": self.detail}
        if self.field is not None:
            document["errors"] = [{"field": self.field, "message": self.detail}]
        # json.dumps escapes every non-ASCII character: whatever a client sent serialises
        return func.HttpResponse(json.dumps(document, separators=(",", ":")),
                                 status_code=self.status, headers=self.headers,
                                 mimetype=PROBLEM_JSON)


class Tokens:
    """Seals the store's continuation tokens: `t1.<base64url(store token)>.<HMAC-SHA256/128>`.
    Anything else (garbage, edits, another key) is refused before the store sees it."""

    def __init__(self, key: bytes) -> None:
        self._key = key

    @classmethod
    def from_secret(cls, secret: str) -> Tokens:
        purpose = b"contacts-projection/continuation-token/v1"
        return cls(hmac.new(secret.encode("utf-8"), purpose, hashlib.sha256).digest())

    def _mac(self, payload: str) -> str:
        digest = hmac.new(self._key, f"{_TOKEN_VERSION}.{payload}".encode("ascii"),
                          hashlib.sha256).digest()[:16]
        return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")

    def seal(self, store_token: str) -> str:
        payload = base64.urlsafe_b64encode(store_token.encode("utf-8")).rstrip(b"=")
        text = payload.decode("ascii")
        return f"{_TOKEN_VERSION}.{text}.{self._mac(text)}"

    def open(self, token: str) -> str:
        invalid = ProblemError(400, "the continuation token is not valid: pass back a "
                                    "continuationToken this API returned, unchanged",
                               field="continuationToken")
        if len(token) > MAX_TOKEN_LENGTH + 40 or not _TOKEN.fullmatch(token):
            raise invalid
        _, payload, mac = token.split(".")
        if not hmac.compare_digest(mac, self._mac(payload)):
            raise invalid
        try:
            store_token = base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))
            return store_token.decode("utf-8")
        except (ValueError, binascii.Error):
            raise invalid from None


def _answer(work: Callable[[], func.HttpResponse]) -> func.HttpResponse:
    """The boundary: problems as documents, the store's failures as 429/503, anything else a
    bare 500 (logged, never shown)."""
    try:
        return work()
    except ProblemError as problem:
        return problem.response()
    except StoreError as exc:
        if exc.status == 400:
            return ProblemError(400, "the continuation token is not valid any more: start "
                                     "again without one", field="continuationToken").response()
        retry = str(max(1, math.ceil(exc.retry_after)))
        detail = "the store is busy or unavailable; retry later"
        return ProblemError(exc.status, detail, headers={"Retry-After": retry}).response()
    except Exception:
        logger.exception("projection read failed")
        return ProblemError(500, "an unexpected error occurred").response()


def _only(req: func.HttpRequest, allowed: set[str]) -> None:
    for name in req.params:
        if name not in allowed | {KEY_PARAMETER}:
            raise ProblemError(400, f"unknown query parameter {json.dumps(name)}", field=name)


def _json(body: Any, headers: Mapping[str, str] | None = None) -> func.HttpResponse:
    return func.HttpResponse(json.dumps(body, separators=(",", ":")), status_code=200,
                             headers=dict(headers or {}), mimetype="application/json")


def read_projection(req: func.HttpRequest, reads: ProjectionReads) -> func.HttpResponse:
    """GET projections/contacts/{id}."""

    def work() -> func.HttpResponse:
        _only(req, set())
        contact_id = str(req.route_params.get("id", ""))
        if not CONTACT_ID.fullmatch(contact_id):
            raise ProblemError(400, "the contact id must be 1-128 letters, digits, '.', '_' or "
                                    "'-', starting with a letter or digit", field="id")
        found = reads.get(contact_id)
        if found is None:
            raise ProblemError(404, "no projection of this contact (unknown, or its first event "
                                    "has not been applied yet)")
        return _json(found)

    return _answer(work)


def list_projections(req: func.HttpRequest, reads: ProjectionReads,
                     tokens: Tokens) -> func.HttpResponse:
    """GET projections/contacts?pageSize=N[&continuationToken=T]."""

    def work() -> func.HttpResponse:
        _only(req, {"pageSize", "continuationToken"})
        size = DEFAULT_PAGE_SIZE
        raw = req.params.get("pageSize")
        if raw is not None:
            if not _PAGE_SIZE.fullmatch(raw) or not 1 <= int(raw) <= MAX_PAGE_SIZE:
                raise ProblemError(400, f"pageSize must be an integer 1..{MAX_PAGE_SIZE}",
                                   field="pageSize")
            size = int(raw)
        query = req.params.get("continuationToken")
        header = req.headers.get("x-continuation-token")
        if query is not None and header is not None and query != header:
            raise ProblemError(400, "continuationToken and x-continuation-token differ; "
                                    "send one", field="continuationToken")
        token = query if query is not None else header
        continuation = tokens.open(token) if token is not None else None
        page = reads.page(size=size, continuation=continuation)
        # a store token that comes back unchanged ends the listing: no token loops
        more = page.continuation is not None and page.continuation != continuation
        sealed = tokens.seal(page.continuation) if more and page.continuation else None
        return _json({"items": page.items, "continuationToken": sealed, "hasMore": more},
                     {"X-Continuation-Token": sealed} if sealed else None)

    return _answer(work)
