"""The relay outside Functions (`cosmos-outbox relay`, `cosmos_outbox.relay.RelayProcessor`) on
funcstack's services: what was committed reaches the topic; the process says what it holds
(its state, the operators' status naming it as the owner of the leases, the backlog's gauges
per lease); its probes answer ready once it listens and healthy while it moves, stalled (503,
naming the lease, since when and the error) when its sends fail; SIGTERM ends the command with
its leases released; the settings are the Functions app's, read from a local.settings.json with
the environment winning."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import json
import logging
import os
import re
import signal
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip(
    "funcstack",
    reason="funcstack in this interpreter (Python 3.13+) runs these tests: its services",
)

import deadlines
from azure.cosmos.aio import CosmosClient as AsyncCosmosClient
from azure_stack import DATABASE, CosmosWorld, received, verified
from deadlines import LOOPBACK, SHORT, wait_for
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from tickets import Ticket

from cosmos_outbox import Outbox
from cosmos_outbox._wiring import services_from_settings
from cosmos_outbox.cosmos.aio import CosmosDocumentStore as AsyncCosmosDocumentStore
from cosmos_outbox.ports import MessageBatch
from cosmos_outbox.relay import RelayProcessor, serve, use_local_settings
from cosmos_outbox.settings import OutboxSettings, SettingsError
from cosmos_outbox.telemetry import PENDING
from cosmos_outbox_testing import FakePublisher
from funcstack import LocalStack
from relay.fleet import app_settings, lease_documents

pytestmark = pytest.mark.integration

#: Lease intervals short enough for a test (seconds): acquire, renew, expiry.
FAST: dict[str, Any] = {
    "lease_acquire_interval": 0.5,
    "lease_renew_interval": 0.5,
    "lease_expiration_interval": 3,
}


def outbox_settings(values: dict[str, str]) -> OutboxSettings:
    return OutboxSettings(**values)  # type: ignore[arg-type]  # by the settings' names


def open_tickets(stack: LocalStack, container: str, n: int) -> set[str]:
    """`n` tickets opened, each in a transaction of its own; their ids (their sessions)."""
    service = CosmosWorld(stack.container_client(DATABASE, container), ttl=3600).service(Ticket)
    return {service.create(Ticket.open(f"Printer {i}")).aggregate.id for i in range(n)}


def get(url: str) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(url, timeout=LOOPBACK) as response:  # noqa: S310 - a test's URL
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def metric_points(reader: InMemoryMetricReader, name: str) -> dict[str, Any]:
    """The last value of gauge `name` per `outbox.lease`."""
    found: dict[str, Any] = {}
    data = reader.get_metrics_data()
    for resource in data.resource_metrics if data else []:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == name:
                    for point in metric.data.data_points:
                        found[str((point.attributes or {}).get("outbox.lease"))] = getattr(
                            point, "value", None
                        )
    return found


def test_it_relays_what_was_committed_and_says_what_it_holds(
    funcstack_services: LocalStack, fresh: str, leases: str
) -> None:
    settings = outbox_settings(app_settings(funcstack_services, fresh, leases))
    sessions = open_tickets(funcstack_services, fresh, 6)
    reader = InMemoryMetricReader()

    async def run() -> None:
        relay = RelayProcessor(
            settings,
            instance_name="relay-proc-1",
            meter_provider=MeterProvider(metric_readers=[reader]),
            **FAST,
        )
        probes_at: list[str] = []
        stopping = asyncio.Event()

        async def listening(url: str) -> None:
            probes_at.append(url)

        serving = asyncio.create_task(
            serve(relay, port=0, stopping=stopping, on_listening=listening)
        )
        async with asyncio.timeout(SHORT):
            while not probes_at:  # noqa: ASYNC110 - polls what the callback appended
                await asyncio.sleep(0.01)
            await relay.wait_until_listening()
        url = probes_at[0]
        status, ready = await asyncio.to_thread(get, f"{url}/ready")
        assert (status, ready["status"], ready["instance"]) == (200, "ready", "relay-proc-1")
        messages = await asyncio.to_thread(received, funcstack_services, sessions, 6)
        assert len(messages) == 6 and {m.session_id for m in messages} == sessions
        await relay.tick()  # the backlog timer's work now (its first tick ran at the start)
        state = relay.state()
        assert state.ready and state.held == ("0",) and state.leases[0].owner == "relay-proc-1"
        assert state.leases[0].continuation and state.leases[0].moved_at is not None
        assert state.leases[0].estimated_lag == 0
        status, health = await asyncio.to_thread(get, f"{url}/health")
        assert (status, health["status"], health["stalled"]) == (200, "healthy", [])
        assert health["leases"][0]["heldHere"] and health["leases"][0]["continuation"]
        # the operators' status reads the lease owners: this process, as it shows the trigger
        outbox = Outbox(services=lambda: services_from_settings(settings))
        seen = await outbox.operations().status.now()
        assert [lease.owner for lease in seen.leases] == ["relay-proc-1"]
        # the backlog's gauges, per lease and in all: the telemetry's names
        assert metric_points(reader, PENDING) == {"0": 0, "all": 0}
        stopping.set()
        await serving

    asyncio.run(run())
    # stopped: its leases released (owner cleared), their checkpoints kept
    [lease] = lease_documents(funcstack_services, leases)
    assert lease["Owner"] is None and lease["ContinuationToken"]


def test_it_works_the_bulk_operations_as_the_functions_apps_timer_does(
    funcstack_services: LocalStack, fresh: str, leases: str
) -> None:
    """Issue 92 item 1: a bulk operation started by a request (a failure group's discard) is
    worked by `cosmos-outbox relay`'s own loop (OUTBOX_OPERATIONS_SCHEDULE), with no Functions
    host: done, its events given up."""
    values = app_settings(funcstack_services, fresh, leases)
    settings = outbox_settings({**values, "OUTBOX_OPERATIONS_SCHEDULE": "* * * * * *"})
    container = funcstack_services.container_client(DATABASE, fresh)
    open_tickets(funcstack_services, fresh, 2)
    for document in list(
        container.query_items(
            "SELECT * FROM c WHERE c.type = 'domainEvent'", enable_cross_partition_query=True
        )
    ):
        unreadable = {k: v for k, v in document.items() if not k.startswith("_")}
        container.upsert_item({**unreadable, "id": str(uuid.uuid4()), "version": "seven"})
    outbox = Outbox(services=lambda: services_from_settings(settings))

    async def run() -> None:
        async with RelayProcessor(settings, instance_name="relay-ops", **FAST) as relay:
            async with asyncio.timeout(deadlines.SHORT):
                await relay.wait_until_listening()
                while not (groups := (await outbox.operations().groups.groups()).groups):  # noqa: ASYNC110
                    await asyncio.sleep(0.2)  # the relay quarantines the two unreadable events
            [group] = groups
            started = await outbox.operations().bulk.start_group(
                group.id, "discard", reason="written by a broken importer"
            )
            async with asyncio.timeout(deadlines.SHORT):
                while (found := await outbox.operations().bulk.get(started.id)).state != "done":  # noqa: ASYNC110
                    await asyncio.sleep(0.2)
            assert (found.done, found.failed, found.sent) == (2, 0, 0)
            assert "given up with no notice sent" in found.subscribers_will_see

    asyncio.run(run())


class RefusingPublisher(FakePublisher):
    """A broker whose link opens and which refuses every send."""

    def send(self, batch: MessageBatch) -> None:
        raise ConnectionError("the broker refuses")


def test_a_relay_that_cannot_send_is_ready_but_stalled_naming_the_lease_and_the_error(
    funcstack_services: LocalStack, fresh: str, leases: str
) -> None:
    settings = outbox_settings(app_settings(funcstack_services, fresh, leases))
    open_tickets(funcstack_services, fresh, 2)

    async def run() -> None:
        client = AsyncCosmosClient.from_connection_string(
            funcstack_services.cosmos_connection_string, **verified(funcstack_services)
        )
        container = client.get_database_client(DATABASE).get_container_client(fresh)
        services = dataclasses.replace(  # the app's services, its broker refusing
            services_from_settings(settings, asynchronous=True),
            store=AsyncCosmosDocumentStore(container),
            publisher=RefusingPublisher,
            payloads=lambda: None,
        )
        relay = RelayProcessor(settings, services=services, stall_after=1.0, **FAST)
        probes_at: list[str] = []
        stopping = asyncio.Event()

        async def listening(url: str) -> None:
            probes_at.append(url)

        serving = asyncio.create_task(
            serve(relay, port=0, stopping=stopping, on_listening=listening)
        )
        async with asyncio.timeout(SHORT):
            await relay.wait_until_listening()
            while not relay.state().leases or relay.state().leases[0].failing_since is None:  # noqa: ASYNC110 - polls a snapshot
                await asyncio.sleep(0.1)
        failing_since = relay.state().leases[0].failing_since
        assert failing_since is not None
        status, _ready = await asyncio.to_thread(get, f"{probes_at[0]}/ready")
        assert status == 200  # configured and listening: readiness is not health
        # stalled once its lease has failed for longer than stall_after (1 s): asked until it
        # says so (a deadline, not a sleep), never before the bound
        async with asyncio.timeout(SHORT):
            while True:
                status, health = await asyncio.to_thread(get, f"{probes_at[0]}/health")
                answered = dt.datetime.now(dt.UTC)
                if status == 503:
                    break
                assert health["status"] == "healthy", health
                await asyncio.sleep(0.1)
        assert (answered - failing_since).total_seconds() > 1.0, (failing_since, answered)
        assert health["status"] == "stalled"
        [stall] = health["stalled"]
        assert stall["lease"] == "0" and "the broker refuses" in stall["reason"]
        assert health["leases"][0]["lastError"].startswith("builtins.ConnectionError") or (
            "ConnectionError" in health["leases"][0]["lastError"]
        )
        stopping.set()
        await serving
        await client.close()

    asyncio.run(run())


@pytest.fixture
def settings_file(funcstack_services: LocalStack, fresh: str, leases: str, tmp_path: Path) -> Path:
    path = tmp_path / "local.settings.json"
    path.write_text(
        json.dumps(
            {"IsEncrypted": False, "Values": app_settings(funcstack_services, fresh, leases)}
        ),
        "utf-8",
    )
    return path


def start_command(
    settings_file: Path,
    log: Path,
    started: list[subprocess.Popen[str]],
    *args: str,
    wait: bool = True,
) -> tuple[subprocess.Popen[str], str]:
    """`cosmos-outbox relay --settings <file> --port 0 ...`; it and its probes' URL (its log;
    "" with `wait=False`: not waited for)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COSMOS", "Cosmos"))}
    command = [
        sys.executable,
        "-m",
        "cosmos_outbox",
        "relay",
        "--settings",
        str(settings_file),
        "--port",
        "0",
        "--lease-acquire-interval",
        "0.5",
        "--lease-renew-interval",
        "0.5",
        "--lease-expiration-interval",
        "3",
        *args,
    ]
    process = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=log.open("w"), env=env, text=True
    )
    started.append(process)
    if not wait:
        return process, ""

    def probes() -> str | None:
        found = re.search(r"probes on (http://\S+) ", log.read_text("utf-8", "replace"))
        assert found or process.poll() is None, log.read_text("utf-8", "replace")
        return found.group(1) if found else None

    return process, wait_for(probes, "the relay's probes' line", every=0.1)


