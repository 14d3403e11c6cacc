"""A missing extra is named when it is needed: the async API without aiohttp (the `aio` extra)
says which extra to install, at the first client it makes, not deep in the SDK's first request."""

from __future__ import annotations

import sys

import pytest

from cosmos_outbox.cosmos._client import async_cosmos_client


def test_the_async_client_without_aiohttp_names_the_aio_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "aiohttp", None)  # `import aiohttp` raises ImportError
    with pytest.raises(ImportError, match=r'pip install "cosmos-outbox\[aio\]"') as raised:
        async_cosmos_client(
            connection_string="AccountEndpoint=https://127.0.0.1:9/;AccountKey=a2V5;"
        )
    assert raised.value.name == "aiohttp"
