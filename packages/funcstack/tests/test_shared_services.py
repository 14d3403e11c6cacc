"""Services started once for several test runs: ``funcstack exec -- COMMAND`` starts a Cosmos DB
endpoint, a Service Bus endpoint and an Azurite, and every ``funcstack_services`` of the pytest
runs under COMMAND uses them (``FUNCSTACK_SERVICES``) instead of starting its own, each run's
declared resources provisioned there; a declared Service Bus entity already there with other
settings is an error naming it, and so is a variable naming no running services; the services
stop when COMMAND ends, fails or is interrupted.

The declarations run on the test process's Service Bus endpoint (``shared_servicebus``), under
names of their own; the suites and the commands under ``funcstack exec`` on the services it
starts (their starts appended to the job's count, ``FUNCSTACK_STARTS``, when it is set)."""

from __future__ import annotations

import json
import os
import signal
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from azure.cosmos import CosmosClient
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from servicebus.conftest import Target
from test_cli import Cli
from test_pytest_plugin import SHARED_CACHE

from funcstack._activation import listened_on
from funcstack.config import ContainerSpec, CosmosSpec, DatabaseSpec, StackConfig
from funcstack.cosmos import CosmosEndpoint
from funcstack.deadlines import LONG, SHORT
from funcstack.handoff import SERVICES_VARIABLE
from funcstack.services import PartStartError, free_port
from funcstack.stack import LocalStack
from funcstack.starts import ENV_VAR, read_starts

pytestmark = pytest.mark.integration


def _namespace(queues: list[dict[str, Any]], topics: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "UserConfig": {"Namespaces": [{"Name": "sbemulatorns", "Queues": queues, "Topics": topics}]}
    }


def _topic(name: str, lock: str = "PT30S", dedup: bool = True) -> dict[str, Any]:
    return {
        "Name": name,
        "Properties": {"RequiresDuplicateDetection": dedup},
        "Subscriptions": [
            {"Name": "audit", "Properties": {"LockDuration": lock, "RequiresSession": False}}
        ],
    }


def _stack(folder: Path, endpoint: Any, namespace: dict[str, Any]) -> LocalStack:
    folder.mkdir(parents=True, exist_ok=True)
    config_file = folder / "servicebus-config.json"
    config_file.write_text(json.dumps(namespace))
    config = StackConfig(path=config_file, servicebus_file=config_file)
    return LocalStack(workdir=folder, config=config, shared_servicebus=endpoint)


def test_declared_entities_are_made_once_kept_and_a_clash_is_named(
    shared_servicebus: Target, tmp_path: Path
) -> None:
    endpoint = shared_servicebus.endpoint
    assert endpoint is not None
    topic, queue = f"orders-{uuid.uuid4().hex[:8]}", f"commands-{uuid.uuid4().hex[:8]}"
    first = _stack(tmp_path / "a", endpoint, _namespace([{"Name": queue}], [_topic(topic)]))
    assert first.start_servicebus() is endpoint
    with (
        ServiceBusClient.from_connection_string(endpoint.connection_string) as client,
        client.get_topic_sender(topic) as sender,
    ):
        sender.send_messages(ServiceBusMessage("kept", message_id="m-1"))
    # a second run declaring the same: nothing replaced (the message is still there)
    _stack(
        tmp_path / "b", endpoint, _namespace([{"Name": queue}], [_topic(topic)])
    ).start_servicebus()
    with (
        ServiceBusClient.from_connection_string(endpoint.connection_string) as client,
        client.get_subscription_receiver(topic, "audit", max_wait_time=SHORT) as receiver,
    ):
        [message] = receiver.receive_messages(max_wait_time=SHORT)  # at its arrival
        receiver.complete_message(message)
    assert message.message_id == "m-1"
    clashes = {
        f"subscription {topic}/'audit' exists with other settings: lock_duration": _namespace(
            [], [_topic(topic, lock="PT1M")]
        ),
        f"topic {topic!r} exists with other settings: requires_duplicate_detection": _namespace(
            [], [_topic(topic, dedup=False)]
        ),
        f"queue {queue!r} exists with other settings: max_delivery_count": _namespace(
            [{"Name": queue, "Properties": {"MaxDeliveryCount": 3}}], []
        ),
        f"queue {topic!r} is declared, and a topic of that name exists": _namespace(
            [{"Name": topic}], []
        ),
    }
    for i, (said, namespace) in enumerate(clashes.items()):
        with pytest.raises(PartStartError, match="servicebus did not start") as caught:
            _stack(tmp_path / f"c{i}", endpoint, namespace).start_servicebus()
        assert said in str(caught.value)
    # the endpoint is not the stack's: never stopped by it
    with pytest.raises(ValueError, match="shared"):
        first.stop_part("servicebus")
    first.stop()
    assert not endpoint.stopped
    endpoint_control = endpoint.control_port
    assert endpoint_control is not None and listened_on(endpoint.host, endpoint_control)


