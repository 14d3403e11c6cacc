"""The pytest plugin as a team uses it: a test file outside any project, with only the plugin's
fixtures, creates an item with the Cosmos DB SDK, receives a message with the Service Bus SDK and
calls a hosted app, which requires its keys by auth level unless told not to; everything stops at
the end, when a test fails, and on Ctrl-C."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from test_cli import Cli

from funcstack._cache import CACHE_ENV, cache_root
from funcstack.deadlines import LONG, SHORT, wait_for

pytestmark = pytest.mark.integration
HELLO = Path(__file__).resolve().parent / "apps" / "hello"
#: funcstack's cache as this process found it, read at import: the ``pytester`` fixture points
#: HOME at the test's folder, where a pytest it starts would install the Node packages and the
#: RPC messages again (npm from the registry: 40 s more, and a start that depends on the network)
SHARED_CACHE = {CACHE_ENV: str(cache_root())}

USER_TESTS = f'''
import json
import urllib.error
import urllib.request

from azure.cosmos import CosmosClient
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from funcstack.deadlines import LOOPBACK, SHORT

HELLO = {str(HELLO)!r}


def test_the_services(funcstack_services):
    cosmos = CosmosClient(funcstack_services.cosmos_endpoint, funcstack_services.cosmos_key,
                          **funcstack_services.cosmos.client_options())
    container = cosmos.get_database_client("hello").get_container_client("greetings")
    container.create_item({{"id": "from-the-plugin"}})
    assert container.read_item("from-the-plugin", partition_key="from-the-plugin")
    connection = funcstack_services.servicebus_connection_string
    with ServiceBusClient.from_connection_string(connection) as client:
        with client.get_topic_sender("greetings") as sender:
            sender.send_messages(ServiceBusMessage("hi", message_id="m-1"))
        with client.get_subscription_receiver("greetings", "all", max_wait_time=SHORT) as receiver:
            [message] = receiver.receive_messages(max_wait_time=SHORT)  # at its arrival
            receiver.complete_message(message)
    assert message.message_id == "m-1"
    assert funcstack_services.storage_connection_string


def test_an_app(funcstack_app):
    app = funcstack_app(HELLO)
    assert app.url.endswith("/api")
    request = urllib.request.Request(app.url + "/greetings", data=b'{{"name": "Ada"}}',
                                     method="POST", headers={{"content-type": "application/json"}})
    with urllib.request.urlopen(request, timeout=SHORT) as reply:
        assert reply.status == 201
        created = json.loads(reply.read())
    with urllib.request.urlopen(app.url + "/greetings/" + created["id"], timeout=SHORT) as reply:
        assert json.loads(reply.read())["text"] == "Hello, Ada!"


KEYED = """
import azure.functions as func

app = func.FunctionApp(http_auth_level=func.AuthLevel.FUNCTION)


@app.route(route="orders")
def orders(req: func.HttpRequest) -> func.HttpResponse:
    return func.HttpResponse("orders")


@app.route(route="operators", auth_level=func.AuthLevel.ADMIN)
def operators(req: func.HttpRequest) -> func.HttpResponse:
    return func.HttpResponse("operators")
