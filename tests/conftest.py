"""Settings and fixtures of every test under tests/ (the Contacts app's, the subscriber's, the
deploy templates', the tooling's, the repository's). `stack`: the Contacts app's whole local
stack (tools/stack.py on funcstack), started once per test session on free ports, with the
app's default settings, always stopped; `client`: an HTTP client of its API."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from hypothesis import settings

from funcstack.cosmos import local_tls

if TYPE_CHECKING:
    from funcstack.cosmos import CosmosEndpoint
    from tools.httpclient import Client
    from tools.stack import Stack

# funcstack's local authority trusted here as its hosts trust it (SSL_CERT_FILE,
# REQUESTS_CA_BUNDLE; funcstack's docs/cosmos.md, Certificate), before a test module imports an
# SDK: the app's code composed in a test verifies the local Cosmos DB endpoint unchanged.
os.environ.update(local_tls().environment())

# No deadline on generated examples: a per-example time limit is a timed assertion, and under
# `make test`'s parallel jobs an example may wait for a core (speed lives in `make bench`).
settings.register_profile("suite", deadline=None)
settings.load_profile("suite")


@pytest.fixture(scope="session")
def shared_cosmos(tmp_path_factory: pytest.TempPathFactory) -> Iterator[CosmosEndpoint]:
    """One Cosmos DB endpoint for the test process's Contacts stacks that neither stop, freeze
    nor fault it (the session's and most modules'): each makes a database of its own on it and
    drops it when it stops (tools/stack.py, funcstack's `LocalStack(shared_cosmos=...)`)."""
    from funcstack.cosmos import start_cosmos
    from funcstack.services import free_port

    log = Path(tmp_path_factory.mktemp("shared-cosmos")) / "cosmos.log"
    with start_cosmos(port=free_port(), log_path=log) as endpoint:
        yield endpoint


@pytest.fixture(scope="session")
def stack(
    tmp_path_factory: pytest.TempPathFactory, shared_cosmos: CosmosEndpoint
) -> Iterator[Stack]:
    from tools.stack import Ports, Stack

    # The app's own feed poll delay (1 s), not the 100 ms of the stacks whose tests wait for
    # the relay: no test of this stack does (they have their module's stack or one of their
    # own), and it lives through a worker's whole run, polling each lease: idle, the host and
    # the Cosmos DB endpoint took 4.4 % of a core at 100 ms, 1 % at 1 s (docs/testing.md).
    with Stack(
        workdir=Path(tmp_path_factory.mktemp("stack")),
        ports=Ports.free(),
        shared_cosmos=shared_cosmos,
    ) as s:
        yield s


@pytest.fixture
def client(stack: Stack) -> Iterator[Client]:
    from tools.httpclient import Client

    c = Client(stack.api_url)
    try:
        yield c
    finally:
        c.close()