def test_a_cosmos_container_of_another_run_is_not_changed_by_a_declaration(
    shared_cosmos: CosmosEndpoint, tmp_path: Path
) -> None:
    """On a shared endpoint a declared container there with another time to live is an error
    naming it: changed, it would be changed under the run that declared it."""
    name = f"shared-{uuid.uuid4().hex[:8]}"

    def stack(ttl: int) -> LocalStack:
        spec = CosmosSpec(databases=(DatabaseSpec(name, (ContainerSpec("items", "/id", ttl),)),))
        return LocalStack(
            workdir=tmp_path,
            config=StackConfig(cosmos=spec),
            shared_cosmos=shared_cosmos,
            with_servicebus=False,
            with_azurite=False,
        )

    with stack(-1):
        with pytest.raises(PartStartError) as caught, stack(60):
            pass
        said = f"container {name}/items exists with other settings: DefaultTtl"
        assert said in str(caught.value)
        with stack(-1) as again:  # the same declaration: left as it is
            assert [i.outcome for i in again.report.items] == ["exists", "exists"]
    with CosmosClient(
        shared_cosmos.endpoint, shared_cosmos.key, **shared_cosmos.client_options()
    ) as client:
        client.delete_database(name)


SUITE = """
import json
import pathlib

from azure.servicebus import ServiceBusClient, ServiceBusMessage
from funcstack.deadlines import SHORT


def test_its_topic_on_the_services(funcstack_services):
    seen = {{kind + " process": str(getattr(funcstack_services, kind).process)
            for kind in ("cosmos", "servicebus", "azurite")}}
    seen.update(funcstack_services.connections())
    pathlib.Path({seen!r}).write_text(json.dumps(seen))
    connection = funcstack_services.servicebus_connection_string
    with ServiceBusClient.from_connection_string(connection) as client:
        with client.get_topic_sender({name!r}) as sender:
            sender.send_messages(ServiceBusMessage("hi", message_id="m-1"))
        with client.get_subscription_receiver({name!r}, "audit", max_wait_time=SHORT) as receiver:
            [message] = receiver.receive_messages(max_wait_time=SHORT)
            receiver.complete_message(message)
    assert message.message_id == "m-1"
"""


def _suite(folder: Path, name: str, topic: dict[str, Any], seen: Path) -> None:
    folder.mkdir()
    (folder / "funcstack.json").write_text(json.dumps(_namespace([], [topic])))
    (folder / "pytest.ini").write_text("[pytest]\nfuncstack_config = funcstack.json\n")
    (folder / "test_suite.py").write_text(SUITE.format(name=name, seen=str(seen)))


def _counted(starts: Path) -> list[str]:
    """The endpoints started (their kinds), appended to the job's count when it is kept."""
    kinds = [s.kind for s in read_starts(starts)]
    job = os.environ.get(ENV_VAR)
    if job and starts.exists():
        with Path(job).open("a", encoding="utf-8") as count:
            count.write(starts.read_text(encoding="utf-8"))
    return kinds


def _ports(services: Path) -> list[tuple[str, int]]:
    data = json.loads(services.read_text())
    sb = data["servicebus"]
    return [
        ("127.0.0.1", data["cosmos"]["port"]),
        (sb["host"], sb["port"]),
        (sb["host"], sb["control_port"]),
        ("127.0.0.1", data["azurite"]["ports"][0]),
    ]


