"""An app on several host instances, as Azure scales it out (``LocalStack.host_app(...,
instances=...)``): HTTP requests spread over the instances, per request, by the front on the
app's port; function groups (Flex Consumption's per-function scaling) each in processes of
their own, so memory is not shared between an HTTP function and a timer; a timer on one
instance at a time; the chaos API (kill, add). No endpoint is needed: the sample app has HTTP
functions and a timer only. The timer's test and the spread test share one app on two
instances (`two`); the others change how the app is hosted, or fail it, on a stack of their
own."""

from __future__ import annotations

import http.client
import http.server
import json
import os
import shutil
import signal
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from funcstack.deadlines import LOOPBACK, SHORT, wait_for
from funcstack.front import HttpFront
from funcstack.scaleout import AppInstances, InstanceError, RestartPolicy, parse_instances
from funcstack.services import PartStartError, free_port
from funcstack.stack import LocalStack, ServicePorts

pytestmark = pytest.mark.integration

HERE = Path(__file__).resolve().parent


@pytest.fixture
def app_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "app"
    folder.mkdir()
    shutil.copy(HERE / "sample_scaleout_app.py", folder / "function_app.py")
    (folder / "host.json").write_text(json.dumps({"version": "2.0"}))
    return folder


@contextmanager
def hosts_only(workdir: Path) -> Iterator[LocalStack]:
    """A stack of hosts only (the sample needs no endpoint), stopped at the end."""
    local = LocalStack(
        workdir=workdir,
        ports=ServicePorts.free(),
        with_servicebus=False,
        with_azurite=False,
    )
    try:
        yield local
    finally:
        local.stop()


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[LocalStack]:
    with hosts_only(tmp_path / "stack") as local:
        yield local


@dataclass
class Shared:
    """The sample app on two instances of the whole app, on a stack of the module's own: the
    timer test reads it as it started, then the spread test (last) kills an instance and adds
    one. A test run alone gets it started for itself."""

    app: AppInstances
    folder: Path


@pytest.fixture(scope="module")
def two(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Shared]:
    folder = tmp_path_factory.mktemp("two")
    app_dir = folder / "app"
    app_dir.mkdir()
    shutil.copy(HERE / "sample_scaleout_app.py", app_dir / "function_app.py")
    (app_dir / "host.json").write_text(json.dumps({"version": "2.0"}))
    with hosts_only(folder / "stack") as local:
        yield Shared(host(local, app_dir, folder, "2"), folder)


def host(
    stack: LocalStack,
    app_dir: Path,
    tmp_path: Path,
    instances: str,
    *,
    restart: RestartPolicy | None = RestartPolicy(),  # noqa: B008 - frozen: one value
    on_event: Callable[[str], None] | None = None,
) -> AppInstances:
    scaled = stack.host_app(
        app_dir,
        name="app",
        port=0,
        instances=instances,
        settings_file=tmp_path / "app.settings.json",
        overrides={
            "SAMPLE_OUT": str(tmp_path / "ticks.jsonl"),
            "SAMPLE_BROKEN": str(tmp_path / "broken.flag"),
        },
        restart=restart,
        on_event=on_event,
    )
    assert isinstance(scaled, AppInstances)
    return scaled


def call(url: str, *, method: str = "GET", body: bytes | None = None) -> http.client.HTTPResponse:
    """The answer, read (the local host's URL)."""
    request = urllib.request.Request(  # noqa: S310
        url,
        data=body,
        method=method,
        headers={"content-type": "application/json"} if body else {},
    )
    with urllib.request.urlopen(request, timeout=SHORT) as reply:  # noqa: S310 - a function's
        reply.read()
        answer: http.client.HTTPResponse = reply
        return answer


def get(url: str) -> dict[str, Any]:
    request = urllib.request.Request(url)  # noqa: S310
    with urllib.request.urlopen(request, timeout=SHORT) as reply:  # noqa: S310 - a function's
        answer: dict[str, Any] = json.loads(reply.read())
        return answer


def ticks(tmp_path: Path) -> list[dict[str, Any]]:
    out = tmp_path / "ticks.jsonl"
    if not out.exists():
        return []
    return [json.loads(line) for line in out.read_text().splitlines() if line.strip()]