"""


def status(url, key=None):
    request = urllib.request.Request(url, headers={{"x-functions-key": key}} if key else {{}})
    try:
        with urllib.request.urlopen(request, timeout=SHORT) as reply:
            return reply.status
    except urllib.error.HTTPError as error:
        return error.code


def test_an_app_requires_its_keys_by_default_as_in_azure(funcstack_app, tmp_path):
    (tmp_path / "function_app.py").write_text(KEYED)
    app = funcstack_app(tmp_path)
    assert status(app.url + "/orders") == 401
    assert status(app.url + "/orders", app.function_key) == 200
    assert status(app.url + "/operators", app.function_key) == 401
    assert status(app.url + "/operators", app.master_key) == 200
    unchecked = funcstack_app(tmp_path, enforce_keys=False)  # as func start: no keys, no checks
    assert unchecked.function_key is None and status(unchecked.url + "/operators") == 200


def test_an_app_on_two_instances(funcstack_module_app):
    app = funcstack_module_app(HELLO, instances=2)
    assert [inst.name for inst in app.instances.instances] == [app.name + "-1", app.name + "-2"]
    for i in range(4):
        request = urllib.request.Request(app.url + "/greetings", method="POST",
                                         data=json.dumps({{"name": str(i)}}).encode(),
                                         headers={{"content-type": "application/json"}})
        with urllib.request.urlopen(request, timeout=SHORT) as reply:
            assert reply.status == 201
    assert sorted(app.instances.front.forwarded.values()) == [2, 2]


def test_one_host_per_module_a_first_test(funcstack_module_app, funcstack_services):
    app = funcstack_module_app(HELLO)
    FIRST.append(app)
    assert status(app.url + "/greetings/none", app.function_key) in (200, 404)


def test_one_host_per_module_the_same_host_and_stop_start(funcstack_module_app):
    app = funcstack_module_app(HELLO)
    assert app is FIRST[0]  # the same host: no second start
    app.stop()  # one app taken down while the services run
    try:
        urllib.request.urlopen(app.url + "/greetings/none", timeout=LOOPBACK)
        raise AssertionError("the stopped app answered")
    except urllib.error.URLError as error:
        assert not isinstance(error, urllib.error.HTTPError), error
    app.start()  # back, on its port
    assert status(app.url + "/greetings/none", app.function_key) in (200, 404)


def test_no_key_in_a_repr_or_a_log_line(funcstack_module_app, funcstack_services):
    apps = [funcstack_module_app(HELLO), funcstack_module_app(HELLO, instances=2)]
    keys = {{key for app in apps for key in (app.function_key, app.master_key)}}
    assert None not in keys and len(keys) == 4  # each app its own (its instances share them)
    for app in apps:
        status(app.url + "/greetings/none", app.function_key)
        status(app.url + "/greetings/none?code=" + app.master_key)
    shown = [repr(funcstack_services), *(repr(app) for app in apps)]
    scaled = apps[1].instances
    shown += [repr(scaled), *(repr(inst) for inst in scaled.instances), repr(scaled.options)]
    shown += [repr(funcstack_services.hosts[name]) for name in funcstack_services.hosts]
    lines = [
        line
        for log in funcstack_services.workdir.glob("*.log")
        for line in log.read_text("utf-8", "replace").splitlines()
    ]
    assert lines, "no log"
    for key in keys:
        assert not [text for text in shown if key in text]
        assert not [line for line in lines if key in line]


FIRST = []


def test_a_failing_test_still_stops_its_app(funcstack_app):
    funcstack_app(HELLO)
    assert False, "fails on purpose"
'''


def leftovers(mark: str) -> list[str]:
    return Cli(Path(), [], mark=mark).leftovers()


def test_a_test_file_with_only_the_plugins_fixtures(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    mark = uuid.uuid4().hex
    monkeypatch.setenv("FUNCSTACK_TEST_MARK", mark)
    monkeypatch.setenv(CACHE_ENV, SHARED_CACHE[CACHE_ENV])
    pytester.makepyfile(test_user=USER_TESTS)
    pytester.makeini(f"[pytest]\nfuncstack_config = {HELLO / 'funcstack.json'}\n")
    result = pytester.runpytest_subprocess(
        "-p", "no:cacheprovider", "-p", "no:xdist", "-p", "no:randomly", timeout=LONG
    )
    result.assert_outcomes(passed=7, failed=1)
    result.stdout.fnmatch_lines(["*fails on purpose*"])
    assert leftovers(mark) == []


def test_ctrl_c_stops_the_services(pytester: pytest.Pytester, tmp_path: Path) -> None:
    started = tmp_path / "started"
    pytester.makepyfile(
        test_wait=f"""
import pathlib
import time


def test_waits(funcstack_services):
    pathlib.Path({str(started)!r}).write_text(funcstack_services.cosmos_endpoint)
    time.sleep(600)
"""
    )
    mark = uuid.uuid4().hex
    # A terminal starts its foreground job with Ctrl-C at its default. A suite started in the
    # background of a non-interactive shell (`make test &`) has SIGINT ignored, a child inherits
    # that, and Python leaves an ignored SIGINT ignored: the child gets the default, as from a
    # terminal (a handler of ours in this process is reset to the default across exec).
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "pytest",
                "-p",
                "no:cacheprovider",
                "-p",
                "no:xdist",
                "-q",
                "--funcstack-config",
                str(HELLO / "funcstack.json"),
            ],
            cwd=pytester.path,
            env={**os.environ, **SHARED_CACHE, "FUNCSTACK_TEST_MARK": mark},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            process_group=0,
        )
    finally:
        signal.signal(signal.SIGINT, previous)
    try:

        def waiting() -> bool:
            assert process.poll() is None, "the user's pytest ended before its test waited"
            return started.exists()

        wait_for(waiting, "the user's test running with the services", LONG)
        os.killpg(process.pid, signal.SIGINT)  # Ctrl-C in its terminal
        try:
            output, _ = process.communicate(timeout=SHORT)  # everything stopped
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            output, _ = process.communicate()
            pytest.fail(f"pytest still ran {SHORT:g} s after Ctrl-C; its output:\n{output[-8000:]}")
    finally:
        if process.poll() is None:
            process.kill()
    assert "KeyboardInterrupt" in output
    assert leftovers(mark) == []
