from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tools.stack import Ports, Stack
from tools.target import LocalTarget, Target


@pytest.fixture
def fresh_stack(tmp_path: Path) -> Iterator[Stack]:
    """A whole stack of its own (faults are injected into it), on free ports."""
    with Stack(
        workdir=tmp_path / "stack",
        ports=Ports.free(),
        settings_overrides={"FEED_POLL_DELAY_MS": "100"},
    ) as stack:
        yield stack


@pytest.fixture
def relay_target(request: pytest.FixtureRequest) -> Target:
    """The app whose relay a test follows: locally a fresh stack of its own (the relay's first
    start, a feed polled every 100 ms); with --deployed the deployed app (`target`), where each
    test follows its own contacts only, as it does here."""
    if request.config.getoption("deployed"):
        target: Target = request.getfixturevalue("target")
        return target
    return LocalTarget(request.getfixturevalue("fresh_stack"))
