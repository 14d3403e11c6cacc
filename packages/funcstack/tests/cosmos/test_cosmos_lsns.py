"""Log sequence numbers per physical partition, as Azure keeps them: each partition key range
has its own LSN sequence, so a write in one range moves that range's session token, `lsn` and
change feed etag and no other's; a split's children go on from the parent's LSN (a
continuation taken before the split loses nothing and repeats nothing); each range's LSN is
kept across a restart, and a state kept with the account's one LSN (the endpoint before) goes
on from it. The estimators (.NET's ChangeFeedEstimatorIterator, KEDA's scaler,
cosmos-changefeed's) subtract a range's latest LSN (its session token) from a lease's first
unprocessed change: with one LSN for the account they read 3-4x the pending changes. The two
tests of a restart share one (`kept`: each wrote before it on a container no other touches,
each checks after it)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from azure.cosmos import ContainerProxy, DatabaseProxy
from azure.cosmos.exceptions import CosmosBatchOperationError

from funcstack.cosmos import CosmosEndpoint

from .conftest import doc
from .test_cosmos_partitions import four_ranges, raw, read_change_feed, write
from .test_persistence import FIXTURES, client_of, endpoint, kill

pytestmark = [
    pytest.mark.integration,
    pytest.mark.conformance,
]


def token_lsn(container: ContainerProxy) -> tuple[str, int]:
    """The range and LSN of the last answer's session token (one range)."""
    token = str(container.client_connection.last_response_headers["x-ms-session-token"])
    range_id, vector = token.split(":")
    version, lsn = vector.split("#")
    assert version == "-1"  # <pkrangeid>:<version>#<globalLSN>, a single-region account's
    return range_id, int(lsn)


def feed_of_range(endpoint: str, path: str, range_id: str, etag: str) -> tuple[int, str, str]:
    """A change feed read of one range as the SDKs send it: status, etag, `lsn` header."""
    status, _, headers = raw(
        endpoint,
        "GET",
        f"{path}/docs",
        {
            "A-IM": "Incremental feed",
            "If-None-Match": etag,
            "x-ms-documentdb-partitionkeyrangeid": range_id,
        },
    )
    return status, str(headers["etag"]), str(headers["lsn"])


def test_each_physical_partition_numbers_its_writes_with_its_own_lsns(
    local: CosmosEndpoint, database: DatabaseProxy
) -> None:
    container = four_ranges(database)
    written: dict[str, int] = {}
    keys: dict[str, list[str]] = {}
    for i in range(24):
        range_id = write(container, f"key-{i}", 0)
        written[range_id] = written.get(range_id, 0) + 1
        keys.setdefault(range_id, []).append(f"key-{i}")
        # the write's own LSN: the next of its range's, whatever the other ranges wrote
        assert token_lsn(container) == (range_id, written[range_id])
    assert len(written) == 4
    # each version's _lsn is its range's: every range numbered its documents 1, 2, ...
    items = list(container.query_items_change_feed(start_time="Beginning"))
    lsns = sorted(int(item["_lsn"]) for item in items)
    assert lsns == sorted(n for count in written.values() for n in range(1, count + 1))

    # a range's etag and lsn stay where they are while the others are written
    path = f"dbs/{database.id}/colls/{container.id}"
    quiet, busy = sorted(written)[:2]
    status, now, lsn = feed_of_range(local.endpoint, path, quiet, "*")
    assert (status, now, lsn) == (304, f'"{written[quiet]}"', str(written[quiet]))
    for key in keys[busy]:
        assert write(container, key, 1) == busy
        written[busy] += 1
    assert feed_of_range(local.endpoint, path, quiet, now) == (304, now, str(written[quiet]))
    assert feed_of_range(local.endpoint, path, busy, "*")[1] == f'"{written[busy]}"'


def test_a_batch_shares_one_lsn_and_a_failed_one_takes_none(
    local: CosmosEndpoint, container: ContainerProxy
) -> None:
    container.create_item(doc("first", "p"))
    _, before = token_lsn(container)
    container.execute_item_batch(
        [("create", (doc("b1", "p"),)), ("create", (doc("b2", "p"),))], partition_key="p"
    )
    assert token_lsn(container)[1] == before + 1
    batched = list(container.query_items_change_feed(start_time="Beginning"))
    assert {i["id"]: i["_lsn"] for i in batched if i["id"] != "first"} == {
        "b1": before + 1,
        "b2": before + 1,
    }
    with pytest.raises(CosmosBatchOperationError):
        container.execute_item_batch(
            [("create", (doc("b3", "p"),)), ("create", (doc("b1", "p"),))], partition_key="p"
        )
    container.read_item("first", partition_key="p")
    assert token_lsn(container)[1] == before + 1  # nothing of it kept, nor its LSN
    container.create_item(doc("after", "p"))
    assert token_lsn(container)[1] == before + 2


