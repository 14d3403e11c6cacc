from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tools.stack import Ports, Stack


@pytest.fixture
def fresh_stack(tmp_path: Path) -> Iterator[Stack]:
    """A whole stack of its own (faults are injected into it), on free ports."""
    with Stack(
        workdir=tmp_path / "stack",
        ports=Ports.free(),
        settings_overrides={"FEED_POLL_DELAY_MS": "100"},
    ) as stack:
        yield stack
