"""On call without the operators' routes (issue 72 item 7): the app's relay runs as a
`cosmos-outbox relay` process and no Functions host serves anything; `cosmos-outbox --settings
<local.settings.json>` runs status, journey, groups and re-drive straight against the stores
(the same routes' handlers, in-process, over the core's operations built from the settings),
and audits its actions as the command line. On the session's stack (fixtures/funcstack.json);
starts one process of its own, the relay."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("funcstack")

from azure.servicebus import ServiceBusClient
from deadlines import SHORT, scaled

from cosmos_outbox import Outbox
from cosmos_outbox.services import services_from_settings
from cosmos_outbox.settings import OutboxSettings
from funcstack import LocalStack

pytestmark = pytest.mark.integration

APP = Path(__file__).parents[1] / "operators_app"


@pytest.fixture
def settings(funcstack_services: LocalStack, fresh: str, tmp_path: Path) -> dict[str, str]:
    """The app's settings on this stack: its own container, its own leases (a prefix)."""
    values = funcstack_services.app_settings(
        APP, {"COSMOS_CONTAINER": fresh, "OUTBOX_PROCESSOR_NAME": f"direct-{fresh[-8:]}."}
    )["Values"]
    return {str(k): str(v) for k, v in values.items()}


@pytest.fixture
def settings_file(settings: dict[str, str], tmp_path: Path) -> Path:
    path = tmp_path / "local.settings.json"
    path.write_text(json.dumps({"IsEncrypted": False, "Values": settings}), "utf-8")
    return path


@pytest.fixture
def relay(settings_file: Path, tmp_path: Path) -> Iterator[str]:
    """`cosmos-outbox relay` on the settings: its probes' URL."""
    log = tmp_path / "relay.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COSMOS", "Cosmos"))}
    command = [sys.executable, "-m", "cosmos_outbox", "relay", "--settings", str(settings_file)]
    command += ["--port", "0", "--instance-name", "relay-in-a-container"]
    command += ["--lease-acquire-interval", "0.5", "--lease-renew-interval", "0.5"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=log.open("w"), env=env)
    try:
        deadline = time.monotonic() + SHORT
        while not (found := re.search(r"probes on (http://\S+) ", log.read_text("utf-8"))):
            assert process.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        yield found.group(1)
    finally:  # stopped, or killed: never left running
        process.terminate()
        try:
            process.wait(SHORT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(SHORT)


def cli(settings_file: Path, *args: str) -> tuple[Any, str]:
    """`cosmos-outbox --settings <file> ... --json` in a process of its own: its JSON, its
    stderr (progress lines, the audit)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("COSMOS", "Cosmos"))}
    done = subprocess.run(
        [sys.executable, "-m", "cosmos_outbox", "--settings", str(settings_file), *args, "--json"],
        capture_output=True,
        text=True,
        timeout=scaled(120),
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), done.stderr


def test_status_journey_groups_and_redrive_run_on_the_stores_with_the_apps_settings(
    funcstack_services: LocalStack, settings: dict[str, str], settings_file: Path, relay: str
) -> None:
    outbox = Outbox(services=lambda: services_from_settings(OutboxSettings(**settings)))  # type: ignore[arg-type]
    since = datetime.now(UTC) - timedelta(minutes=1)
    key = f"direct-{uuid.uuid4().hex[:8]}"
    with outbox.transaction(key, entity="ticket") as tx:
        tx.publish("TicketOpened", {"title": "Printer"})
        tx.publish("TicketClosed", {"title": "Printer"})
        [first, _] = tx.commit().events

    # the relay process relays them; the status read on the stores says so, naming its lease
    deadline = time.monotonic() + SHORT
    while True:
        status, _ = cli(settings_file, "status")
        owners = {lease.get("owner") for lease in status["leases"]}
        if status["pending"] == 0 and "relay-in-a-container" in owners:
            break
        assert time.monotonic() < deadline, status
        time.sleep(1)
    assert status["relay"]["state"] == "healthy"

    journey, _ = cli(settings_file, "journey", "--event-id", first)
    assert (journey["eventId"], journey["stored"]) == (first, True)
    assert journey["relay"] in ("relayed", "unknown"), journey

    groups, _ = cli(settings_file, "groups")
    assert groups["groups"] == []

    page, err = cli(
        settings_file,
        "redrive",
        "--since",
        since.isoformat(),
        "--aggregate-type",
        "ticket",
        "--aggregate-id",
        key,
    )
    assert (page["events"], page["accepted"]) == (2, 2), page
    assert "outbox audit: redrive by the command line as " in err, err
    with (
        ServiceBusClient.from_connection_string(
            funcstack_services.servicebus_connection_string
        ) as client,
        client.get_subscription_receiver(
            settings["SERVICEBUS_TOPIC"], "dead-letters", max_wait_time=5
        ) as receiver,
    ):
        redriven = []
        while batch := receiver.receive_messages(max_message_count=50, max_wait_time=2):
            for message in batch:
                receiver.complete_message(message)
                props = {
                    (k.decode() if isinstance(k, bytes) else k): v
                    for k, v in (message.application_properties or {}).items()
                }
                value = props.get("outboxRedrive")
                if (value.decode() if isinstance(value, bytes) else value) == page["redriveId"]:
                    redriven.append(message)
    assert len(redriven) == 2
