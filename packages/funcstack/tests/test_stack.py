"""The services with declared resources, through the Python API and the unmodified SDKs:
provisioning is idempotent and says what it did; the official Service Bus emulator's sample
Config.json provisions unchanged; an app's host sees only its own folder on its import path."""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from azure.cosmos import CosmosClient
from azure.servicebus import ServiceBusClient, ServiceBusMessage
from azure.storage.blob import BlobServiceClient
from azure.storage.queue import QueueServiceClient
from servicebus.conftest import receive_all

from funcstack.config import (
    ConfigError,
    ContainerSpec,
    CosmosSpec,
    DatabaseSpec,
    load_config,
    read_json,
)
from funcstack.cosmos import CosmosEndpoint
from funcstack.deadlines import LOOPBACK, SHORT, wait_for
from funcstack.provision import ProvisionError, provision_cosmos
from funcstack.services import Azurite
from funcstack.stack import LocalStack, ServicePorts

pytestmark = pytest.mark.integration
HERE = Path(__file__).resolve().parent
OFFICIAL = HERE / "fixtures" / "emulator-Config.json"


@pytest.fixture(scope="module")
def official(
    tmp_path_factory: pytest.TempPathFactory, shared_cosmos: CosmosEndpoint
) -> Iterator[LocalStack]:
    """The services with the official sample Config.json, unchanged (no Azurite), on the test
    process's Cosmos DB endpoint (the tests here use databases of their own names)."""
    stack = LocalStack(
        workdir=tmp_path_factory.mktemp("official"),
        config=load_config(OFFICIAL),
        ports=ServicePorts.free(),
        shared_cosmos=shared_cosmos,
        with_azurite=False,
    )
    with stack:
        yield stack


def receive(client: ServiceBusClient, topic: str, subscription: str, count: int) -> list[str]:
    """The ids of the `count` messages expected on the subscription and of any more that come
    (`receive_all`)."""
    with client.get_subscription_receiver(topic, subscription) as receiver:
        got = receive_all(receiver, count, f"{count} message(s) on {topic}/{subscription}")
        return [str(m.message_id) for m in got]


def test_the_official_sample_config_provisions_unchanged_with_its_queue_topic_and_filters(
    official: LocalStack,
) -> None:
    text = OFFICIAL.read_text()
    assert "// Other supported properties" in text and '"Action"' in text  # as published
    with ServiceBusClient.from_connection_string(official.servicebus_connection_string) as sb:
        with sb.get_queue_sender("queue.1") as sender:
            sender.send_messages(ServiceBusMessage("q", message_id="q-1"))
        with sb.get_queue_receiver("queue.1", max_wait_time=SHORT) as receiver:
            [message] = receiver.receive_messages(max_wait_time=SHORT)  # at its arrival
            receiver.complete_message(message)
            assert message.message_id == "q-1"
        with sb.get_topic_sender("topic.1") as sender:
            sender.send_messages(
                [
                    ServiceBusMessage("{}", message_id="json", content_type="application/json"),
                    ServiceBusMessage(
                        "p", message_id="prop", application_properties={"prop1": "value1"}
                    ),
                    ServiceBusMessage(
                        "s", message_id="123456", application_properties={"userProp1": "value1"}
                    ),
                    ServiceBusMessage("n", message_id="none"),
                ]
            )
        # subscription.1: Correlation on ContentType; .2: Correlation on a user property;
        # .3: no rules (everything); .4: SQL on sys.MessageId and a user property (its rule's
        # Action is taken, not applied)
        assert receive(sb, "topic.1", "subscription.1", 1) == ["json"]
        assert receive(sb, "topic.1", "subscription.2", 1) == ["prop"]
        assert sorted(receive(sb, "topic.1", "subscription.3", 4)) == sorted(
            ["json", "prop", "123456", "none"]
        )
        assert receive(sb, "topic.1", "subscription.4", 1) == ["123456"]
    log = official.log_path("servicebus").read_text()
    assert "rule 'sql-filter-1': rule action \"SET sys.To = 'Entity'\" is not applied" in log