def test_the_instances_spelling() -> None:
    assert parse_instances("3") == {None: 3}
    assert parse_instances(2) == {None: 2}
    assert parse_instances("http=2, function:relay_events=3") == {
        "http": 2,
        "function:relay_events": 3,
    }
    assert parse_instances("relay_events=1") == {"function:relay_events": 1}
    for bad, named in (
        ("0", "'0'"),
        ("http=x", "'x'"),
        ("3,http=2", "not both"),
        ("a-b=2", "'a-b'"),
        ("", "empty"),
    ):
        with pytest.raises(ValueError, match=named):
            parse_instances(bad)


def test_a_timer_runs_on_one_instance_of_several(two: Shared) -> None:
    """The timer's listener is a singleton: on two instances of the whole app, one ticks."""
    app = two.app
    wait_for(lambda: len(ticks(two.folder)) >= 3, "three ticks")
    assert len({tick["instance"] for tick in ticks(two.folder)}) == 1
    waiting = [
        inst
        for inst in app.instances
        if "another instance holds its singleton listener lock" in inst.log_path.read_text()
    ]
    assert len(waiting) == 1


def test_requests_are_spread_over_two_instances_one_request_at_a_time(two: Shared) -> None:
    """Per request, not per connection: four requests on one kept-alive connection reach both
    instances, in turn."""
    app = two.app
    assert [inst.name for inst in app.instances] == ["app-1", "app-2"]
    assert all(
        inst.log_path.name == f"{inst.name}.log" and inst.log_path.exists()
        for inst in app.instances
    )
    connection = http.client.HTTPConnection("127.0.0.1", app.port, timeout=SHORT)
    try:
        served = []
        for _ in range(4):
            connection.request("GET", "/api/whoami")
            reply = connection.getresponse()
            assert reply.status == 200
            served.append(json.loads(reply.read())["instance"])
    finally:
        connection.close()
    assert served == ["app-1", "app-2", "app-1", "app-2"]
    # a body goes through with its length, and the answer's headers come back
    reply = call(app.url + "/remember?value=x", method="POST", body=b"{}")
    assert reply.headers["content-type"].startswith("application/json")
    # a killed instance gets no more requests (asked not to come back)
    app.kill("app-1", restart=False)
    assert app.instance("app-1").state == "stopped"
    assert {get(app.url + "/whoami")["instance"] for _ in range(3)} == {"app-2"}
    added = app.add_instance()
    assert added.name == "app-3"
    assert {get(app.url + "/whoami")["instance"] for _ in range(4)} == {"app-2", "app-3"}


def test_function_groups_run_apart_so_memory_is_not_shared(
    stack: LocalStack,
    app_dir: Path,
    tmp_path: Path,
) -> None:
    """Flex Consumption: the HTTP functions on their instances (``http=2``), the timer on one
    of its own: what the HTTP functions keep in memory, the timer does not see; in one
    instance of the whole app it does."""
    app = host(stack, app_dir, tmp_path, "http=2")
    assert [(inst.name, inst.group) for inst in app.instances] == [
        ("app-http-1", "http"),
        ("app-http-2", "http"),
        ("app-tick-1", "function:tick"),
    ]
    assert {group: sorted(names) for group, names in app.groups.items()} == {
        "http": ["recall", "remember", "whoami"],
        "function:tick": ["tick"],
    }
    for _ in range(2):  # one on each HTTP instance
        call(app.url + "/remember?value=kept", method="POST")
    assert {get(app.url + "/recall")["instance"] for _ in range(2)} == {"app-http-1", "app-http-2"}
    assert all(get(app.url + "/recall")["remembered"] == ["kept"] for _ in range(2))
    wait_for(lambda: len(ticks(tmp_path)) >= 2, "two ticks")
    assert {tick["instance"] for tick in ticks(tmp_path)} == {"app-tick-1"}
    assert all(tick["remembered"] == [] for tick in ticks(tmp_path))
    stack.stop_part("app")
    assert not stack.scaled and not stack.hosts
    # the whole app in one process: the timer sees what the HTTP function kept
    (tmp_path / "ticks.jsonl").unlink()
    single = stack.host_app(
        app_dir,
        name="one",
        port=0,
        settings_file=tmp_path / "one.settings.json",
        overrides={"SAMPLE_OUT": str(tmp_path / "ticks.jsonl")},
    )
    call(single.url + "/remember?value=kept", method="POST")
    wait_for(
        lambda: any(t["remembered"] == ["kept"] for t in ticks(tmp_path)), "a tick that remembers"
    )


