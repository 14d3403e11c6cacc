"""Declared resources: the file's parts, comments, paths relative to the file, and every error
a user can make named in one line with the file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from funcstack.config import ConfigError, load_config
from funcstack.stack import local_settings, update_local_settings

HERE = Path(__file__).resolve().parent
HELLO = HERE / "apps" / "hello"


def write(path: Path, document: Any) -> Path:
    path.write_text(json.dumps(document) if not isinstance(document, str) else document)
    return path


def test_the_hello_apps_file_declares_its_container_and_its_topic() -> None:
    config = load_config(HELLO / "funcstack.json")
    [database] = config.cosmos.databases
    assert (
        database.name,
        [(c.name, c.partition_key, c.default_ttl) for c in database.containers],
    ) == ("hello", [("greetings", "/id", -1)])
    assert config.servicebus_file == HELLO / "funcstack.json"
    assert config.summary() == [
        "cosmos database hello: containers greetings",
        "service bus: queues none; topics greetings (all)",
    ]


def test_parts_may_be_files_beside_it_and_policies_files_beside_those(tmp_path: Path) -> None:
    (tmp_path / "cosmos").mkdir()
    write(
        tmp_path / "cosmos" / "policy.json",
        {"indexingMode": "consistent", "includedPaths": [{"path": "/kind/?"}]},
    )
    write(
        tmp_path / "cosmos" / "cosmos.json",
        """{
      /* a database */ "Databases": [{"Name": "d", "Containers": [
        {"Name": "c", "PartitionKey": "/pk", "IndexingPolicy": "policy.json"}  // beside me
      ]}]}""",
    )
    official = write(tmp_path / "Config.json", {"UserConfig": {"Namespaces": [{"Name": "n"}]}})
    config = load_config(
        write(
            tmp_path / "stack.json", {"Cosmos": "cosmos/cosmos.json", "ServiceBus": "Config.json"}
        )
    )
    [container] = config.cosmos.databases[0].containers
    assert container.indexing_policy == {
        "indexingMode": "consistent",
        "includedPaths": [{"path": "/kind/?"}],
    }
    assert container.default_ttl is None
    assert config.servicebus_file == official


def test_a_container_declares_how_many_physical_partitions_it_starts_with(tmp_path: Path) -> None:
    config = load_config(
        write(
            tmp_path / "stack.json",
            {
                "Cosmos": {
                    "Databases": [
                        {
                            "Name": "d",
                            "Containers": [
                                {"Name": "orders", "PartitionKey": "/pk", "PhysicalPartitions": 4},
                                {"Name": "leases", "PartitionKey": "/id"},
                            ],
                        }
                    ]
                }
            },
        )
    )
    orders, leases = config.cosmos.databases[0].containers
    assert (orders.physical_partitions, leases.physical_partitions) == (4, 1)


def test_the_storage_part_declares_blob_containers_inline_or_in_a_file(tmp_path: Path) -> None:
    inline = load_config(
        write(
            tmp_path / "a.json",
            {"Storage": {"BlobContainers": [{"Name": "receipts"}, {"Name": "a1-b2"}]}},
        )
    )
    assert inline.storage.blob_containers == ("receipts", "a1-b2")
    assert inline.summary() == ["storage: blob containers receipts, a1-b2"]
    write(tmp_path / "storage.json", '{"BlobContainers": [{"Name": "abc"}]}  // beside me')
    assert load_config(
        write(tmp_path / "b.json", {"Storage": "storage.json"})
    ).storage.blob_containers == ("abc",)
    assert load_config(HELLO / "funcstack.json").storage.blob_containers == ()


def test_the_storage_part_declares_queues_beside_blob_containers_inline_or_in_a_file(
    tmp_path: Path,
) -> None:
    inline = load_config(
        write(
            tmp_path / "a.json",
            {
                "Storage": {
                    "BlobContainers": [{"Name": "receipts"}],
                    "Queues": [{"Name": "imports"}, {"Name": "a1-b2"}, {"Name": "receipts"}],
                }
            },
        )
    )
    assert inline.storage.queues == ("imports", "a1-b2", "receipts")  # not a container's name
    assert inline.storage.blob_containers == ("receipts",)
    assert inline.summary() == [
        "storage: blob containers receipts",
        "storage: queues imports, a1-b2, receipts",
    ]
    write(tmp_path / "storage.json", '{"Queues": [{"Name": "abc"}]}  // beside me')
    from_file = load_config(write(tmp_path / "b.json", {"Storage": "storage.json"}))
    assert (from_file.storage.queues, from_file.storage.blob_containers) == (("abc",), ())
    assert load_config(HELLO / "funcstack.json").storage.queues == ()


def test_an_official_emulator_config_is_a_declared_resources_file_as_it_is() -> None:
    config = load_config(HERE / "fixtures" / "emulator-Config.json")
    assert config.cosmos.databases == ()
    assert config.servicebus_file == HERE / "fixtures" / "emulator-Config.json"


@pytest.mark.parametrize(
    ("document", "why"),
    [
        ('{"Cosmos": {"Databases": [}', "not valid JSON: Expecting value at line 1 column 27"),
        ({"Cosmos": {}, "Extra": 1}, "unknown key(s) Extra"),
        (
            {"Cosmos": {"Databases": [{"Name": "d", "Containers": [{"Name": "c"}]}]}},
            "database d, Containers[0] (c): PartitionKey must be a string",
        ),
        (
            {
                "Cosmos": {
                    "Databases": [
                        {"Name": "d", "Containers": [{"Name": "c", "PartitionKey": "pk"}]}
                    ]
                }
            },
            "PartitionKey must be a path such as /id",
        ),
        (
            {
                "Cosmos": {
                    "Databases": [
                        {
                            "Name": "d",
                            "Containers": [{"Name": "c", "PartitionKey": "/pk", "DefaultTtl": 0}],
                        }
                    ]
                }
            },
            "DefaultTtl must be -1",
        ),
        (
            {
                "Cosmos": {
                    "Databases": [
                        {
                            "Name": "d",
                            "Containers": [{"Name": "c", "PartitionKey": "/pk", "Ttl": 5}],
                        }
                    ]
                }
            },
            "unknown key(s) Ttl",
        ),
        (
            {
                "Cosmos": {
                    "Databases": [
                        {
                            "Name": "d",
                            "Containers": [
                                {"Name": "c", "PartitionKey": "/pk"},
                                {"Name": "c", "PartitionKey": "/pk"},
                            ],
                        }
                    ]
                }
            },
            "declares a container twice",
        ),
        (
            {
                "Cosmos": {
                    "Databases": [
                        {
                            "Name": "d",
                            "Containers": [
                                {"Name": "c", "PartitionKey": "/pk", "PhysicalPartitions": 0}
                            ],
                        }
                    ]
                }
            },
            "(c): PhysicalPartitions must be from 1 to 64, not 0",
        ),
        (
            {
                "Cosmos": {
                    "Databases": [
                        {
                            "Name": "d",
                            "Containers": [
                                {"Name": "c", "PartitionKey": "/pk", "PhysicalPartitions": "4"}
                            ],
                        }
                    ]
                }
            },
            "(c): PhysicalPartitions must be an integer",
        ),
        ({"Cosmos": "missing.json"}, "missing.json: no such file"),
        ({"Storage": {"Containers": []}}, "Storage: unknown key(s) Containers"),
        ({"Storage": {"BlobContainers": ["abc"]}}, "Storage: BlobContainers[0] must be an object"),
        (
            {"Storage": {"BlobContainers": [{"Name": "Payloads"}]}},
            "BlobContainers[0]: Name 'Payloads' is not a blob container name",
        ),
        ({"Storage": {"BlobContainers": [{"Name": "a--b"}]}}, "is not a blob container name"),
        ({"Storage": {"BlobContainers": [{"Name": "ab"}]}}, "is not a blob container name"),
        (
            {"Storage": {"BlobContainers": [{"Name": "abc"}, {"Name": "abc"}]}},
            "blob container abc is declared twice",
        ),
        ({"Storage": {"Queues": "abc"}}, "Storage: Queues must be a list"),
        ({"Storage": {"Queues": ["abc"]}}, "Storage: Queues[0] must be an object"),
        (
            {"Storage": {"Queues": [{"Name": "abc", "Visibility": 5}]}},
            "Queues[0]: unknown key(s) Visibility",
        ),
        (
            {"Storage": {"Queues": [{"Name": "Imports"}]}},
            "Queues[0]: Name 'Imports' is not a queue name (3-63 lowercase letters",
        ),
        ({"Storage": {"Queues": [{"Name": "a--b"}]}}, "Name 'a--b' is not a queue name"),
        ({"Storage": {"Queues": [{"Name": "-abc"}]}}, "Name '-abc' is not a queue name"),
        ({"Storage": {"Queues": [{"Name": "abc-"}]}}, "Name 'abc-' is not a queue name"),
        ({"Storage": {"Queues": [{"Name": "ab"}]}}, "Name 'ab' is not a queue name"),
        ({"Storage": {"Queues": [{"Name": "a" * 64}]}}, "is not a queue name"),
        ({"Storage": {"Queues": [{"Name": "my_queue"}]}}, "Name 'my_queue' is not a queue name"),
        ({"Storage": {"Queues": [{"Name": 7}]}}, "Queues[0]: Name must be a string"),
        (
            {"Storage": {"Queues": [{"Name": "abc"}, {"Name": "abc"}]}},
            "queue abc is declared twice",
        ),
        ({"UserConfig": {"Namespaces": []}}, "needs UserConfig.Namespaces with one namespace"),
        ({"UserConfig": {"Namespaces": [{}]}, "ServiceBus": "x.json"}, "not both"),
        ([], "must be an object"),
    ],
)
def test_a_file_that_cannot_be_used_is_named_with_the_cause_in_one_line(
    tmp_path: Path,
    document: Any,
    why: str,
) -> None:
    path = write(tmp_path / "stack.json", document)
    with pytest.raises(ConfigError) as refused:
        load_config(path)
    message = str(refused.value)
    assert why in message
    assert "\n" not in message
    assert str(tmp_path) in message


SAMPLE: dict[str, Any] = {
    "IsEncrypted": False,
    "Values": {
        "AzureWebJobsStorage": "UseDevelopmentStorage=true",
        "Db": "AccountEndpoint=https://localhost:8081/;AccountKey=abc==;",
        "Bus": "Endpoint=sb://localhost;SharedAccessKeyName=k;SharedAccessKey=v;"
        "UseDevelopmentEmulator=true;",
        "Other": "DefaultEndpointsProtocol=https;AccountName=x;AccountKey=y;",
        "NAME": "orders",
        "PORT": 5,
    },
    "Host": {"LocalHttpPort": 7075},
}


def test_settings_take_the_local_connection_strings_by_their_shape_not_their_name() -> None:
    document = local_settings(
        SAMPLE, {"cosmos": "C", "servicebus": "S", "storage": "A"}, {"EXTRA": "1"}
    )
    assert document["Values"] == {
        "AzureWebJobsStorage": "A",
        "Db": "C",
        "Bus": "S",
        "Other": "A",
        "NAME": "orders",
        "PORT": 5,
        "FUNCTIONS_WORKER_RUNTIME": "python",
        "EXTRA": "1",
    }
    assert document["Host"] == {"LocalHttpPort": 7075}
    assert SAMPLE["Values"]["Db"].startswith("AccountEndpoint")  # the sample is not changed


def test_a_service_that_does_not_run_leaves_its_settings_as_they_are() -> None:
    values = local_settings(SAMPLE, {"cosmos": "C"})["Values"]
    assert values["Bus"] == SAMPLE["Values"]["Bus"]
    assert values["AzureWebJobsStorage"] == "UseDevelopmentStorage=true"


def test_the_users_settings_keep_their_own_connections_and_take_the_current_local_ones() -> None:
    theirs: dict[str, Any] = {
        "IsEncrypted": False,
        "Values": {
            "AzureWebJobsStorage": "UseDevelopmentStorage=true",  # local: the current Azurite
            "Blobs": "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=k;"
            "BlobEndpoint=http://127.0.0.1:41000/devstoreaccount1;",  # local, old port
            "Archive": "DefaultEndpointsProtocol=https;AccountName=theirs;AccountKey=s;"
            "EndpointSuffix=core.windows.net",  # their storage account: kept
            "Db": "AccountEndpoint=https://theirs.documents.azure.com:443/;AccountKey=s;",
            "Bus": "Endpoint=sb://localhost:5672;SharedAccessKeyName=k;SharedAccessKey=v;"
            "UseDevelopmentEmulator=true;",
            "NAME": "theirs",
        },
        "Host": {"LocalHttpPort": 7999},
    }
    document, changes = update_local_settings(
        theirs, SAMPLE, {"cosmos": "C", "servicebus": "S", "storage": "A"}
    )
    assert document["Values"] == {
        "AzureWebJobsStorage": "A",
        "Blobs": "A",
        "Archive": theirs["Values"]["Archive"],
        "Db": theirs["Values"]["Db"],
        "Bus": "S",
        "NAME": "theirs",
        "Other": "A",
        "PORT": 5,
        "FUNCTIONS_WORKER_RUNTIME": "python",
    }
    # their Cosmos DB account is verified: no local-only TLS setting is added for it
    assert document["Host"] == {"LocalHttpPort": 7999}
    assert changes.line() == (
        "local.settings.json: updated AzureWebJobsStorage, Blobs, Bus (the local endpoints); "
        "added Other, PORT, FUNCTIONS_WORKER_RUNTIME (missing); kept Archive, Db (not a local "
        "endpoint)"
    )
    again, unchanged = update_local_settings(
        document, SAMPLE, {"cosmos": "C", "servicebus": "S", "storage": "A"}
    )
    assert again == document and not unchanged.changed
