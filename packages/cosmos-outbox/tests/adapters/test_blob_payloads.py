"""The Blob Storage payload stores, sync and `aio`, built by their public factories, against a
local HTTP endpoint that answers as Blob Storage does for one present and one missing blob: both
read the payload, and both translate a missing one (`PayloadNotFoundError`). The `aio` store's
client needs the SDK's `aio` retry policy: with the sync one, every request failed with an
AttributeError, which no caller translates (a subscriber's claim-check message was dead-lettered
without its reason logged)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from cosmos_outbox.blob import BlobPayloadStore
from cosmos_outbox.blob.aio import BlobPayloadStore as AsyncBlobPayloadStore
from cosmos_outbox.errors import PayloadNotFoundError

BODY = b'{"id":"e1","version":2}'
#: Azurite's well-known development account (public, not a secret).
ACCOUNT_KEY = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)


class _Blobs(BaseHTTPRequestHandler):
    """`.../present` is a block blob holding BODY; anything else is not found."""

    def do_GET(self) -> None:
        if self.path.split("?", 1)[0].endswith("/present"):
            self.send_response(200)
            for name, value in {
                "Content-Length": str(len(BODY)),
                "Content-Type": "application/json",
                "Content-Range": f"bytes 0-{len(BODY) - 1}/{len(BODY)}",
                "x-ms-blob-type": "BlockBlob",
                "ETag": '"0x1"',
                "Last-Modified": "Mon, 23 Nov 2026 00:00:00 GMT",
            }.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(BODY)
            return
        self.send_response(404)
        self.send_header("x-ms-error-code", "BlobNotFound")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def connection_string() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Blobs)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield (
            f"DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;"
            f"AccountKey={ACCOUNT_KEY};"
            f"BlobEndpoint=http://127.0.0.1:{server.server_address[1]}/devstoreaccount1;"
        )
    finally:
        server.shutdown()
        server.server_close()


def test_the_sync_store_reads_a_payload_and_translates_a_missing_one(
    connection_string: str,
) -> None:
    store = BlobPayloadStore.from_connection_string(connection_string, "outbox-payloads")
    assert store.get(store.reference("contact/c1/present")) == BODY
    with pytest.raises(PayloadNotFoundError):
        store.get(store.reference("contact/c1/missing"))


def test_the_aio_store_reads_a_payload_and_translates_a_missing_one(
    connection_string: str,
) -> None:
    async def read() -> None:
        store = AsyncBlobPayloadStore.from_connection_string(connection_string, "outbox-payloads")
        assert await store.get(store.reference("contact/c1/present")) == BODY
        with pytest.raises(PayloadNotFoundError):
            await store.get(store.reference("contact/c1/missing"))

    asyncio.run(read())