def test_a_group_the_app_does_not_have_is_named_with_the_apps_groups(
    stack: LocalStack,
    app_dir: Path,
    tmp_path: Path,
) -> None:
    with pytest.raises(
        PartStartError,
        match=r"function group 'function:relay' has no function "
        r"in this app \(its groups: function:tick, http\)",
    ):
        host(stack, app_dir, tmp_path, "relay=2")
    assert not stack.scaled and not stack.hosts


def test_an_instance_that_dies_comes_back_and_one_that_keeps_failing_at_start_is_given_up(
    stack: LocalStack,
    app_dir: Path,
    tmp_path: Path,
) -> None:
    """As Azure brings a failed instance back: a host SIGKILLed from outside (a crash) is
    restarted under its name, on its port, while the other serves every request. An exit
    within ``settle`` of being ready is a failure at start (SHORT here: each kill comes within
    it on a slow machine too): the waits double (0.4, 0.8 s) and, the app no longer loading,
    the third failure in a row gives it up with one error line while the stack goes on; once
    fixed, an instance added takes its place."""
    events: list[str] = []
    app = host(
        stack,
        app_dir,
        tmp_path,
        "2",
        restart=RestartPolicy(delay=0.2, give_up_after=3, settle=SHORT),
        on_event=events.append,
    )
    victim = app.instance("app-1")
    first_pid, port = victim.pid, victim.port
    os.killpg(first_pid, signal.SIGKILL)  # not through the API: a crash, 1-2 s after its start
    assert {get(app.url + "/whoami")["instance"] for _ in range(3)} == {"app-2"}
    assert stack.dead_part() is None  # the stack goes on: the app watches its instances
    wait_for(lambda: victim.state == "running", "app-1 back")
    assert (victim.restarts, victim.port, victim.failures) == (1, port, 1)
    assert victim.pid != first_pid and victim.last_exit == "killed by SIGKILL"
    assert {get(app.url + "/whoami")["instance"] for _ in range(4)} == {"app-1", "app-2"}
    assert events[0].startswith(
        "app-1 exited unexpectedly (killed by SIGKILL); restarting it in 0.4 s"
    ), events
    assert events[1] == f"app-1 restarted (pid {victim.pid}, 127.0.0.1:{port})"

    (tmp_path / "broken.flag").write_text("")
    os.killpg(victim.pid, signal.SIGKILL)
    wait_for(lambda: victim.state == "failed", "app-1 given up")
    assert events[2].startswith(
        "app-1 exited unexpectedly (killed by SIGKILL); restarting it in 0.8 s"
    )
    given_up = [event for event in events if "not restarted again" in event]
    assert given_up == events[3:], events
    assert len(given_up) == 1 and "\n" not in given_up[0]
    assert given_up[0].startswith("app-1 failed at start 3 times in a row (last: did not start:")
    assert "broken on purpose (SAMPLE_BROKEN)" in given_up[0]
    assert "app-1" not in stack.hosts and stack.dead_part() is None
    time.sleep(1.0)  # a non-event: given up, never tried again (its supervisor looks every 0.2 s)
    assert victim.state == "failed" and victim.restarts == 1
    assert {get(app.url + "/whoami")["instance"] for _ in range(3)} == {"app-2"}
    with pytest.raises(InstanceError, match=r"app-1 is not running \(failed\)"):
        app.pause("app-1")

    (tmp_path / "broken.flag").unlink()
    assert app.add_instance().name == "app-3"
    assert {get(app.url + "/whoami")["instance"] for _ in range(4)} == {"app-2", "app-3"}


def test_the_front_hands_a_refused_request_to_the_next_instance() -> None:
    """An instance whose process is dying (killed, not yet seen as exited) refuses the
    connection: the request never reached it, so the front hands it to the next instance
    instead of answering 502; an instance that answers is never asked twice."""

    class Live(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", "4")
            self.end_headers()
            self.wfile.write(b"live")

        def log_message(self, *args: object) -> None:
            pass

    live = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Live)
    threading.Thread(target=live.serve_forever, daemon=True).start()
    refused = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    served = f"http://127.0.0.1:{live.server_address[1]}"
    front = HttpFront(lambda: [refused, served]).start()
    try:
        for _ in range(4):
            with urllib.request.urlopen(
                f"http://127.0.0.1:{front.port}/x", timeout=LOOPBACK
            ) as reply:
                assert (reply.status, reply.read()) == (200, b"live")
        assert front.forwarded == {refused: 2, served: 4}
    finally:
        front.stop()
        live.shutdown()
        live.server_close()