def test_several_suites_share_one_set_of_services_under_funcstack_exec(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    """Two suites, each its own topic, run one after the other on the services ``funcstack
    exec`` started; a third declaring the first's subscription with another lock duration
    fails, naming it. They declare and use Service Bus only: the Cosmos DB endpoint and Azurite
    they are handed are never started (a declared database or blob container on shared
    services: the test above, ``test_stack.py``'s, and ``make example-tests``)."""
    seen = {name: tmp_path / f"{name}.json" for name in ("a", "b", "c")}
    _suite(pytester.path / "a", "alpha", _topic("alpha"), seen["a"])
    _suite(pytester.path / "b", "beta", _topic("beta"), seen["b"])
    _suite(pytester.path / "c", "gamma", _topic("alpha", lock="PT2M"), seen["c"])
    script = "; ".join(
        f"(cd {name} && {sys.executable} -m pytest -q -p no:cacheprovider -p no:xdist "
        f"-p no:randomly > ../{name}.out 2>&1); echo $? > {name}.rc"
        for name in ("a", "b", "c")
    )
    starts, work = tmp_path / "starts.jsonl", tmp_path / "exec"
    cli = Cli(
        pytester.path,
        ["exec", "--workdir", str(work), "--", "bash", "-c", script + "; exit 7"],
        env={**SHARED_CACHE, ENV_VAR: str(starts)},
    ).start()
    assert cli.exit_code(LONG) == 7, cli.text  # the command's: three suites run
    outputs = {n: (pytester.path / f"{n}.out").read_text() for n in ("a", "b", "c")}
    codes = {n: int((pytester.path / f"{n}.rc").read_text()) for n in ("a", "b", "c")}
    assert codes == {"a": 0, "b": 0, "c": 1}, outputs
    assert "subscription alpha/'audit' exists with other settings: lock_duration" in outputs["c"]
    a, b = (json.loads(seen[n].read_text()) for n in ("a", "b"))
    assert a == b  # the same endpoints
    assert [a[f"{kind} process"] for kind in ("cosmos", "servicebus", "azurite")] == ["None"] * 3
    assert _counted(starts) == ["servicebus"]  # one, for three suites
    assert not [port for host, port in _ports(work / "services.json") if listened_on(host, port)]
    assert cli.leftovers() == []


def test_a_variable_naming_no_running_services_is_an_error(
    pytester: pytest.Pytester, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Never a stack of the fixture's own instead: the variable and its value named."""
    pytester.makepyfile(test_user="def test_it(funcstack_services):\n    pass\n")
    stopped = tmp_path / "stopped.json"
    cosmos, sb, control, blob = (free_port() for _ in range(4))
    stopped.write_text(
        json.dumps(
            {
                "cosmos": {
                    "endpoint": f"https://127.0.0.1:{cosmos}/",
                    "key": "k",
                    "verify_tls": False,
                    "port": cosmos,
                    "tls": None,
                },
                "servicebus": {
                    "host": "127.0.0.1",
                    "port": sb,
                    "tls_port": None,
                    "control_port": control,
                    "warnings": [],
                },
                "azurite": {"ports": [blob, blob + 1, blob + 2]},
            }
        )
    )
    garbled = tmp_path / "garbled.json"
    garbled.write_text('{"cosmos": {}}')
    said = {
        str(tmp_path / "missing.json"): "cannot be read",
        str(garbled): "not a services file",
        str(stopped): f"not listening: Cosmos DB on port {cosmos}, Service Bus on port {sb}",
    }
    starts = tmp_path / "starts.jsonl"
    for value, why in said.items():
        monkeypatch.setenv(SERVICES_VARIABLE, value)
        monkeypatch.setenv(ENV_VAR, str(starts))
        result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:xdist")
        result.assert_outcomes(errors=1)
        result.stdout.fnmatch_lines([f"*HandoffError: {SERVICES_VARIABLE}={value}: {why}*"])
    assert _counted(starts) == []  # nothing started instead


@pytest.mark.parametrize("how", ["the command fails", "Ctrl-C", "SIGTERM to funcstack exec"])
def test_funcstack_exec_stops_the_services_however_the_command_ends(
    how: str, tmp_path: Path
) -> None:
    starts, work = tmp_path / "starts.jsonl", tmp_path / "exec"
    command = "import os, sys, time; print(os.environ['FUNCSTACK_SERVICES'], flush=True); " + (
        "sys.exit(3)" if how == "the command fails" else "time.sleep(600)"
    )
    cli = Cli(
        tmp_path,
        ["exec", "--workdir", str(work), "--", sys.executable, "-c", command],
        env={**SHARED_CACHE, ENV_VAR: str(starts)},
    ).start()
    cli.wait_for(str(work / "services.json"))
    assert cli.process is not None
    if how == "Ctrl-C":
        code = cli.interrupt()  # the command's end: Python's at SIGINT
        assert code in (1, 128 + signal.SIGINT), cli.text
    elif how == "SIGTERM to funcstack exec":
        os.kill(cli.process.pid, signal.SIGTERM)  # sent on to the command
        assert cli.exit_code() == 128 + signal.SIGTERM, cli.text
    else:
        assert cli.exit_code() == 3, cli.text
    assert not [port for host, port in _ports(work / "services.json") if listened_on(host, port)]
    assert cli.leftovers() == []
    assert _counted(starts) == []  # each waited for a first connection