def test_provisioning_is_idempotent_and_says_what_it_did(official: LocalStack) -> None:
    name = f"db-{uuid.uuid4().hex[:8]}"
    spec = CosmosSpec(
        databases=(
            DatabaseSpec(
                name,
                (
                    ContainerSpec(
                        "items",
                        "/pk",
                        default_ttl=-1,
                        indexing_policy={
                            "indexingMode": "consistent",
                            "includedPaths": [{"path": "/kind/?"}],
                            "excludedPaths": [{"path": "/*"}],
                        },
                    ),
                    ContainerSpec("leases", "/id"),
                ),
            ),
        )
    )
    connection = official.cosmos_connection_string
    assert official.cosmos is not None
    options = official.cosmos.client_options()  # verifying the endpoint's certificate
    first = provision_cosmos(spec, connection, client_options=options)
    assert [line.split(" (")[0] for line in first.lines()] == [
        f"cosmos database {name}: created",
        f"cosmos container {name}/items: created",
        f"cosmos container {name}/leases: created",
    ]
    # each container's physical partitions are said (the banner's line): as many as it has
    assert [i.partitions for i in first.items] == [
        None,
        *(
            len(
                list(
                    CosmosClient.from_connection_string(connection, **options)
                    .get_database_client(name)
                    .get_container_client(c)
                    .read_feed_ranges()
                )
            )
            for c in ("items", "leases")
        ),
    ]
    again = provision_cosmos(spec, connection, client_options=options)
    assert [i.outcome for i in again.items] == ["exists", "exists", "exists"]
    assert again.created == []
    changed = CosmosSpec(
        databases=(DatabaseSpec(name, (ContainerSpec("items", "/pk", default_ttl=60),)),)
    )
    assert [
        i.outcome for i in provision_cosmos(changed, connection, client_options=options).items
    ] == ["exists", "updated"]
    client = CosmosClient.from_connection_string(connection, **options)
    stored = client.get_database_client(name).get_container_client("items").read()
    assert stored["defaultTtl"] == 60
    assert stored["indexingPolicy"]["includedPaths"] == [{"path": "/kind/?"}]  # kept
    moved = CosmosSpec(databases=(DatabaseSpec(name, (ContainerSpec("items", "/other"),)),))
    with pytest.raises(
        ProvisionError, match=f"{name}/items exists with partition key /pk, declared /other"
    ):
        provision_cosmos(moved, connection, client_options=options)


def test_declared_physical_partitions_are_laid_out_split_and_kept_as_declared(
    official: LocalStack,
) -> None:
    name = f"db-{uuid.uuid4().hex[:8]}"

    def spec(partitions: int) -> CosmosSpec:
        return CosmosSpec(
            databases=(
                DatabaseSpec(
                    name, (ContainerSpec("orders", "/pk", physical_partitions=partitions),)
                ),
            )
        )

    connection = official.cosmos_connection_string
    assert official.cosmos is not None
    options = official.cosmos.client_options()  # verifying the endpoint's certificate
    created = provision_cosmos(spec(4), connection, client_options=options)
    assert [i.outcome for i in created.items] == ["created", "created"]
    assert created.lines()[1] == f"cosmos container {name}/orders: created (4 physical partitions)"
    assert [p.id for p in official.physical_partitions(name, "orders")] == ["0", "1", "2", "3"]
    assert [
        i.outcome for i in provision_cosmos(spec(4), connection, client_options=options).items
    ] == ["exists", "exists"]
    assert official.split(name, "orders", "1") == ["4", "5"]
    # more than declared (split since) is kept: physical partitions never merge
    assert [
        i.outcome for i in provision_cosmos(spec(4), connection, client_options=options).items
    ] == ["exists", "exists"]
    # fewer than declared: split until there are as many
    updated = provision_cosmos(spec(7), connection, client_options=options)
    assert [i.outcome for i in updated.items] == ["exists", "updated"]
    assert updated.items[1].partitions == 7
    assert len(official.physical_partitions(name, "orders")) == 7


APP = """
import importlib.util
import sys

import azure.functions as func

app = func.FunctionApp(http_auth_level=func.AuthLevel.ANONYMOUS)


@app.route(route="path")
def path(req: func.HttpRequest) -> func.HttpResponse:
    found = importlib.util.find_spec("probe_leak") is not None
    return func.HttpResponse(f"{int(found)}")
"""


