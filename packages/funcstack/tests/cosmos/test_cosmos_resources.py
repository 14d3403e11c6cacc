"""Conformance of a Cosmos DB endpoint's resources through the synchronous azure-cosmos SDK:
resource ids, throughput (offers) and container settings (indexing policy).

Only documented Cosmos DB behaviour is asserted (tests of local-only behaviour say so and skip
elsewhere), so the suite also runs against the official emulator (COSMOS_ENDPOINT / COSMOS_KEY).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from azure.core.credentials import AccessToken
from azure.cosmos import (
    ContainerProxy,
    CosmosClient,
    DatabaseProxy,
    PartitionKey,
    ThroughputProperties,
    exceptions,
)

from .conftest import PK_PATH, Target, doc, unique

pytestmark = [
    pytest.mark.integration,
    pytest.mark.conformance,
]

#: What the service returns for a container created without an indexing policy.
DEFAULT_INDEXING_POLICY = {
    "indexingMode": "consistent",
    "automatic": True,
    "includedPaths": [{"path": "/*"}],
    "excludedPaths": [{"path": '/"_etag"/?'}],
}

# ----------------------------------------------------------------- resource ids


def test_over_200_items_are_read_replaced_and_deleted_through_their_item_dicts(
    container: ContainerProxy,
) -> None:
    """The SDK addresses an item given as a dict by its _self, which holds the item's _rid: a
    resource id is written in the service's base64 alphabet, where '/' never appears (from
    about the 63rd item of a container, plain base64 would put one there)."""
    created = [container.create_item(doc(f"item-{i:03d}", f"p{i % 7}", n=i)) for i in range(210)]
    assert not [item["_rid"] for item in created if "/" in item["_rid"]]
    for item in created:
        pk = item["partitionKey"]
        assert container.read_item(item, partition_key=pk)["n"] == item["n"]
        replaced = container.replace_item(item, {**doc(item["id"], pk), "n": -item["n"]})
        assert replaced["_rid"] == item["_rid"]
        container.delete_item(replaced, partition_key=pk)
    assert list(container.read_all_items()) == []


# ----------------------------------------------------------------- throughput (offers)


def test_container_manual_throughput_is_read_and_replaced(database: DatabaseProxy) -> None:
    container = database.create_container(unique("c"), PartitionKey(PK_PATH), offer_throughput=500)
    throughput = container.get_throughput()
    assert throughput.offer_throughput == 500
    assert throughput.auto_scale_max_throughput is None
    offer = throughput.properties
    assert offer is not None
    assert offer["offerResourceId"] == container.read()["_rid"]
    assert offer["resource"] == container.read()["_self"]

    replaced = container.replace_throughput(700)
    assert replaced.offer_throughput == 700
    assert container.get_throughput().offer_throughput == 700


def test_container_autoscale_throughput_is_read_and_replaced(database: DatabaseProxy) -> None:
    container = database.create_container(
        unique("c"),
        PartitionKey(PK_PATH),
        offer_throughput=ThroughputProperties(
            auto_scale_max_throughput=4000, auto_scale_increment_percent=0
        ),
    )
    throughput = container.get_throughput()
    assert throughput.auto_scale_max_throughput == 4000
    assert throughput.auto_scale_increment_percent == 0

    container.replace_throughput(ThroughputProperties(auto_scale_max_throughput=6000))
    after = container.get_throughput()
    assert after.auto_scale_max_throughput == 6000
    assert after.properties is not None
    assert after.properties["content"]["offerAutopilotSettings"]["maxThroughput"] == 6000


def test_database_manual_and_autoscale_throughput_are_read_and_replaced(
    client: CosmosClient,
) -> None:
    manual = client.create_database(unique("db"), offer_throughput=400)
    autoscale = client.create_database(
        unique("db"), offer_throughput=ThroughputProperties(auto_scale_max_throughput=5000)
    )
    try:
        assert manual.get_throughput().offer_throughput == 400
        assert manual.replace_throughput(800).offer_throughput == 800
        assert manual.get_throughput().offer_throughput == 800

        assert autoscale.get_throughput().auto_scale_max_throughput == 5000
        autoscale.replace_throughput(ThroughputProperties(auto_scale_max_throughput=7000))
        assert autoscale.get_throughput().auto_scale_max_throughput == 7000
    finally:
        client.delete_database(manual)
        client.delete_database(autoscale)


def test_a_container_without_throughput_of_its_own_gets_400_rus_unless_its_database_shares(
    client: CosmosClient,
    database: DatabaseProxy,
) -> None:
    dedicated = database.create_container(unique("c"), PartitionKey(PK_PATH))
    assert dedicated.get_throughput().offer_throughput == 400

    shared = client.create_database(unique("db"), offer_throughput=400)
    try:
        inside = shared.create_container(unique("c"), PartitionKey(PK_PATH))
        rid = inside.read()["_rid"]
        # it draws on the database's shared throughput: no offer of its own (read as a feed:
        # the SDK turns an offer query without results into a 404 of its own)
        offers = client.client_connection.ReadOffers()
        assert [o for o in offers if o["offerResourceId"] == rid] == []
    finally:
        client.delete_database(shared)


def test_throughput_outside_the_service_limits_is_refused(database: DatabaseProxy) -> None:
    container = database.create_container(unique("c"), PartitionKey(PK_PATH), offer_throughput=400)
    for invalid in (300, 450):  # below the minimum; not in steps of 100
        with pytest.raises(exceptions.CosmosHttpResponseError) as refused:
            container.replace_throughput(invalid)
        assert refused.value.status_code == 400
    assert container.get_throughput().offer_throughput == 400
    with pytest.raises(exceptions.CosmosHttpResponseError) as refused:
        database.create_container(unique("c"), PartitionKey(PK_PATH), offer_throughput=100)
    assert refused.value.status_code == 400


def test_an_offer_read_names_the_minimum_throughput(database: DatabaseProxy) -> None:
    """A GET of the offer answers the lowest RU/s it may be set to (x-ms-cosmos-min-throughput,
    as the REST reference documents)."""
    container = database.create_container(unique("c"), PartitionKey(PK_PATH), offer_throughput=400)
    offer = container.get_throughput().properties
    assert offer is not None
    connection = container.client_connection
    read = connection.ReadOffer(offer["_self"])
    assert read["content"]["offerThroughput"] == 400
    assert int(connection.last_response_headers["x-ms-cosmos-min-throughput"]) == 400


def test_an_offer_goes_with_its_container(client: CosmosClient, database: DatabaseProxy) -> None:
    container = database.create_container(unique("c"), PartitionKey(PK_PATH), offer_throughput=400)
    rid = container.read()["_rid"]

    def offers_of_container() -> list[dict[str, Any]]:
        return [o for o in client.client_connection.ReadOffers() if o["offerResourceId"] == rid]

    assert len(offers_of_container()) == 1
    database.delete_container(container)
    assert offers_of_container() == []


# ----------------------------------------------------------------- container settings


def test_a_container_without_an_indexing_policy_gets_the_services_default(
    container: ContainerProxy,
) -> None:
    properties = container.read()
    assert properties["indexingPolicy"] == DEFAULT_INDEXING_POLICY
    assert properties["conflictResolutionPolicy"]["mode"] == "LastWriterWins"
    assert properties["conflictResolutionPolicy"]["conflictResolutionPath"] == "/_ts"
    assert properties["geospatialConfig"] == {"type": "Geography"}


def test_a_partial_indexing_policy_is_completed_and_survives_a_read_modify_write(
    database: DatabaseProxy,
) -> None:
    container = database.create_container(
        unique("c"),
        PartitionKey(PK_PATH),
        indexing_policy={"excludedPaths": [{"path": "/secret/*"}]},
    )
    policy = container.read()["indexingPolicy"]
    assert policy["indexingMode"] == "consistent"
    assert policy["automatic"] is True
    assert policy["includedPaths"] == [{"path": "/*"}]
    assert {"path": "/secret/*"} in policy["excludedPaths"]
    assert {"path": '/"_etag"/?'} in policy["excludedPaths"]

    # as the SDK's index_management sample does: read the policy, change it, write it back
    policy["excludedPaths"].append({"path": "/notes/*"})
    database.replace_container(
        container, partition_key=PartitionKey(PK_PATH), indexing_policy=policy
    )
    again = container.read()["indexingPolicy"]
    assert {"path": "/notes/*"} in again["excludedPaths"]
    assert again["includedPaths"] == [{"path": "/*"}]


def test_a_composite_index_serves_its_order_and_the_exact_reverse(
    database: DatabaseProxy,
) -> None:
    container = database.create_container(
        unique("c"),
        PartitionKey(PK_PATH),
        indexing_policy={
            "compositeIndexes": [
                [{"path": "/a", "order": "ascending"}, {"path": "/b", "order": "descending"}]
            ]
        },
    )
    for i, (a, b) in enumerate([(1, 1), (1, 2), (2, 1), (2, 2)]):
        container.create_item(doc(f"i{i}", "p", a=a, b=b))

    def order(sql: str) -> list[tuple[int, int]]:
        rows = container.query_items(sql, partition_key="p")
        return [(row["a"], row["b"]) for row in rows]

    assert order("SELECT * FROM c ORDER BY c.a ASC, c.b DESC") == [(1, 2), (1, 1), (2, 2), (2, 1)]
    assert order("SELECT * FROM c ORDER BY c.a DESC, c.b ASC") == [(2, 1), (2, 2), (1, 1), (1, 2)]
    with pytest.raises(exceptions.CosmosHttpResponseError) as refused:
        order("SELECT * FROM c ORDER BY c.a ASC, c.b ASC")  # neither: no index serves it
    assert refused.value.status_code == 400


# ----------------------------------------------------------------- Entra ID (AAD) tokens


class StaticToken:
    """A token credential (azure-core's protocol) with a token the local endpoint does not
    check: the SDK sends it as it sends an Entra ID token (``type=aad``)."""

    def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
        expires = datetime.now(UTC) + timedelta(hours=1)
        return AccessToken("local-token", int(expires.timestamp()))


def test_management_operations_are_refused_to_entra_id_tokens(
    cosmos: Target,
    database: DatabaseProxy,
    container: ContainerProxy,
) -> None:
    """Data-plane RBAC (local only: the emulator takes no Entra ID tokens): items, queries and
    reads of metadata are allowed; creating or deleting databases and containers and changing
    throughput are control-plane operations, refused with 403 / sub-status 5300."""
    if cosmos.local is None:
        pytest.skip("the official emulator does not take Entra ID tokens")
    aad = CosmosClient(cosmos.endpoint, StaticToken(), **cosmos.client_options())
    items = aad.get_database_client(database.id).get_container_client(container.id)
    items.create_item(doc("a", "p1"))
    assert items.read_item("a", partition_key="p1")["id"] == "a"
    assert items.read()["id"] == container.id

    refusals: list[Callable[[], object]] = [
        lambda: aad.create_database(unique("db")),
        lambda: aad.delete_database(database.id),
        lambda: aad.get_database_client(database.id).create_container(
            unique("c"), PartitionKey(PK_PATH)
        ),
        lambda: aad.get_database_client(database.id).delete_container(container.id),
        lambda: items.replace_throughput(500),
    ]
    for operation in refusals:
        with pytest.raises(exceptions.CosmosHttpResponseError) as refused:
            operation()
        assert (refused.value.status_code, refused.value.sub_status) == (403, 5300)
    assert container.read()["id"] == container.id
