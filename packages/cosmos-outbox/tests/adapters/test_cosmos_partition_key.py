"""The container's partition key path, as the Cosmos DB adapters read it: the outbox's documents
carry their partition in `partitionKey`, and at the container's own path when it has another
(the contract suites run on such a container in test_azure_adapters.py)."""

from __future__ import annotations

import logging

import pytest

from cosmos_outbox.cosmos._store import container_key_path, key_path, keyed, sdk_operations
from cosmos_outbox.errors import OutboxError
from cosmos_outbox.ports import BatchOperation


def test_a_path_is_split_into_its_segments() -> None:
    assert key_path({"partitionKey": {"paths": ["/partitionKey"], "kind": "Hash"}}) == (
        "partitionKey",
    )
    assert key_path({"partitionKey": {"paths": ["/tenantId"], "kind": "Hash"}}) == ("tenantId",)
    assert key_path({"partitionKey": {"paths": ["/tenant/id"]}}) == ("tenant", "id")


@pytest.mark.parametrize(
    "definition",
    [
        {"paths": ["/tenantId", "/userId"], "kind": "MultiHash"},
        {"paths": ['/"tenant id"'], "kind": "Hash"},
        {"paths": [], "kind": "Hash"},
    ],
)
def test_a_key_the_outbox_cannot_write_to_is_refused_naming_the_container(
    definition: dict[str, object],
) -> None:
    with pytest.raises(OutboxError, match=r"container 'orders'.*single path"):
        key_path({"id": "orders", "partitionKey": definition})


def test_a_document_gets_the_partition_at_the_path_unless_it_has_a_value_there() -> None:
    document = {"id": "1", "partitionKey": "p", "tenant": {"name": "Ada"}}
    placed = keyed(document, ("tenant", "id"), "p")
    assert placed == {"id": "1", "partitionKey": "p", "tenant": {"name": "Ada", "id": "p"}}
    assert document == {"id": "1", "partitionKey": "p", "tenant": {"name": "Ada"}}  # a copy
    assert keyed({"id": "2", "tenantId": "t"}, ("tenantId",), "p") == {"id": "2", "tenantId": "t"}
    assert keyed({"id": "3"}, ("partitionKey",), "p") == {"id": "3", "partitionKey": "p"}
    assert keyed({"id": "4"}, (), "p") == {"id": "4"}


def test_a_batch_carries_the_partition_in_every_document_it_writes() -> None:
    operations = [
        BatchOperation("create", {"id": "a"}),
        BatchOperation("upsert", {"id": "b"}),
        BatchOperation("replace", {"id": "c"}, if_match="e"),
        BatchOperation("patch", id="d", patch=[{"op": "set", "path": "/x", "value": 1}]),
        BatchOperation("delete", id="e"),
    ]
    converted = sdk_operations(operations, ("tenantId",), "p")
    assert converted[0] == ("create", ({"id": "a", "tenantId": "p"},))
    assert converted[1] == ("upsert", ({"id": "b", "tenantId": "p"},))
    assert converted[2] == ("replace", ("c", {"id": "c", "tenantId": "p"}), {"if_match_etag": "e"})
    assert converted[3:] == [
        ("patch", ("d", [{"op": "set", "path": "/x", "value": 1}]), {}),
        ("delete", ("e",), {}),
    ]


def test_a_container_with_time_to_live_off_is_said_in_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    key = {"paths": ["/partitionKey"], "kind": "Hash"}

    def said() -> list[logging.LogRecord]:
        # the adapter's own lines: a client session another test left to the garbage collector
        # may log asyncio's "Unclosed client session" (ERROR) meanwhile
        return [r for r in caplog.records if r.name == "cosmos_outbox.cosmos"]

    with caplog.at_level("WARNING", logger="cosmos_outbox.cosmos"):
        assert container_key_path({"id": "kept", "partitionKey": key, "defaultTtl": -1}) == (
            "partitionKey",
        )
        assert not said()
        assert container_key_path({"id": "orders", "partitionKey": key}) == ("partitionKey",)
    [record] = said()
    assert "container orders has time to live off" in record.getMessage()
