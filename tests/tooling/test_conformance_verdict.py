"""The SDK-suite gate: listed gaps may fail, nothing else may; a listed gap that passes fails
the run too, so conformance/known-failures.txt stays the exact list of gaps."""

from __future__ import annotations

from pathlib import Path

from conformance.run import FileResult, verdict
from conformance.scope import KNOWN_FAILURES, load_exclusions


def test_only_listed_gaps_may_fail(tmp_path: Path) -> None:
    gaps = load_exclusions(_known(tmp_path))
    ok = FileResult("sdk", "t.py", failures=["t.py::gap_one"], passes=["t.py::fine"])
    assert verdict([ok], gaps) == 0
    regression = FileResult("sdk", "t.py", failures=["t.py::fine"])
    assert verdict([regression], gaps) == 1


def test_a_listed_gap_that_passes_fails_the_run(tmp_path: Path) -> None:
    closed = FileResult("sdk", "t.py", passes=["t.py::gap_one"])
    assert verdict([closed], load_exclusions(_known(tmp_path))) == 1


def test_a_file_that_did_not_report_fails_the_run(tmp_path: Path) -> None:
    broken = FileResult("sdk", "t.py", note="no report")
    assert verdict([broken], load_exclusions(_known(tmp_path))) == 1


def test_the_committed_list_parses_and_every_line_has_a_reason() -> None:
    assert load_exclusions(KNOWN_FAILURES).rules


def _known(tmp_path: Path) -> Path:
    path = tmp_path / "known.txt"
    path.write_text("[sdk]\nt.py::gap* | differs\n", encoding="utf-8")
    return path
