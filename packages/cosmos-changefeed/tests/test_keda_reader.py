"""Compatible by the other side's reader: KEDA's ``azure-cosmosdb`` scaler, written here in Python
from its source (kedacore/keda pkg/scalers/azure_cosmosdb_scaler.go, pull request 7557 at
3523eb599: ``queryLeases``, ``readChangeFeed``, ``estimatePartitionLag``), talks to the service's
REST API as it does -- master-key auth, a prefix query over the lease container, a change feed
read per lease scoped by ``x-ms-documentdb-partitionkeyrangeid: <LeaseToken>`` from
``If-None-Match: <ContinuationToken>`` -- and must find every lease the processor wrote and
compute, lease by lease, the lag the package's estimator computes (as .NET's does).

The scaler finds the leases by the processor's name and the account's short name (the host up to
its first dot): on Azure a name with a dot. funcstack's endpoint is an IPv6 literal, which the
lease ids hold in brackets (.NET's ``Uri.Host``) and the scaler does not (Go's ``Hostname()``):
there it finds none (the processor warns). So the processor and the estimator here read
funcstack's endpoint through a feed source that names the account as Azure would
(``AzureNamed``), and the scaler is given that name for its prefix -- every request still goes
to funcstack's endpoint."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from email.utils import formatdate
from typing import TYPE_CHECKING, Any

import pytest
from azure.cosmos import ContainerProxy
from deadlines import LOOPBACK, SHORT

from cosmos_changefeed import (
    ChangeFeedEstimator,
    ChangeFeedProcessor,
    CosmosFeedSource,
    LeaseContext,
)

if TYPE_CHECKING:
    from funcstack.cosmos import CosmosEndpoint

pytestmark = pytest.mark.integration

MakeContainer = Callable[..., ContainerProxy]
#: The account the leases are named after, as an Azure account's endpoint is spelled.
ACCOUNT = "https://relay-account.documents.azure.com:443/"


class AzureNamed(CosmosFeedSource):
    """The monitored container, its account named ``ACCOUNT`` (its lease prefix's host)."""

    @property
    def account_endpoint(self) -> str:
        return ACCOUNT


@dataclass
class KedaLease:
    id: str
    lease_token: str
    continuation: str
    owner: str


class KedaScaler:
    """The scaler's client, transcribed (Go -> Python), nothing added."""

    def __init__(
        self,
        endpoint: str,
        key: str,
        database: str,
        container: str,
        lease_database: str,
        lease_container: str,
        processor_name: str,
        ca_file: str,
        data_endpoint: str = ACCOUNT,
    ) -> None:
        self.endpoint, self.key = endpoint.rstrip("/"), key
        #: The data account's endpoint as the scaler's settings name it (its prefix's host).
        self.data_endpoint = data_endpoint
        self.database, self.container = database, container
        self.lease_database, self.lease_container = lease_database, lease_container
        self.processor_name = processor_name
        # verifying the certificate, as KEDA does (its trust store: here funcstack's authority)
        self._tls = ssl.create_default_context(cafile=ca_file)

    def _auth(self, verb: str, resource_link: str, date: str) -> str:
        # generateCosmosDBAuthToken
        text = f"{verb.lower()}\ndocs\n{resource_link}\n{date.lower()}\n\n"
        digest = hmac.new(base64.b64decode(self.key), text.encode(), hashlib.sha256).digest()
        return urllib.parse.quote(
            f"type=master&ver=1.0&sig={base64.b64encode(digest).decode()}", safe=""
        )

    def _request(
        self, method: str, link: str, headers: dict[str, str], body: bytes | None
    ) -> tuple[int, dict[str, str], bytes]:
        date = formatdate(usegmt=True)
        request = urllib.request.Request(  # noqa: S310 - the endpoint's https URL
            f"{self.endpoint}/{link}/docs", data=body, method=method
        )
        for name, value in {
            "x-ms-date": date,
            "x-ms-version": "2018-12-31",
            "Authorization": self._auth(method, link, date),
            **headers,
        }.items():
            request.add_header(name, value)
        try:
            with urllib.request.urlopen(request, context=self._tls) as response:  # noqa: S310 - https
                return response.status, dict(response.headers), response.read()
        except urllib.error.HTTPError as error:
            return error.code, dict(error.headers), error.read()

    def query_leases(self) -> list[KedaLease]:
        # processorName + the account's short name (the host up to its first dot) + "."
        host = urllib.parse.urlsplit(self.data_endpoint).hostname or self.data_endpoint
        prefix = self.processor_name + host.split(".", 1)[0] + "."
        body = json.dumps(
            {
                "query": "SELECT * FROM c WHERE STARTSWITH(c.id, @prefix)",
                "parameters": [{"name": "@prefix", "value": prefix}],
            }
        ).encode()
        status, _, raw = self._request(
            "POST",
            f"dbs/{self.lease_database}/colls/{self.lease_container}",
            {
                "Content-Type": "application/query+json",
                "x-ms-documentdb-isquery": "true",
                "x-ms-documentdb-query-enablecrosspartition": "true",
            },
            body,
        )
        assert status == 200, raw
        found = []
        for doc in json.loads(raw)["Documents"]:
            if doc.get("LeaseToken"):  # not .info / .lock
                found.append(
                    KedaLease(
                        doc["id"],
                        doc["LeaseToken"],
                        doc.get("ContinuationToken") or "",
                        doc.get("Owner") or "",
                    )
                )
        return found

    def partition_lag(self, lease: KedaLease) -> tuple[int, bool]:
        """estimatePartitionLag: (lag, split detected)."""
        headers = {
            "x-ms-documentdb-partitionkeyrangeid": lease.lease_token,
            "A-IM": "Incremental feed",
            "x-ms-max-item-count": "1",
        }
        if lease.continuation:
            headers["If-None-Match"] = lease.continuation
        status, response_headers, raw = self._request(
            "GET", f"dbs/{self.database}/colls/{self.container}", headers, None
        )
        lower = {k.lower(): v for k, v in response_headers.items()}
        if status == 410:
            assert lower.get("x-ms-substatus") == "1002", raw
            return 0, True
        if status == 304:
            return 0, False
        assert status == 200, raw
        items = json.loads(raw)["Documents"]
        if not items:
            return 0, False
        session = lower["x-ms-session-token"]
        parsed = session[session.index(":") + 1 :] if ":" in session else session
        segments = parsed.split("#")
        session_lsn = int(segments[1] if len(segments) >= 2 else segments[0])
        return session_lsn - int(items[0]["_lsn"]) + 1, False


@pytest.fixture
def scenario(
    cosmos: CosmosEndpoint, make_container: MakeContainer
) -> tuple[ContainerProxy, ContainerProxy, KedaScaler]:
    monitored, leases = make_container(4), make_container(path="/id")
    database = monitored.container_link.split("/")[1]
    assert cosmos.tls is not None
    ca_file = str(cosmos.tls.ca_file)
    keda = KedaScaler(
        cosmos.endpoint, cosmos.key, database, monitored.id, database, leases.id, "relay", ca_file
    )
    return monitored, leases, keda


def run_processor_until_all_checkpointed(monitored: ContainerProxy, leases: ContainerProxy) -> None:
    seen: set[str] = set()

    def handler(context: LeaseContext, changes: list[dict[str, Any]]) -> None:
        seen.update(doc["id"] for doc in changes)

    with ChangeFeedProcessor(
        AzureNamed(monitored),
        leases,
        processor_name="relay",
        instance_name="one",
        handler=handler,
        poll_delay=0.1,
        lease_acquire_interval=0.3,
    ) as processor:
        processor.wait_until_listening(LOOPBACK)
        ids = {f"d{i}" for i in range(40)}
        for doc_id in sorted(ids):
            monitored.create_item({"id": doc_id, "pk": doc_id})
        deadline = time.monotonic() + SHORT
        while not seen >= ids:
            assert time.monotonic() < deadline
            time.sleep(0.05)


def test_keda_finds_every_lease_and_computes_the_estimators_lag(
    scenario: tuple[ContainerProxy, ContainerProxy, KedaScaler],
) -> None:
    monitored, leases, keda = scenario
    run_processor_until_all_checkpointed(monitored, leases)
    for i in range(30):  # a backlog, while no processor runs
        monitored.create_item({"id": f"late{i}", "pk": f"late{i}"})
    estimator = ChangeFeedEstimator(AzureNamed(monitored), leases, processor_name="relay")
    estimates = {state.lease_token: state for state in estimator.get_estimates()}
    found = keda.query_leases()
    assert sorted(lease.lease_token for lease in found) == sorted(estimates) == ["0", "1", "2", "3"]
    assert all(lease.continuation for lease in found), "a lease was never checkpointed"
    lags = {lease.lease_token: keda.partition_lag(lease) for lease in found}
    assert {token: lag for token, (lag, _) in lags.items()} == {
        token: state.estimated_lag for token, state in estimates.items()
    }
    assert sum(lag for lag, _ in lags.values()) > 0
    assert all(state.instance_name is None for state in estimates.values())  # released


def test_a_split_lease_is_a_410_for_keda_and_counts_1_for_the_estimator_until_replaced(
    scenario: tuple[ContainerProxy, ContainerProxy, KedaScaler],
    cosmos: CosmosEndpoint,
) -> None:
    monitored, leases, keda = scenario
    run_processor_until_all_checkpointed(monitored, leases)
    database = monitored.container_link.split("/")[1]
    cosmos.split(database, monitored.id, "0")
    lease_0 = next(lease for lease in keda.query_leases() if lease.lease_token == "0")
    assert keda.partition_lag(lease_0) == (0, True)
    estimator = ChangeFeedEstimator(AzureNamed(monitored), leases, processor_name="relay")
    estimates = {state.lease_token: state.estimated_lag for state in estimator.get_estimates()}
    assert estimates["0"] == 1
