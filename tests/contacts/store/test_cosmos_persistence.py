"""The local Cosmos endpoint keeps its state across restarts when given a state file (as
`make run` does, under .stack/state), so contacts, events and the trigger's leases survive a
restart: the same documents with the same _rid / _etag, the LSN sequence continuing, and a change
feed continuation taken before the restart still valid after it; a state kept before the
endpoint used the service's resource ids is migrated. Without one (tests) nothing is kept. The
three tests of a kept state share one state and one restart (`restarted`: each on a database
of its own); the test without a state file starts an endpoint twice, in memory."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from azure.cosmos import ContainerProxy, CosmosClient, PartitionKey

from funcstack.cosmos import CosmosEndpoint, start_cosmos

pytestmark = pytest.mark.integration


@contextmanager
def endpoint(state_file: Path | None, tmp_path: Path) -> Iterator[CosmosEndpoint]:
    cosmos = start_cosmos(log_path=tmp_path / "cosmos.log", state_file=state_file)
    try:
        yield cosmos
    finally:
        cosmos.stop()


def container_of(cosmos: CosmosEndpoint, database_name: str = "db") -> ContainerProxy:
    client = CosmosClient.from_connection_string(cosmos.connection_string)  # verified: conftest
    database = client.create_database_if_not_exists(database_name)
    return database.create_container_if_not_exists("contacts", PartitionKey("/pk"))


def changes(container: ContainerProxy, continuation: str | None) -> tuple[list[str], str]:
    """One page of the feed, as the trigger reads it: by feed range from the beginning, or
    from a continuation (the SDK's token, which names the container by its _rid)."""
    kwargs: dict[str, Any] = {"max_item_count": 100}
    if continuation:
        kwargs["continuation"] = continuation
    else:
        kwargs["feed_range"] = next(iter(container.read_feed_ranges()))
        kwargs["start_time"] = "Beginning"
    pages = container.query_items_change_feed(**kwargs).by_page()
    page = next(pages, None)
    seen = [str(doc["id"]) for doc in page] if page is not None else []
    token = pages.continuation_token if seen else continuation  # type: ignore[attr-defined]
    assert isinstance(token, str)
    return seen, token


def lsn(container: ContainerProxy) -> int:
    return int(container.client_connection.last_response_headers["lsn"])


@dataclass(frozen=True)
class Restarted:
    """An endpoint started again on the state it kept, and what was written before."""

    cosmos: CosmosEndpoint
    state: Path
    first: dict[str, Any]
    token: str
    lsn_before: int


#: The database of the tests of a restart (the migration test's is the old state's `db`).
KEPT = "kept"


@pytest.fixture(scope="module")
def restarted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Restarted]:
    """One state file, read at one start and again after one restart (two starts for the
    module's three tests of a kept state, not two per test): a state kept before the endpoint
    used the service's resource-id encoding (`_version_1_state`: the migration test's, in its
    database `db`), to which the first start writes the documents and feed position of the
    first test below and the throughput of the second (in a database of their own, `KEPT`);
    then the endpoint is stopped and started again on what it kept."""
    tmp_path = tmp_path_factory.mktemp("kept")
    state = tmp_path / "state" / "cosmos.json"
    state.parent.mkdir(parents=True)
    state.write_text(json.dumps(_version_1_state(100)), encoding="utf-8")
    with endpoint(state, tmp_path) as cosmos:
        container = container_of(cosmos, KEPT)
        first = container.upsert_item({"id": "a", "pk": "p1", "n": 1})
        container.upsert_item({"id": "b", "pk": "p2", "n": 2})
        seen, token = changes(container, None)
        assert sorted(seen) == ["a", "b"]
        before = lsn(container)
        container.replace_throughput(700)
    with endpoint(state, tmp_path) as cosmos:
        yield Restarted(cosmos, state, first, token, before)


def test_documents_leases_and_feed_positions_survive_a_restart(restarted: Restarted) -> None:
    assert (restarted.state.parent / "cosmos").is_dir()  # state_file's earlier name: beside it
    container = container_of(restarted.cosmos, KEPT)
    first, token = restarted.first, restarted.token
    again = container.read_item("a", partition_key="p1")
    assert {k: again[k] for k in ("_rid", "_self", "_etag", "n")} == {
        k: first[k] for k in ("_rid", "_self", "_etag", "n")
    }
    assert changes(container, token)[0] == []  # nothing new since the saved position
    container.upsert_item({"id": "c", "pk": "p1", "n": 3})
    written = lsn(container)
    assert changes(container, token)[0] == ["c"]
    assert written > restarted.lsn_before  # the LSN sequence continues
    assert sorted(d["id"] for d in container.read_all_items()) == ["a", "b", "c"]


