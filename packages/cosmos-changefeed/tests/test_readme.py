"""The README's first example runs as it is written: its first Python block, unchanged, in a
fresh interpreter, against funcstack's local Cosmos DB endpoint -- with ``COSMOS_ENDPOINT`` and
``COSMOS_KEY`` set as the README says, and the endpoint's certificate trusted (funcstack's local
authority, in the bundle ``REQUESTS_CA_BUNDLE`` names, which azure-core's transport reads): the
block creates its database and containers, starts the processor, writes an order and sees it
handled."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from funcstack.cosmos import CosmosEndpoint

pytestmark = pytest.mark.integration

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCK = re.compile(r"```python[^\n]*\n(?P<source>.*?)```", re.S)


def first_block() -> str:
    found = BLOCK.search(README.read_text(encoding="utf-8"))
    assert found is not None, "the README has no Python block"
    return found["source"]


@pytest.fixture(scope="module")
def trusted() -> Iterator[tuple[CosmosEndpoint, Path]]:
    """funcstack's endpoint, and the bundle that trusts its certificate (funcstack's local
    authority and certifi's)."""
    from funcstack.cosmos import start_cosmos

    with start_cosmos() as endpoint:
        assert endpoint.tls is not None
        yield endpoint, endpoint.tls.bundle_file


def test_the_readmes_first_example_runs_as_written(
    trusted: tuple[CosmosEndpoint, Path], tmp_path: Path
) -> None:
    endpoint, cert = trusted
    script = tmp_path / "first_processor.py"
    script.write_text(first_block(), encoding="utf-8")
    ran = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env={
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(tmp_path),
            "COSMOS_ENDPOINT": endpoint.endpoint,
            "COSMOS_KEY": endpoint.key,
            "REQUESTS_CA_BUNDLE": str(cert),
        },
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert ran.returncode == 0, f"{ran.stdout}\n{ran.stderr}"
    assert "mail for order order-1" in ran.stdout
