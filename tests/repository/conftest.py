"""The repository's tests: the trees their rules parse are kept for one module's tests only
(syntax.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.repository import syntax


@pytest.fixture(scope="module", autouse=True)
def _trees_forgotten_after_the_module() -> Iterator[None]:
    yield
    syntax.forget()
