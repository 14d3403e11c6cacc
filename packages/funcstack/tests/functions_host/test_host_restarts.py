"""A host run alone that dies comes back on its port, as Azure restarts a host
(``LocalServices.host_restart``, ``_host_restarts``): its URL answers again, the stack goes on
(``dead_part`` says nothing), each exit and restart is a line; a host that keeps failing at
start is given up with one line after 3 failures in a row, and then ``dead_part`` reports it
(``funcstack run`` and ``make run`` stop on it). A language worker that dies is started again
by its host, and at its third death within 30 minutes the host stops itself to be recycled, as
the Functions host does: the stack starts it again.

Every death is a SIGKILL of the real process from outside, as a crash or the out-of-memory
killer is. No endpoint is needed: the sample app has HTTP functions and a timer only."""

from __future__ import annotations

import json
import os
import shutil
import signal
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from funcstack.deadlines import LONG, LOOPBACK, SHORT, wait_for
from funcstack.functions_host import RunningRunner
from funcstack.scaleout import RestartPolicy
from funcstack.stack import LocalStack, ServicePorts

pytestmark = pytest.mark.integration

HERE = Path(__file__).resolve().parent
#: Waits short enough for a test; an exit is never within ``settle`` of a start (0: each
#: failure counted is a start that failed).
POLICY = RestartPolicy(delay=0.2, settle=0.0)


@pytest.fixture
def app_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "app"
    folder.mkdir()
    shutil.copy(HERE / "sample_scaleout_app.py", folder / "function_app.py")
    (folder / "host.json").write_text(json.dumps({"version": "2.0"}))
    return folder


@pytest.fixture
def events() -> list[str]:
    return []


@pytest.fixture
def stack(tmp_path: Path, events: list[str]) -> Iterator[LocalStack]:
    """A stack of one host (the sample needs no endpoint) that restarts it, stopped at the end."""
    local = LocalStack(
        workdir=tmp_path / "stack",
        ports=ServicePorts.free(),
        with_servicebus=False,
        with_azurite=False,
        host_restart=POLICY,
        on_host_event=events.append,
    )
    try:
        yield local
    finally:
        local.stop()


def hosted(stack: LocalStack, app_dir: Path, tmp_path: Path) -> RunningRunner:
    runner = stack.host_app(
        app_dir,
        name="app",
        port=0,
        settings_file=tmp_path / "app.settings.json",
        overrides={
            "SAMPLE_OUT": str(tmp_path / "ticks.jsonl"),
            "SAMPLE_BROKEN": str(tmp_path / "broken.flag"),
        },
    )
    assert isinstance(runner, RunningRunner)
    return runner


def whoami(url: str) -> dict[str, Any]:
    """The sample's answer (the worker's pid), or {} while nothing answers on the port."""
    try:
        with urllib.request.urlopen(f"{url}/whoami", timeout=LOOPBACK) as reply:  # noqa: S310
            return dict(json.loads(reply.read()))
    except OSError:
        return {}


def host_pid(stack: LocalStack) -> int | None:
    """The pid of the app's host while it runs."""
    runner = stack.hosts.get("app")
    return runner.process.pid if runner is not None and runner.process.poll() is None else None


def test_a_host_killed_comes_back_on_its_port_and_the_stack_goes_on(
    stack: LocalStack, app_dir: Path, tmp_path: Path, events: list[str]
) -> None:
    runner = hosted(stack, app_dir, tmp_path)
    first, url, port = runner.process.pid, runner.url, runner.port
    assert whoami(url)

    os.kill(first, signal.SIGKILL)

    wait_for(lambda: host_pid(stack) not in (None, first), "the host started again")
    assert stack.hosts["app"].port == port and stack.hosts["app"].url == url
    assert whoami(url)["pid"]  # the same URL answers, from the new host's worker
    assert stack.dead_part() is None  # the stack goes on
    restarted = stack.hosts["app"].process.pid
    assert events[0].startswith(
        f"app exited unexpectedly (killed by SIGKILL); restarting it in 0.2 s on "
        f"127.0.0.1:{port}, as Azure restarts a host that dies"
    ), events
    assert events[1:] == [f"app restarted (pid {restarted}, 127.0.0.1:{port})"], events
    log = stack.log_path("app").read_text()
    assert f"app (pid {first}) exited unexpectedly: killed by SIGKILL" in log


def test_a_host_that_keeps_failing_at_start_is_given_up_in_one_line_and_reported_dead(
    stack: LocalStack, app_dir: Path, tmp_path: Path, events: list[str]
) -> None:
    """The app stops loading (its flag file), its host is killed: each start fails (the waits
    doubling: 0.4, then 0.8 s), and the third failure in a row gives it up."""
    runner = hosted(stack, app_dir, tmp_path)
    (tmp_path / "broken.flag").write_text("")

    os.kill(runner.process.pid, signal.SIGKILL)

    wait_for(lambda: stack.dead_part() is not None, "the host given up", LONG)
    name, code = stack.dead_part() or ("", None)
    assert name == "app"
    ended = stack.ended(name, code)
    assert ended.startswith("failed at start 3 times in a row (last: did not start: "), ended
    assert "broken on purpose (SAMPLE_BROKEN)" in ended
    assert events[0].startswith("app exited unexpectedly (killed by SIGKILL); restarting it in")
    tries = [event for event in events if "did not start again" in event]
    assert [event.split("; ")[-1] for event in tries] == ["next try in 0.4 s", "next try in 0.8 s"]
    [given_up] = [event for event in events if "not restarted again" in event]
    assert given_up == events[-1] and "\n" not in given_up
    assert given_up.startswith("app failed at start 3 times in a row (last: did not start: ")
    assert given_up.endswith(f"not restarted again. Its log: {stack.log_path('app')}")


def workers_of(host: int) -> list[int]:
    """The processes of the host's process group but the host: its language worker."""
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        state, _, group = stat[stat.rindex(")") + 2 :].split()[:3]
        if state != "Z" and int(group) == host and int(entry.name) != host:
            found.append(int(entry.name))
    return found


def test_a_worker_killed_is_restarted_by_its_host_which_recycles_itself_at_the_third(
    stack: LocalStack, app_dir: Path, tmp_path: Path, events: list[str]
) -> None:
    """The worker killed once, then again: its host starts it again each time (the second
    10 s after the first, the host's restart interval); killed a third time within 30 minutes,
    the host stops itself (exit status 3) and the stack starts it again."""
    runner = hosted(stack, app_dir, tmp_path)
    host, url = runner.process.pid, runner.url
    worker = whoami(url)["pid"]
    for death in (1, 2):
        os.kill(worker, signal.SIGKILL)

        def answered_anew(dead: int = worker) -> int | None:
            pid = whoami(url).get("pid")
            return pid if pid not in (None, dead) else None

        # the app answers again from a new worker, in the same host (its process group)
        new = wait_for(answered_anew, f"the worker started again after its death {death}", SHORT)
        assert host_pid(stack) == host and workers_of(host) == [new]
        worker = new
    log = stack.log_path("app").read_text()
    assert "the language worker exited (error 1 of 3); starting it again" in log
    assert "the language worker exited (error 2 of 3); starting it again in " in log
    assert events == []  # the host itself never died

    os.kill(worker, signal.SIGKILL)

    wait_for(lambda: host_pid(stack) not in (None, host), "the host recycled and restarted", LONG)
    assert whoami(url)["pid"] != worker
    assert events[0].startswith("app exited unexpectedly (exit code 3); restarting it in 0.2 s")
    log = stack.log_path("app").read_text()
    assert "Exceeded language worker restart retry count for runtime:python" in log
