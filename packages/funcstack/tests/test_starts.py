"""The count of servers started (`funcstack.starts`): with FUNCSTACK_STARTS set, every endpoint,
host and worker a stack starts, and each restart, is one line naming its kind, its process and
the test that started it; lines from processes writing at once stay whole; unset, nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from funcstack.deadlines import SHORT
from funcstack.stack import LocalStack, ServicePorts
from funcstack.starts import ENV_VAR, Start, read_starts, record_start

HERE = Path(__file__).resolve().parent


@pytest.mark.integration
def test_each_server_a_stack_starts_and_restarts_is_counted_with_its_test(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    starts = tmp_path / "starts.jsonl"
    monkeypatch.setenv(ENV_VAR, str(starts))
    with LocalStack(workdir=tmp_path / "stack", ports=ServicePorts.free()) as stack:
        stack.host_app(
            HERE / "apps" / "hello", name="hello", port=0, settings_file=tmp_path / "s.json"
        )
        assert stack.azurite is not None and stack.servicebus is not None
        assert stack.cosmos is not None
        # the endpoints start at their first connection: none yet
        assert {s.kind for s in read_starts(starts)} == {"host", "worker"}
        stack.cosmos.started()
        stack.azurite.started()
        stack.servicebus.started()
        stack.stop_servicebus()
        stack.start_servicebus()
        stack.servicebus.started()
        recorded = read_starts(starts)
        pids = dict(stack.pids())
    kinds = Counter(start.kind for start in recorded)
    assert kinds == {"cosmos": 1, "servicebus": 2, "azurite": 1, "host": 1, "worker": 1}
    # the endpoint started again on its port is a restart; nothing else is
    assert [(s.kind, s.restart) for s in recorded if s.restart or s.kind == "servicebus"] == [
        ("servicebus", False),
        ("servicebus", True),
    ]
    assert {s.pid for s in recorded if s.kind != "worker"} >= {
        pids["cosmos"],
        pids["servicebus"],
        pids["azurite"],
        pids["hello"],
    }
    test = os.environ["PYTEST_CURRENT_TEST"]
    assert {s.test for s in recorded} == {test}
    assert {s.module for s in recorded} == {"tests/test_starts.py"}


WRITER = """
import sys
from funcstack.starts import record_start
for n in range(200):
    record_start("cosmos", int(sys.argv[1]) * 1000 + n)
"""


def test_lines_written_at_once_by_several_processes_stay_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    starts = tmp_path / "run" / "starts.jsonl"  # its folder made by the first
    monkeypatch.setenv(ENV_VAR, str(starts))
    monkeypatch.delenv("PYTEST_CURRENT_TEST")
    writers = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(i)], env=os.environ.copy())
        for i in range(4)
    ]
    assert [w.wait(SHORT) for w in writers] == [0, 0, 0, 0]
    recorded = read_starts(starts)
    assert sorted(s.pid for s in recorded) == [i * 1000 + n for i in range(4) for n in range(200)]
    assert {s.module for s in recorded} == {None}


def test_nothing_is_written_when_the_variable_is_unset_or_empty(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(ENV_VAR, raising=False)
    record_start("host", 1)
    monkeypatch.setenv(ENV_VAR, "")
    record_start("host", 2)
    assert list(tmp_path.iterdir()) == []
    assert read_starts(tmp_path / "none.jsonl") == []


def test_a_restart_is_the_same_kind_and_id_again_in_the_same_module(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    starts = tmp_path / "starts.jsonl"
    monkeypatch.setenv(ENV_VAR, str(starts))
    for kind, identity, test in [
        ("cosmos", "state/a", "tests/test_starts.py::one (call)"),
        ("cosmos", "state/a", "tests/test_starts.py::two (call)"),  # the same, again
        ("servicebus", "state/a", "tests/test_starts.py::two (call)"),  # another kind
        ("cosmos", "state/a", "tests/test_stack.py::one (call)"),  # another module
        ("cosmos", None, "tests/test_starts.py::two (call)"),  # a port of the kernel's
        ("cosmos", None, "tests/test_starts.py::two (call)"),
    ]:
        monkeypatch.setenv("PYTEST_CURRENT_TEST", test)
        record_start(kind, 1, identity=identity)  # type: ignore[arg-type]
    assert [s.restart for s in read_starts(starts)] == [False, True, False, False, False, False]


def test_a_start_outside_a_test_has_no_module() -> None:
    assert Start(kind="cosmos", pid=1).module is None
    assert Start(kind="cosmos", pid=1, test="tests/test_starts.py::test_c (setup)").module == (
        "tests/test_starts.py"
    )