def test_sigterm_ends_the_command_with_its_leases_released(
    funcstack_services: LocalStack,
    fresh: str,
    leases: str,
    settings_file: Path,
    relay_command: list[subprocess.Popen[str]],
    tmp_path: Path,
) -> None:
    sessions = open_tickets(funcstack_services, fresh, 3)
    log = tmp_path / "relay.log"
    process, url = start_command(settings_file, log, relay_command, "--instance-name", "cli-1")
    wait_for(lambda: get(f"{url}/ready")[0] == 200, "/ready answering 200", every=0.1)
    assert len(received(funcstack_services, sessions, 3)) == 3
    assert [d["Owner"] for d in lease_documents(funcstack_services, leases)] == ["cli-1"]
    process.send_signal(signal.SIGTERM)
    assert process.wait(SHORT) == 0, log.read_text("utf-8", "replace")
    [lease] = lease_documents(funcstack_services, leases)
    assert lease["Owner"] is None, log.read_text("utf-8", "replace")
    assert "SIGTERM received" in log.read_text("utf-8", "replace")


def test_settings_come_from_the_file_the_environment_winning(tmp_path: Path) -> None:
    path = tmp_path / "local.settings.json"
    path.write_text(
        json.dumps({"Values": {"COSMOS_CONTAINER": "from-file", "FEED_POLL_DELAY_MS": 250}}),
        "utf-8",
    )
    environ = {"COSMOS_CONTAINER": "from-environment"}
    assert use_local_settings(path, environ) == ["FEED_POLL_DELAY_MS"]
    assert environ == {"COSMOS_CONTAINER": "from-environment", "FEED_POLL_DELAY_MS": "250"}
    with pytest.raises(SettingsError, match="no such settings file"):
        use_local_settings(tmp_path / "missing.json", {})
    (tmp_path / "bad.json").write_text('{"Values": 3}', "utf-8")
    with pytest.raises(SettingsError, match='no "Values" object'):
        use_local_settings(tmp_path / "bad.json", {})


