"""The local stack, started by the tests on free ports and always stopped."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tools.httpclient import Client
from tools.stack import Ports, Stack


@pytest.fixture(scope="session")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with Stack(workdir=Path(tmp_path_factory.mktemp("stack")), ports=Ports.free(),
               settings_overrides={"FEED_POLL_DELAY_MS": "100"}) as s:
        yield s


@pytest.fixture
def client(stack: Stack) -> Iterator[Client]:
    c = Client(stack.api_url)
    try:
        yield c
    finally:
        c.close()
