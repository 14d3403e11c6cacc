"""funcstack.deadlines: the named deadlines, one setting that scales them, a wait that names what
did not happen."""

from __future__ import annotations

import importlib
import itertools

import pytest

import funcstack.deadlines as deadlines


def test_the_named_deadlines_grow_with_the_scale(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(deadlines.SCALE_VARIABLE, "2.5")
    try:
        scaled = importlib.reload(deadlines)
        assert (scaled.LOOPBACK, scaled.SHORT, scaled.LONG) == (25.0, 150.0, 750.0)
        assert scaled.scaled(4) == 10.0
    finally:
        monkeypatch.delenv(deadlines.SCALE_VARIABLE)
        importlib.reload(deadlines)
    assert deadlines.SCALE == 1.0


@pytest.mark.parametrize("text", ["fast", "0", "-1"])
def test_a_scale_that_is_not_a_positive_number_is_refused_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, text: str
) -> None:
    monkeypatch.setenv(deadlines.SCALE_VARIABLE, text)
    try:
        with pytest.raises(ValueError, match=f"TEST_DEADLINE_SCALE='{text}'"):
            importlib.reload(deadlines)
    finally:
        monkeypatch.delenv(deadlines.SCALE_VARIABLE)
        importlib.reload(deadlines)


def test_wait_for_returns_what_the_condition_returned_once_true() -> None:
    calls = itertools.count()
    assert deadlines.wait_for(lambda: next(calls) >= 3 and "done", "three calls", 5) == "done"


def test_wait_for_fails_naming_what_did_not_happen() -> None:
    with pytest.raises(deadlines.DeadlineError, match=r"the flag set: not within 0.2 s"):
        deadlines.wait_for(lambda: False, "the flag set", 0.2, every=0.01)
