from __future__ import annotations

import pytest

from tools.target import LocalTarget, Target


@pytest.fixture
def relay_target(request: pytest.FixtureRequest) -> Target:
    """The app whose relay a test follows: locally the module's `stack` (a stack of the module's
    own, its feed polled every 100 ms, on which each test follows its own contacts only); with
    --deployed the deployed app (`target`), where each test does the same."""
    if request.config.getoption("deployed"):
        target: Target = request.getfixturevalue("target")
        return target
    return LocalTarget(request.getfixturevalue("stack"))