def test_a_split_s_children_go_on_from_the_parent_s_lsn(
    local: CosmosEndpoint, database: DatabaseProxy
) -> None:
    container = four_ranges(database)
    keys = [f"key-{i}" for i in range(16)]
    holder = {key: write(container, key, 0) for key in keys}
    seen, token = read_change_feed(container, None)
    assert len(seen) == len(keys)
    parent = holder[keys[0]]
    parent_lsn = sum(1 for key in keys if holder[key] == parent)
    children = local.split(database.id, container.id, parent)
    for key in (k for k in keys if holder[k] == parent):
        landed = write(container, key, 1)
        assert landed in children
        _, lsn = token_lsn(container)
        assert lsn > parent_lsn  # the child's LSNs go on from the parent's
    items, _ = read_change_feed(container, token)
    # read on from the continuation taken before the split: the new documents, once each
    assert sorted(i["id"] for i in items) == sorted(
        f"{k}-0001" for k in keys if holder[k] == parent
    )


@dataclass(frozen=True)
class Kept:
    """The endpoint started again on one kept state (one restart for the module's two tests of
    a restart), and what each test read and wrote before it was killed."""

    cosmos: CosmosEndpoint
    #: The account-LSN state's: the LSN it kept, the ids its change feed continuation read on,
    #: the first answer's LSN, the range and LSN of the write after it.
    feed_lsn: int
    since: list[str]
    first_lsn: int
    written: tuple[str, int]
    #: The ranges test's: its container (in a database of its own), each range's latest LSN.
    container: str
    latest: dict[str, int]


@pytest.fixture(scope="module")
def kept(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kept]:
    """cosmos-state-account-lsn/ (written by the endpoint when it kept one LSN for the
    account: fixtures/README.md says how) started once: the account-LSN test's reads and its
    first write on its `orders` container, then the ranges test's 12 writes on a container of
    4 ranges in a database of its own; killed (SIGKILL) at once after the last answer and
    started again on what it kept (a start and a restart for both tests, not one each)."""
    feed = json.loads((FIXTURES / "cosmos-state-account-lsn.feed.json").read_text())
    state = tmp_path_factory.mktemp("kept") / "state" / "cosmos"
    shutil.copytree(FIXTURES / "cosmos-state-account-lsn", state)
    with endpoint(state) as cosmos:
        client = client_of(cosmos)
        orders = client.get_database_client("db").get_container_client("orders")
        since = sorted(
            i["id"] for i in orders.query_items_change_feed(continuation=feed["continuation"])
        )
        orders.read_item("a2", partition_key="k2")
        first_lsn = token_lsn(orders)[1]
        orders.create_item({"id": "c0", "pk": "k0"})
        written = token_lsn(orders)
        container = four_ranges(client.create_database("ranges"))
        latest: dict[str, int] = {}
        for i in range(12):
            write(container, f"key-{i}", 0)
            range_id, lsn = token_lsn(container)
            latest[range_id] = lsn
        kill(cosmos)  # at once after the last answer
    with endpoint(state) as cosmos:
        yield Kept(cosmos, feed["lsn"], since, first_lsn, written, container.id, latest)


def test_each_range_s_lsn_is_kept_across_a_restart(kept: Kept) -> None:
    client = client_of(kept.cosmos)
    container = client.get_database_client("ranges").get_container_client(kept.container)
    latest = dict(kept.latest)
    for i in range(12):
        container.upsert_item(doc(f"key-{i}-0000", f"key-{i}", seq=1))
        range_id, lsn = token_lsn(container)
        latest[range_id] += 1
        assert lsn == latest[range_id]


def test_a_state_kept_with_one_lsn_for_the_account_goes_on_from_it(kept: Kept) -> None:
    """Every range of a state kept with the account's one LSN goes on from that LSN, a change
    feed continuation taken then reads on with nothing lost or repeated, and the ranges' LSNs
    written since (the journal's new lines) are kept too (`kept`'s first start, then its
    restart)."""
    assert kept.since == ["a0", *(f"b{i}" for i in range(8))]
    assert kept.first_lsn == kept.feed_lsn  # each range from the account's LSN
    range_id, lsn = kept.written
    assert lsn == kept.feed_lsn + 1
    orders = client_of(kept.cosmos).get_database_client("db").get_container_client("orders")
    orders.create_item({"id": "c1", "pk": "k0"})
    assert token_lsn(orders) == (range_id, kept.feed_lsn + 2)
    orders.create_item({"id": "c2", "pk": "k3"})
    other, lsn = token_lsn(orders)
    assert lsn == kept.feed_lsn + (3 if other == range_id else 1)