def test_a_missing_setting_is_named_and_the_command_exits_2(tmp_path: Path) -> None:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("COSMOS", "Cosmos", "ServiceBus", "SERVICEBUS"))
    }
    out = subprocess.run(
        [sys.executable, "-m", "cosmos_outbox", "relay", "--port", "0"],
        env={
            **env,
            "CosmosDBConnection": f"AccountEndpoint=https://x/;AccountKey={uuid.uuid4().hex}",
        },
        capture_output=True,
        text=True,
        timeout=SHORT,  # a hang guard: it refuses its settings before any call
        check=False,
    )
    assert out.returncode == 2, out.stderr
    assert "COSMOS_CONTAINER" in out.stderr


def test_a_stop_whose_release_fails_names_the_leases_it_did_not_release(
    funcstack_services: LocalStack, fresh: str, leases: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Cosmos DB refuses every replace (503) as the relay stops: the lease keeps its owner, and
    the stop says so, naming it (never "its leases released")."""
    settings = outbox_settings(app_settings(funcstack_services, fresh, leases))
    assert funcstack_services.cosmos is not None
    cosmos = funcstack_services.cosmos

    async def run() -> None:
        # no renewal during the test: the release is the only replace the fault meets
        relay = RelayProcessor(
            settings,
            instance_name="relay-unreleased",
            lease_acquire_interval=0.5,
            lease_renew_interval=60,
            lease_expiration_interval=120,
        )
        await relay.start()
        async with asyncio.timeout(SHORT):
            await relay.wait_until_listening()
        assert relay.state().held == ("0",)
        cosmos.inject_fault(503, count=1000, methods=["PUT"])
        try:
            await relay.stop()
        finally:
            cosmos.clear_faults()

    with caplog.at_level(logging.INFO, logger="cosmos_outbox.relay"):
        asyncio.run(run())
    [lease] = lease_documents(funcstack_services, leases)
    assert lease["Owner"] == "relay-unreleased"
    said = [r.getMessage() for r in caplog.records if r.name == "cosmos_outbox.relay"]
    assert any(
        "relay process relay-unreleased: stopped; lease(s) 0 not released" in line for line in said
    ), said
    assert not any("its leases released" in line for line in said), said