def test_the_apps_folder_is_the_only_entry_added_to_its_workers_import_path(
    official: LocalStack,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A PYTHONPATH in the environment does not reach the app; extra_import_paths opts in."""
    leak = tmp_path / "leak"
    leak.mkdir()
    (leak / "probe_leak.py").write_text("")
    app = tmp_path / "app"
    app.mkdir()
    (app / "function_app.py").write_text(APP)
    (app / "host.json").write_text('{"version": "2.0"}')
    monkeypatch.setenv("PYTHONPATH", str(leak))
    plain = official.host_app(app, name="plain", port=0, settings_file=tmp_path / "a.json")
    opted = official.run_host("opted", app, settings={}, extra_import_paths=[leak])
    try:
        for host, expected in ((plain, b"0"), (opted, b"1")):
            with urllib.request.urlopen(f"{host.url}/path", timeout=SHORT) as reply:  # noqa: S310
                assert reply.read() == expected
    finally:
        official.stop_part("plain")
        official.stop_part("opted")
    settings = json.loads((tmp_path / "a.json").read_text())
    assert settings["Values"]["FUNCTIONS_WORKER_RUNTIME"] == "python"


def test_a_stack_on_a_shared_cosmos_endpoint_provisions_on_it_and_never_stops_it(
    official: LocalStack, tmp_path: Path
) -> None:
    """One endpoint, several apps: a stack given another's Cosmos DB endpoint creates its
    declared resources there, lists no part of it, refuses to stop it, and leaves it serving
    when it stops."""
    app = tmp_path / "hello"
    shutil.copytree(HERE / "apps" / "hello", app)
    assert official.cosmos is not None
    database = f"hello-{uuid.uuid4().hex[:8]}"
    config = read_json(app / "funcstack.json")  # comments allowed
    config["Cosmos"]["Databases"][0]["Name"] = database
    (app / "funcstack.json").write_text(json.dumps(config))
    with LocalStack(
        workdir=tmp_path / "stack",
        config=load_config(app / "funcstack.json"),
        ports=ServicePorts.free(),
        shared_cosmos=official.cosmos,
        with_servicebus=False,
        with_azurite=False,
    ) as stack:
        assert stack.cosmos is official.cosmos
        assert stack.report.lines()[0] == f"cosmos database {database}: created"
        assert [name for name, _ in stack.pids()] == []  # none of its own
        with pytest.raises(ValueError, match="shared"):
            stack.stop_part("cosmos")
        stack.container_client(database, "greetings").create_item({"id": "1"})
    assert not official.cosmos.stopped
    kept = official.container_client(database, "greetings").read_item("1", partition_key="1")
    assert kept["id"] == "1"


def test_the_services_start_with_the_declared_resources_of_an_app(
    tmp_path: Path, shared_cosmos: CosmosEndpoint
) -> None:
    """The app's declared database and container, on the run's Cosmos DB endpoint
    under a database name of this test's own (a stack starting an endpoint of its own
    provisions the same way: `funcstack run` in test_cli.py, the plugin in
    test_pytest_plugin.py)."""
    app = tmp_path / "hello"
    shutil.copytree(HERE / "apps" / "hello", app)
    database = f"hello-{uuid.uuid4().hex[:8]}"
    config = read_json(app / "funcstack.json")  # comments allowed
    config["Cosmos"]["Databases"][0]["Name"] = database
    (app / "funcstack.json").write_text(json.dumps(config))
    with LocalStack(
        workdir=tmp_path / "stack",
        config=load_config(app / "funcstack.json"),
        ports=ServicePorts.free(),
        shared_cosmos=shared_cosmos,
        with_azurite=False,
    ) as stack:
        assert stack.report.lines() == [
            f"cosmos database {database}: created",
            f"cosmos container {database}/greetings: created (1 physical partition)",
        ]
        stack.container_client(database, "greetings").create_item({"id": "1"})
        # one SDK client per endpoint, whichever container and thread asks
        again = stack.container_client(database, "greetings")
        other = stack.container_client(database, "other")
        assert again.client_connection is other.client_connection
        assert again.read_item("1", partition_key="1")["id"] == "1"


def test_declared_blob_containers_are_created_private_in_azurite_and_kept(
    tmp_path: Path, shared_cosmos: CosmosEndpoint, shared_azurite: Azurite
) -> None:
    """On an Azurite the stack does not own (the test run's: the containers are this test's own
    names): the stack provisions there, lists no part of it, refuses to stop it, and leaves it
    serving when it stops."""
    payloads, archive = (f"{name}-{uuid.uuid4().hex[:8]}" for name in ("payloads", "archive"))
    config = tmp_path / "stack.json"
    config.write_text(
        json.dumps({"Storage": {"BlobContainers": [{"Name": payloads}, {"Name": archive}]}})
    )
    with LocalStack(
        workdir=tmp_path / "stack",
        config=load_config(config),
        ports=ServicePorts.free(),
        shared_cosmos=shared_cosmos,  # Azurite's part is under test
        shared_azurite=shared_azurite,
        with_servicebus=False,
    ) as stack:
        assert stack.azurite is shared_azurite
        assert stack.report.lines() == [
            f"storage blob container {payloads}: created",
            f"storage blob container {archive}: created",
        ]
        with BlobServiceClient.from_connection_string(stack.storage_connection_string) as blobs:
            container = blobs.get_container_client(payloads)
            assert container.get_container_properties().public_access is None  # private
            container.upload_blob("a/b", b"kept")
            assert [i.outcome for i in stack.provision().items] == ["exists", "exists"]
            assert container.download_blob("a/b").readall() == b"kept"
        assert [name for name, _ in stack.pids()] == []  # none of its own
        with pytest.raises(ValueError, match="shared"):
            stack.stop_part("azurite")
    assert not shared_azurite.stopped
    with BlobServiceClient.from_connection_string(shared_azurite.connection_string) as blobs:
        assert blobs.get_container_client(payloads).download_blob("a/b").readall() == b"kept"


def test_declared_queues_are_created_in_azurite_and_kept_with_their_messages(
    tmp_path: Path, shared_cosmos: CosmosEndpoint, shared_azurite: Azurite
) -> None:
    """On the test run's Azurite: the container and queues are this test's own names."""
    imports = f"imports-{uuid.uuid4().hex[:8]}"
    config = tmp_path / "stack.json"
    config.write_text(
        json.dumps(
            {
                "Storage": {
                    "BlobContainers": [{"Name": imports}],
                    "Queues": [{"Name": imports}, {"Name": f"{imports}-2"}],
                }
            }
        )
    )
    with LocalStack(
        workdir=tmp_path / "stack",
        config=load_config(config),
        ports=ServicePorts.free(),
        shared_cosmos=shared_cosmos,  # Azurite's part is under test
        shared_azurite=shared_azurite,
        with_servicebus=False,
    ) as stack:
        assert stack.report.lines() == [
            f"storage blob container {imports}: created",
            f"storage queue {imports}: created",
            f"storage queue {imports}-2: created",
        ]
        with QueueServiceClient.from_connection_string(stack.storage_connection_string) as qs:
            assert sorted(q.name for q in qs.list_queues(name_starts_with=imports)) == [
                imports,
                f"{imports}-2",
            ]
            queue = qs.get_queue_client(imports)
            queue.send_message("kept")
            assert [(i.kind, i.outcome) for i in stack.provision().items] == [
                ("blob container", "exists"),
                ("queue", "exists"),
                ("queue", "exists"),
            ]
            [message] = queue.peek_messages()
            assert message.content == "kept"


def test_a_bad_sample_settings_file_is_named_in_one_line(
    official: LocalStack, tmp_path: Path
) -> None:
    app = tmp_path / "bad"
    app.mkdir()
    (app / "function_app.py").write_text(APP)
    (app / "local.settings.sample.json").write_text('{"Values": {"A": 1,}}')
    with pytest.raises(
        Exception,
        match=r"bad did not start: .*local.settings.sample.json: not "
        r"valid JSON",
    ) as failed:
        official.host_app(app, port=0)
    assert "\n" not in str(failed.value)
    assert not isinstance(failed.value, ConfigError)


# -- local.settings.json is the user's (issue 36) --------------------------------------------------

#: A team's own Service Bus namespace in Azure (not a local endpoint): funcstack keeps it.
THEIR_SERVICEBUS = (
    "Endpoint=sb://contoso.servicebus.windows.net/;SharedAccessKeyName=send;"
    "SharedAccessKey=their-secret-value="
)
AN_EARLIER_RUN_COSMOS = (
    "AccountEndpoint=https://127.0.0.1:40001/;AccountKey=C2y6yDjf5/R+ob0N8A7C"
    "gv30VRDJIWEHLM+4QDU9DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw==;"
)


def users_settings(app: Path) -> dict[str, object]:
    """What a user's local.settings.json holds after a few runs and edits by hand: a setting of
    their own, their own Service Bus in Azure, a local Cosmos DB connection of an earlier run
    (another port), a Host section of their own, and no GREETINGS_TOPIC (the sample has one)."""
    sample = json.loads((app / "local.settings.sample.json").read_text())
    values = dict(sample["Values"])
    del values["GREETINGS_TOPIC"]
    values.update(
        {
            "MY_FEATURE_FLAG": "on",
            "ServiceBusConnection": THEIR_SERVICEBUS,
            "CosmosConnection": AN_EARLIER_RUN_COSMOS,
            "RETRIES": 3,
        }
    )
    return {
        "IsEncrypted": False,
        "Values": values,
        "Host": {"LocalHttpPort": 7071, "CORS": "https://app.example"},
        "ConnectionStrings": {},
    }


def test_the_users_local_settings_are_kept_and_only_local_connections_updated(
    official: LocalStack,
    tmp_path: Path,
) -> None:
    app = tmp_path / "hello"
    shutil.copytree(HERE / "apps" / "hello", app)
    mine = users_settings(app)
    (app / "local.settings.json").write_text(json.dumps(mine, indent=4))
    official.host_app(app, name="kept", port=0)
    official.stop_part("kept")
    written = json.loads((app / "local.settings.json").read_text())
    values = written["Values"]
    assert values["MY_FEATURE_FLAG"] == "on"  # a setting of the user's own
    assert values["RETRIES"] == 3  # verbatim, not turned into a string
    assert values["ServiceBusConnection"] == THEIR_SERVICEBUS  # not local: theirs
    assert values["CosmosConnection"] == official.cosmos_connection_string  # local: the current
    assert values["GREETINGS_TOPIC"] == "greetings"  # missing: added from the sample
    assert written["Host"] == mine["Host"] and written["ConnectionStrings"] == {}
    line = official.settings_changes["kept"]
    assert line == (
        "local.settings.json: updated CosmosConnection (the local endpoint); added "
        "GREETINGS_TOPIC (missing); kept ServiceBusConnection (not a local endpoint)"
    )
    assert "secret" not in line and "AccountKey" not in line

    before = (app / "local.settings.json").stat().st_mtime_ns
    official.host_app(app, name="kept", port=0)  # nothing to change: the file is not written
    official.stop_part("kept")
    assert (app / "local.settings.json").stat().st_mtime_ns == before
    assert official.settings_changes["kept"] == (
        "local.settings.json: unchanged; kept ServiceBusConnection (not a local endpoint)"
    )


def test_a_missing_local_settings_file_is_created_from_the_sample(
    official: LocalStack,
    tmp_path: Path,
) -> None:
    app = tmp_path / "hello"
    shutil.copytree(HERE / "apps" / "hello", app)
    official.host_app(app, name="created", port=0)
    official.stop_part("created")
    values = json.loads((app / "local.settings.json").read_text())["Values"]
    assert values["CosmosConnection"] == official.cosmos_connection_string
    assert values["ServiceBusConnection"] == official.servicebus_connection_string
    assert official.settings_changes["created"] == (
        "local.settings.json: created from local.settings.sample.json"
    )


def test_an_unreadable_local_settings_file_is_named_and_left_as_it_is(
    official: LocalStack,
    tmp_path: Path,
) -> None:
    app = tmp_path / "hello"
    shutil.copytree(HERE / "apps" / "hello", app)
    (app / "local.settings.json").write_text('{"Values": {"A": "1",}}')
    with pytest.raises(Exception, match=r"local.settings.json: not valid JSON"):
        official.host_app(app, name="broken", port=0)
    assert (app / "local.settings.json").read_text() == '{"Values": {"A": "1",}}'


def environment_of(process: subprocess.Popen[Any]) -> list[bytes]:
    """A running process's environment as /proc shows it, once it shows one (it shows none
    for a moment after its start: seen once under make test's load); a process that ended is
    said, with its status, rather than read as an empty environment."""

    def shown() -> bytes:
        assert process.poll() is None, f"pid {process.pid} ended: {process.returncode}"
        return Path(f"/proc/{process.pid}/environ").read_bytes()

    return wait_for(shown, f"pid {process.pid}'s environment in /proc", LOOPBACK).split(b"\0")


def test_the_node_stand_ins_start_without_extra_ca_certificates_and_azurite_without_telemetry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """They only listen: the CA bundle that Node would parse at each start is left out, and
    Azurite is told not to send its usage data out of a local stack."""
    monkeypatch.setenv("NODE_EXTRA_CA_CERTS", "/etc/ssl/certs/ca-certificates.crt")
    with LocalStack(
        workdir=tmp_path / "stack", ports=ServicePorts.free(), with_servicebus=False
    ) as stack:
        assert stack.cosmos is not None and stack.azurite is not None
        azurite = stack.azurite.started()  # else at its first connection
        for process in (stack.cosmos.started(), azurite):
            environ = environment_of(process)
            assert not any(v.startswith(b"NODE_EXTRA_CA_CERTS=") for v in environ)
            assert any(v.startswith(b"PATH=") for v in environ)  # the rest is passed on
        cmdline = Path(f"/proc/{azurite.pid}/cmdline").read_bytes().split(b"\0")
        assert b"--disableTelemetry" in cmdline
