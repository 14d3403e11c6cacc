"""The local Cosmos endpoint keeps its state across restarts when given a state file (as
`make run` does, under .stack/state), so contacts, events and the trigger's leases survive a
restart: the same documents with the same _rid / _etag, the LSN sequence continuing, and a change
feed continuation taken before the restart still valid after it. Without one (tests) nothing
is kept."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from azure.cosmos import ContainerProxy, CosmosClient, PartitionKey

from emulators.cosmos.launcher import CosmosEndpoint, start_cosmos

pytestmark = [
    pytest.mark.integration,
    pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning"),
]


@contextmanager
def endpoint(state_file: Path | None, tmp_path: Path) -> Iterator[CosmosEndpoint]:
    cosmos = start_cosmos(log_path=tmp_path / "cosmos.log", state_file=state_file)
    try:
        yield cosmos
    finally:
        cosmos.stop()


def container_of(cosmos: CosmosEndpoint) -> ContainerProxy:
    client = CosmosClient.from_connection_string(cosmos.connection_string,
                                                 connection_verify=cosmos.verify_tls)
    database = client.create_database_if_not_exists("db")
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


def test_documents_leases_and_feed_positions_survive_a_restart(tmp_path: Path) -> None:
    state = tmp_path / "state" / "cosmos.json"
    with endpoint(state, tmp_path) as cosmos:
        container = container_of(cosmos)
        first = container.upsert_item({"id": "a", "pk": "p1", "n": 1})
        container.upsert_item({"id": "b", "pk": "p2", "n": 2})
        seen, token = changes(container, None)
        assert sorted(seen) == ["a", "b"]
        before = lsn(container)
    assert state.exists()

    with endpoint(state, tmp_path) as cosmos:
        container = container_of(cosmos)
        again = container.read_item("a", partition_key="p1")
        assert {k: again[k] for k in ("_rid", "_self", "_etag", "n")} == {
            k: first[k] for k in ("_rid", "_self", "_etag", "n")}
        assert changes(container, token)[0] == []  # nothing new since the saved position
        container.upsert_item({"id": "c", "pk": "p1", "n": 3})
        written = lsn(container)
        assert changes(container, token)[0] == ["c"]
        assert written > before  # the LSN sequence continues
        assert sorted(d["id"] for d in container.read_all_items()) == ["a", "b", "c"]


def test_without_a_state_file_nothing_is_kept(tmp_path: Path) -> None:
    with endpoint(None, tmp_path) as cosmos:
        container_of(cosmos).upsert_item({"id": "a", "pk": "p1"})
    with endpoint(None, tmp_path) as cosmos:
        assert list(container_of(cosmos).read_all_items()) == []
