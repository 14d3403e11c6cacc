"""The API's own continuation tokens. A token wraps the store's continuation and the page
number, and is sealed with an HMAC: anything the API did not issue (garbage, edits, truncation,
another key) is refused before the store sees it.

Format: ``p1.<base64url(JSON {"s": store token, "n": page number})>.<base64url(HMAC-SHA256[:16])>``
without padding. Opaque to clients; the format may change with the version prefix.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
from dataclasses import dataclass

from cosmos_outbox.errors import InvalidContinuationError

VERSION = "p1"
#: Tokens longer than this were not issued by the API.
MAX_TOKEN_LENGTH = 8192
#: The token grammar (also the OpenAPI pattern of the parameter and header).
TOKEN_PATTERN = rf"^{VERSION}\.[A-Za-z0-9_-]{{1,{MAX_TOKEN_LENGTH}}}\.[A-Za-z0-9_-]{{22}}$"
_TOKEN = re.compile(TOKEN_PATTERN)
_MAC_BYTES = 16


@dataclass(frozen=True)
class Cursor:
    store_token: str
    page: int


def _b64encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _b64decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class TokenCodec:
    """Seals and opens continuation tokens with one key (keep it the same on every instance)."""

    def __init__(self, key: bytes) -> None:
        if len(key) < 16:
            raise ValueError("the token key must be at least 16 bytes")
        self._key = key

    def _mac(self, payload: str) -> str:
        digest = hmac.new(self._key, f"{VERSION}.{payload}".encode("ascii"), hashlib.sha256)
        return _b64encode(digest.digest()[:_MAC_BYTES])

    def encode(self, cursor: Cursor) -> str:
        body = json.dumps({"s": cursor.store_token, "n": cursor.page}, separators=(",", ":"))
        payload = _b64encode(body.encode("utf-8"))
        return f"{VERSION}.{payload}.{self._mac(payload)}"

    def decode(self, token: str) -> Cursor:
        """The cursor of a token this codec issued; InvalidContinuationError for anything else."""
        if len(token) > MAX_TOKEN_LENGTH or not _TOKEN.fullmatch(token):
            raise InvalidContinuationError("not a continuation token of this API")
        _, payload, mac = token.split(".")
        if not hmac.compare_digest(mac, self._mac(payload)):
            raise InvalidContinuationError("the continuation token was not issued by this API")
        try:
            data = json.loads(_b64decode(payload))
        except (ValueError, binascii.Error):
            raise InvalidContinuationError("the continuation token is damaged") from None
        if (
            not isinstance(data, dict)
            or set(data) != {"s", "n"}
            or not isinstance(data["s"], str)
            or not data["s"]
            or type(data["n"]) is not int
            or data["n"] < 1
        ):
            raise InvalidContinuationError("the continuation token is damaged")
        return Cursor(store_token=data["s"], page=data["n"])


def derive_key(secret: str, *, purpose: str) -> bytes:
    """A key for one purpose derived from a configured secret (never the secret itself)."""
    return hmac.new(secret.encode("utf-8"), purpose.encode("ascii"), hashlib.sha256).digest()


def next_token(store_token: str | None, cursor: Cursor | None, tokens: TokenCodec) -> str | None:
    """The API's token of the next page: the store's next token sealed in the API's own. A store
    token that does not move (the same one back) ends the listing, so no token can loop."""
    if store_token is None or (cursor is not None and store_token == cursor.store_token):
        return None
    number = (cursor.page if cursor else 0) + 1
    return tokens.encode(Cursor(store_token=store_token, page=number))
