"""`make test`'s count of the servers it started (tools/server_starts.py): the jobs' files
tallied by kind, job and test module; over the budget it fails naming the count and the
budget; within it, or with no budget, it passes; a job with no file counts nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tools.server_starts import main, tally


def write(folder: Path, job: str, *starts: tuple[str, str | None]) -> None:
    lines = [
        json.dumps({"kind": kind, "pid": n, "test": test}) for n, (kind, test) in enumerate(starts)
    ]
    (folder / f"{job}.jsonl").write_text("".join(line + "\n" for line in lines))


@pytest.fixture
def run(tmp_path: Path) -> Path:
    write(
        tmp_path,
        "test-suite",
        ("cosmos", "tests/tooling/test_server_starts.py::test_one (setup)"),
        ("servicebus", "tests/tooling/test_server_starts.py::test_one (setup)"),
        ("cosmos", "tests/tooling/test_server_starts.py::test_two (call)"),
        ("host", "tests/tooling/test_server_starts.py::test_one (setup)"),
        ("worker", "tests/tooling/test_server_starts.py::test_one (setup)"),
    )
    write(tmp_path, "test-py3.11", ("azurite", None), ("cosmos", None))
    return tmp_path


def test_the_starts_are_tallied_by_job_kind_and_module(run: Path) -> None:
    counted = tally(run)
    assert counted.servers == 5  # the stand-ins; hosts and workers are not budgeted
    assert counted.by_job["test-suite"] == {"cosmos": 2, "servicebus": 1, "host": 1, "worker": 1}
    assert counted.by_module.most_common() == [
        (("test-suite", "tests/tooling/test_server_starts.py"), 3),
        (("test-py3.11", "(outside a test)"), 2),
    ]


def test_over_the_budget_the_count_fails_naming_both(
    run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([str(run), "--budget", "4"]) == 1
    out, err = capsys.readouterr()
    assert out.splitlines()[0] == (
        "servers started: 5 (cosmos 3, servicebus 1, azurite 1); budget 4: OVER BY 1"
    )
    assert "started 5 servers, over its budget of 4" in err


def test_within_the_budget_or_with_none_it_passes_and_prints_the_table(
    run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([str(run), "--budget", "5"]) == 0
    assert main([str(run)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "servers started: 5 (cosmos 3, servicebus 1, azurite 1); budget 5"
    assert lines[1].split() == [
        "job",
        "cosmos",
        "servicebus",
        "azurite",
        "host",
        "worker",
        "process",
    ]
    assert lines[2].split() == ["test-py3.11", "1", "0", "1", "0", "0", "0"]
    assert lines[3].split() == ["test-suite", "2", "1", "0", "1", "1", "0"]
    assert lines[4].split() == ["total", "3", "1", "1", "1", "1", "0"]
    assert "     3  test-suite: tests/tooling/test_server_starts.py" in lines


def test_no_files_count_nothing(tmp_path: Path) -> None:
    assert tally(tmp_path).servers == 0
    assert main([str(tmp_path), "--budget", "0"]) == 0