def test_without_a_state_file_nothing_is_kept(tmp_path: Path) -> None:
    with endpoint(None, tmp_path) as cosmos:
        container_of(cosmos).upsert_item({"id": "a", "pk": "p1"})
    with endpoint(None, tmp_path) as cosmos:
        assert list(container_of(cosmos).read_all_items()) == []


def test_throughput_survives_a_restart(restarted: Restarted) -> None:
    assert container_of(restarted.cosmos, KEPT).get_throughput().offer_throughput == 700


def _plain_base64_rid(*parts: bytes) -> str:
    """A resource id as @vercel/cosmosdb-server 1.0.1 wrote it: plain base64 ('/' included)."""
    return base64.b64encode(b"".join(parts)).decode("ascii")


def _version_1_state(documents: int) -> dict[str, Any]:
    """A state file as the endpoint wrote it before it used the service's resource-id
    encoding (version 1): database 1, container 1 (indexing policy as 1.0.1 stored it, no
    offers) and documents 1..n, with 1.0.1's ids."""
    db_bytes = ((1 << 8) | 0x80000000).to_bytes(4, "big")
    coll_bytes = db_bytes + (1 | 0x80000000).to_bytes(4, "big")
    db_rid, coll_rid = _plain_base64_rid(db_bytes), _plain_base64_rid(coll_bytes)
    db_self = f"/dbs/{db_rid}"
    coll_self = f"{db_self}/colls/{coll_rid}"
    docs = []
    for n in range(1, documents + 1):
        rid = _plain_base64_rid(coll_bytes, n.to_bytes(4, "little"), bytes(4))
        body = {
            "id": f"d{n}",
            "pk": "p1",
            "n": n,
            "_etag": f'"etag-{n}"',
            "_rid": rid,
            "_self": f"{coll_self}/docs/{rid}/",
            "_ts": 1700000000,
        }
        docs.append({"body": body, "lsn": n, "mtime": 1700000000000})
    collection = {
        "id": "contacts",
        "partitionKey": {"paths": ["/pk"], "kind": "Hash"},
        "indexingPolicy": {"indexingMode": "consistent"},
        "geospatialConfig": {},
        "_etag": '"coll"',
        "_rid": coll_rid,
        "_self": coll_self,
        "_ts": 1700000000,
    }
    database = {"id": "db", "_etag": '"db"', "_rid": db_rid, "_self": db_self, "_ts": 1700000000}
    return {
        "version": 1,
        "globalLsn": documents,
        "ridCount": 1,
        "dbs": [
            {
                "body": database,
                "ridCount": 1,
                "colls": [{"body": collection, "ridCount": documents, "docs": docs}],
            }
        ],
    }


def test_a_kept_state_with_the_old_resource_ids_is_migrated_on_load(restarted: Restarted) -> None:
    """Documents kept before the endpoint used the service's resource-id encoding (`restarted`
    started on such a state, then again on what it kept): their ids are the same bytes written
    without '/', so every SDK call given the item dict works; the container gets the service's
    settings and the 400 RU/s it would have had."""
    old = _version_1_state(100)
    old_rids = {d["body"]["id"]: d["body"]["_rid"] for d in old["dbs"][0]["colls"][0]["docs"]}
    assert any("/" in rid for rid in old_rids.values())  # what the SDK could not parse

    container = container_of(restarted.cosmos)
    items = list(container.read_all_items())
    assert len(items) == 100
    for item in items:
        assert item["_rid"] == old_rids[item["id"]].replace("/", "-")
        assert item["_etag"] == f'"etag-{item["n"]}"'  # nothing else changes
        assert container.read_item(item, partition_key="p1")["id"] == item["id"]
        container.replace_item(item, {"id": item["id"], "pk": "p1", "n": -item["n"]})
        container.delete_item(item, partition_key="p1")
    assert container.read()["indexingPolicy"]["includedPaths"] == [{"path": "/*"}]
    assert container.get_throughput().offer_throughput == 400
    created = container.create_item({"id": "new", "pk": "p1"})
    assert "/" not in created["_rid"]
