"""The one copy of the azure-cosmos headers-race workaround (``read_again_on_headers_race``): what
it sends again and what it does not, and the bound on its life -- this file fails once the lowest
azure-cosmos the package allows is past the last release the race was seen with, for someone to
check the SDK again (``test_threads_on_one_client.py``'s first test) and delete the workaround."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cosmos_changefeed import read_again_on_headers_race
from cosmos_changefeed._shared_headers import ATTEMPTS, LAST_AFFECTED

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text)[:3])


def lowest_azure_cosmos() -> str:
    """The ``azure-cosmos>=X`` of pyproject.toml's dependencies."""
    found = re.search(r'"azure-cosmos>=([0-9][0-9.]*)', PYPROJECT.read_text("utf-8"))
    assert found is not None, "pyproject.toml pins no lowest azure-cosmos"
    return found.group(1)


def test_the_workaround_goes_once_the_lowest_azure_cosmos_allowed_is_past_the_last_affected() -> (
    None
):
    lowest = lowest_azure_cosmos()
    assert version(lowest) <= version(LAST_AFFECTED), (
        f"pyproject.toml allows azure-cosmos {lowest} and later, past {LAST_AFFECTED}, the last "
        "release the shared headers race was seen with: run tests/test_threads_on_one_client.py "
        "against it -- if its first test fails (the SDK no longer shares the headers object), "
        "delete cosmos_changefeed._shared_headers and its callers (the outbox's store too); if "
        "it passes, raise _shared_headers.LAST_AFFECTED to that release"
    )


def test_a_read_that_meets_the_race_is_sent_again_and_its_result_given() -> None:
    calls: list[int] = []

    def read() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise RuntimeError("OrderedDict mutated during iteration")
        return "page"

    assert read_again_on_headers_race(read) == "page"
    assert len(calls) == 3


def test_another_error_and_a_race_met_every_time_are_the_callers() -> None:
    calls: list[int] = []

    def other() -> None:
        calls.append(1)
        raise RuntimeError("something else")

    with pytest.raises(RuntimeError, match="something else"):
        read_again_on_headers_race(other)
    assert len(calls) == 1

    def always() -> None:
        calls.append(1)
        raise RuntimeError("dictionary changed size during iteration")

    calls.clear()
    with pytest.raises(RuntimeError, match="changed size"):
        read_again_on_headers_race(always, what="a listing")
    assert len(calls) == ATTEMPTS
