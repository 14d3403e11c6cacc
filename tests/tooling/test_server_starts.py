"""`make test`'s count of the servers it started (tools/server_starts.py): the jobs' files
tallied by kind, job and test module, restarts apart; over either budget it fails naming the
count and the budget; within them, or with none, it passes; no file counts nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tools.server_starts import main, tally

MODULE = "tests/tooling/test_server_starts.py"


def write(folder: Path, job: str, *starts: tuple[str, str | None, str | None]) -> None:
    lines = [
        json.dumps({"kind": kind, "pid": n, "test": test, "id": identity})
        for n, (kind, identity, test) in enumerate(starts)
    ]
    (folder / f"{job}.jsonl").write_text("".join(line + "\n" for line in lines))


@pytest.fixture
def run(tmp_path: Path) -> Path:
    write(
        tmp_path,
        "test-suite",
        ("cosmos", "7001", f"{MODULE}::test_one (setup)"),
        ("servicebus", "7002", f"{MODULE}::test_one (setup)"),
        ("servicebus", "7002", f"{MODULE}::test_two (call)"),  # started again: a restart
        ("cosmos", None, f"{MODULE}::test_two (call)"),
        ("host", "host.log", f"{MODULE}::test_one (setup)"),
        ("worker", "host 1", f"{MODULE}::test_one (setup)"),
    )
    write(tmp_path, "test-py3.11", ("azurite", "data", None), ("cosmos", "7001", None))
    return tmp_path


def test_the_starts_are_tallied_by_job_kind_and_module_restarts_apart(run: Path) -> None:
    counted = tally(run)
    assert (counted.servers, counted.restarts) == (5, 1)  # hosts and workers: not budgeted
    assert counted.by_job["test-suite"] == {
        "cosmos": 2,
        "servicebus": 1,
        "restarts": 1,
        "host": 1,
        "worker": 1,
    }
    assert counted.by_module[("test-suite", MODULE)] == {
        "cosmos": 2,
        "servicebus": 1,
        "restarts": 1,
    }
    assert counted.by_module[("test-py3.11", "(outside a test)")] == {"azurite": 1, "cosmos": 1}


def test_over_a_budget_the_count_fails_naming_it(
    run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([str(run), "--budget", "4", "--restart-budget", "1"]) == 1
    out, err = capsys.readouterr()
    assert out.splitlines()[:2] == [
        "servers started: 5 (cosmos 3, servicebus 1, azurite 1); budget 4: OVER BY 1",
        "and started again (a test's restart): 1; budget 1",
    ]
    assert "5 servers started, over its budget of 4" in err
    assert main([str(run), "--budget", "5", "--restart-budget", "0"]) == 1
    assert "1 restarts, over its budget of 0" in capsys.readouterr().err


def test_within_the_budgets_or_with_none_it_passes_and_prints_the_table(
    run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([str(run), "--budget", "5", "--restart-budget", "1"]) == 0
    assert main([str(run)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "servers started: 5 (cosmos 3, servicebus 1, azurite 1); budget 5"
    assert lines[2].split() == [
        "job", "cosmos", "servicebus", "azurite", "restarts", "host", "worker", "process"
    ]  # fmt: skip
    assert lines[3].split() == ["test-py3.11", "1", "0", "1", "0", "0", "0", "0"]
    assert lines[4].split() == ["test-suite", "2", "1", "0", "1", "1", "1", "0"]
    assert lines[5].split() == ["total", "3", "1", "1", "1", "1", "1", "0"]
    assert f"     3   +1  test-suite: {MODULE}" in lines


def test_no_files_count_nothing(tmp_path: Path) -> None:
    assert (tally(tmp_path).servers, tally(tmp_path).restarts) == (0, 0)
    assert main([str(tmp_path), "--budget", "0", "--restart-budget", "0"]) == 0
