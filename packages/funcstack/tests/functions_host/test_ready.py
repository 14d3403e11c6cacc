"""Ready means listening: once the host says it is ready (its ready line; ``start_runner``,
``LocalStack.host_app``, the pytest plugin's fixtures and ``funcstack run`` wait for it), a change
made at once reaches every trigger: an HTTP request, a timer's next occurrence, a queue message,
a blob, a Service Bus message, a Cosmos DB document -- on an app of two instances, whose stack is
ready once both are. The Cosmos DB trigger starts from "now": ready before its lease was read
(funcstack before: the ready line came first, then the lease's acquire and its first read), the
document written at once was never delivered."""

from __future__ import annotations

import base64
import json
import shutil
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.storage.blob import BlobServiceClient
from azure.storage.queue import QueueClient

from funcstack.config import load_config
from funcstack.cosmos import CosmosEndpoint
from funcstack.deadlines import SHORT, DeadlineError, wait_for
from funcstack.scaleout import AppInstances
from funcstack.services import Azurite
from funcstack.stack import LocalStack, ServicePorts

pytestmark = pytest.mark.integration

HERE = Path(__file__).resolve().parent

DECLARED = {
    "Cosmos": {
        "Databases": [
            {
                "Name": "ready",
                "Containers": [
                    {"Name": "items", "PartitionKey": "/id", "PhysicalPartitions": 2},
                    {"Name": "leases", "PartitionKey": "/id"},
                ],
            }
        ]
    },
    "Storage": {"BlobContainers": [{"Name": "ready-blobs"}], "Queues": [{"Name": "ready-jobs"}]},
    "UserConfig": {
        "Namespaces": [{"Name": "sbemulatorns", "Queues": [{"Name": "ready-jobs"}], "Topics": []}],
        "Logging": {"Type": "File"},
    },
}


@pytest.fixture(scope="module")
def stack(
    tmp_path_factory: pytest.TempPathFactory,
    shared_cosmos: CosmosEndpoint,
    shared_azurite: Azurite,
) -> Iterator[LocalStack]:
    """Its database on the run's Cosmos DB endpoint and its blob container and queue on
    the run's Azurite (names of this module's own; its hosts' ids too: `host`), which no test
    here stops; a Service Bus endpoint of its own (its queue declared in its config)."""
    tmp = tmp_path_factory.mktemp("ready")
    (tmp / "funcstack.json").write_text(json.dumps(DECLARED))
    local = LocalStack(
        workdir=tmp / "stack",
        config=load_config(tmp / "funcstack.json"),
        ports=ServicePorts.free(),
        shared_cosmos=shared_cosmos,
        shared_azurite=shared_azurite,
    )
    local.start()
    try:
        yield local
    finally:
        local.stop()


def host(stack: LocalStack, tmp_path: Path, name: str, **options: Any) -> Any:
    """The sample app hosted as ``name``, with a host id of its own (the blob trigger's receipts
    and queue on the run's Azurite are keyed by it); its records go to
    ``tmp_path / "out.jsonl"``."""
    return stack.host_app(
        make_app(tmp_path),
        name=name,
        port=0,
        settings_file=tmp_path / "local.settings.json",
        overrides={
            "READY_OUT": str(tmp_path / "out.jsonl"),
            "AzureFunctionsWebHost__hostid": f"ready-tests-{name}",
        },
        **options,
    )


def make_app(tmp_path: Path) -> Path:
    app_dir = tmp_path / "app"
    app_dir.mkdir()
    shutil.copy(HERE / "sample_ready_app.py", app_dir / "function_app.py")
    (app_dir / "host.json").write_text(json.dumps({"version": "2.0"}))
    (app_dir / "local.settings.sample.json").write_text(
        json.dumps(
            {
                "Values": {
                    "CosmosConnection": "AccountEndpoint=https://localhost:8081/;AccountKey=k;",
                    "ServiceBusConnection": "Endpoint=sb://localhost;SharedAccessKeyName=k;"
                    "SharedAccessKey=k;UseDevelopmentEmulator=true;",
                }
            }
        )
    )
    return app_dir


def delivered(out: Path, ident: str, expected: set[str]) -> dict[str, list[dict[str, Any]]]:
    """The app's records of ``ident`` (and the timer's), by trigger, once each of ``expected``
    has one."""
    seen: dict[str, list[dict[str, Any]]] = {}

    def by_each() -> bool:
        seen.clear()
        for line in out.read_text("utf-8").splitlines() if out.exists() else []:
            record = json.loads(line)
            if record["trigger"] == "timer" or record["id"] == ident:
                seen.setdefault(record["trigger"], []).append(record)
        return set(seen) >= expected

    try:
        wait_for(by_each, "the change delivered by every trigger", every=0.1)
    except DeadlineError as exc:
        raise DeadlineError(f"{exc}; not delivered: {sorted(expected - set(seen))}") from None
    return seen


def test_a_change_made_at_once_after_ready_reaches_every_trigger(
    stack: LocalStack, tmp_path: Path
) -> None:
    out = tmp_path / "out.jsonl"
    app = host(stack, tmp_path, "ready")
    # every trigger listens: a host whose trigger could not start is ready too (it keeps
    # trying), and a change then reaches that trigger only once it does
    assert app.not_listening == {}
    # at once: nothing waits for a log line or a first invocation
    ident = uuid.uuid4().hex
    stack.container_client("ready", "items").create_item({"id": ident})
    storage = stack.storage_connection_string
    QueueClient.from_connection_string(storage, "ready-jobs").send_message(
        base64.b64encode(ident.encode()).decode()
    )
    BlobServiceClient.from_connection_string(storage).get_blob_client(
        "ready-blobs", f"{ident}.txt"
    ).upload_blob(ident.encode())
    with (
        ServiceBusClient.from_connection_string(stack.servicebus_connection_string) as client,
        client.get_queue_sender("ready-jobs") as sender,
    ):
        sender.send_messages(ServiceBusMessage(ident))
    with urllib.request.urlopen(f"{app.url}/ping?id={ident}", timeout=SHORT) as reply:  # noqa: S310
        assert reply.read() == b"pong"
    delivered(out, ident, {"http", "timer", "queue", "blob", "servicebus", "cosmos"})
    stack.stop_part("ready")


def test_a_stack_of_two_instances_is_ready_once_both_listen(
    stack: LocalStack, tmp_path: Path
) -> None:
    out = tmp_path / "out.jsonl"
    app = host(stack, tmp_path, "twice", instances=2, restart=None)
    assert isinstance(app, AppInstances)
    ident = uuid.uuid4().hex
    stack.container_client("ready", "items").create_item({"id": ident})
    for inst in app.instances:  # each instance's host said it before its ready line
        assert "every trigger listening" in inst.log_path.read_text("utf-8"), inst.name
    seen = delivered(out, ident, {"cosmos", "timer"})
    assert {r["instance"] for r in seen["timer"]} == {"twice-1"}  # its singleton lock
    stack.stop_part("twice")
