"""The runner drives a Cosmos DB trigger from the change feed with lease documents.

Needs the local Cosmos endpoint (funcstack.cosmos._launcher), or any endpoint given by
COSMOS_ENDPOINT (+ COSMOS_KEY, COSMOS_VERIFY_TLS) such as the official emulator.
"""

from __future__ import annotations

import functools
import json
import os
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from azure.cosmos import ContainerProxy, CosmosClient, PartitionKey
from azure.cosmos.exceptions import CosmosResourceNotFoundError

from funcstack.cosmos import CosmosEndpoint, split_partition
from funcstack.deadlines import SHORT, DeadlineError
from funcstack.functions_host._cosmos_trigger.listener import VERIFY_TLS_SETTING
from funcstack.functions_host._launcher import RunningRunner, start_runner
from funcstack.services import free_port
from funcstack.stack import LocalStack, ServicePorts

pytestmark = pytest.mark.integration

HERE = Path(__file__).resolve().parent
EMULATOR_KEY = (
    "C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU9DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw=="
)
#: A non-event's window: a host that has watched its leases this long (its polls every 0.1 s)
#: delivered nothing again. Only a delivery fails the check, so a slow machine makes it no
#: flakier (it polls less meanwhile).
POLLED = 2.0


@dataclass
class Cosmos:
    endpoint: str
    key: str
    verify_tls: bool
    #: funcstack's own endpoint, which splits a physical partition when asked (Azure and the
    #: official emulator split on their own).
    local: bool = False
    #: what makes this process's clients verify it (funcstack's: ``client_options()``)
    options: dict[str, Any] = field(default_factory=dict)

    def client(self) -> CosmosClient:
        """A client of this process, verifying the endpoint's certificate (unless told not to:
        an external endpoint with COSMOS_VERIFY_TLS=false)."""
        return CosmosClient(self.endpoint, credential=self.key, **self.options)

    def tls_settings(self) -> dict[str, str]:
        """The app's and the host's settings turning verification off: none for funcstack's
        endpoint (its hosts trust its authority) or a verified one."""
        if self.local or self.verify_tls:
            return {}
        return {"COSMOS_VERIFY_TLS": "false", VERIFY_TLS_SETTING: "false"}

    def split(self, database: str, container: str, range_id: str | None = None) -> list[str]:
        """Split a physical partition of ``container`` now; the children's range ids."""
        if not self.local:
            pytest.skip("splits are asked of funcstack's endpoint only")
        return split_partition(self.endpoint, database, container, range_id)

    @property
    def connection_string(self) -> str:
        return f"AccountEndpoint={self.endpoint};AccountKey={self.key};"


@pytest.fixture(scope="module")
def cosmos(request: pytest.FixtureRequest) -> Cosmos:
    """COSMOS_ENDPOINT, else the run's endpoint (``shared_cosmos``): each test works
    on a database of its own and none stops, restarts or faults the endpoint (those that
    restart Cosmos DB on its state start a stack of their own, `KeptState`)."""
    endpoint = os.environ.get("COSMOS_ENDPOINT")
    if endpoint:
        verify = os.environ.get("COSMOS_VERIFY_TLS", "true").lower() != "false"
        key = os.environ.get("COSMOS_KEY", EMULATOR_KEY)
        return Cosmos(endpoint, key, verify, options={"connection_verify": verify})
    local: CosmosEndpoint = request.getfixturevalue("shared_cosmos")
    return Cosmos(
        local.endpoint, local.key, local.verify_tls, local=True, options=local.client_options()
    )


@dataclass
class TriggerEnv:
    cosmos: Cosmos
    app_dir: Path
    out: Path
    fail_flag: Path
    settings: dict[str, str]
    container: ContainerProxy
    leases_name: str
    client: CosmosClient
    log_path: Path

    def start(self, **extra: str) -> RunningRunner:
        return start_runner(
            app_dir=self.app_dir,
            settings={**self.settings, **extra},
            log_path=self.log_path,
        )

    def records(self) -> list[dict[str, Any]]:
        if not self.out.exists():
            return []
        return [json.loads(line) for line in self.out.read_text().splitlines() if line.strip()]

    def delivered_ids(self) -> list[str]:
        return [i for r in self.records() if r["ok"] for i in r["ids"]]

    def recreate_container(self, *, physical_partitions: int) -> None:
        """The monitored container again, empty, with that many physical partitions (the
        local endpoint's create header, what ``PhysicalPartitions`` in funcstack.json sends)."""
        db = self.client.get_database_client(self.settings["COSMOS_DATABASE"])
        db.delete_container(self.container)
        self.container = db.create_container(
            self.settings["COSMOS_CONTAINER"],
            partition_key=PartitionKey(path="/partitionKey"),
            default_ttl=-1,
            headers={"x-funcstack-physical-partitions": str(physical_partitions)},
        )

    def leases(self) -> list[dict[str, Any]]:
        db = self.client.get_database_client(self.settings["COSMOS_DATABASE"])
        container = db.get_container_client(self.leases_name)
        try:
            found = list(
                container.query_items("SELECT * FROM c", enable_cross_partition_query=True)
            )
        except CosmosResourceNotFoundError:  # the runner has not created it yet
            return []
        return [doc for doc in found if "LeaseToken" in doc]  # not the store's .info / .lock


@pytest.fixture
def trigger_env(cosmos: Cosmos, tmp_path: Path) -> Iterator[TriggerEnv]:
    app_dir = tmp_path / "app"
    app_dir.mkdir()
    (app_dir / "function_app.py").write_text((HERE / "sample_cosmos_app.py").read_text())
    (app_dir / "host.json").write_text(json.dumps({"version": "2.0"}))
    database = f"runner-{uuid.uuid4().hex[:8]}"
    client = cosmos.client()
    db = client.create_database_if_not_exists(database)
    container = db.create_container_if_not_exists(
        "contacts", partition_key=PartitionKey(path="/partitionKey"), default_ttl=-1
    )
    settings = {
        "FUNCTIONS_WORKER_RUNTIME": "python",
        "CosmosDBConnection": cosmos.connection_string,
        **cosmos.tls_settings(),
        "COSMOS_DATABASE": database,
        "COSMOS_CONTAINER": "contacts",
        "COSMOS_LEASE_CONTAINER": "leases",
        "SAMPLE_OUT": str(tmp_path / "out.jsonl"),
        "SAMPLE_FAIL_FLAG": str(tmp_path / "fail.flag"),
    }
    try:
        yield TriggerEnv(
            cosmos=cosmos,
            app_dir=app_dir,
            out=tmp_path / "out.jsonl",
            fail_flag=tmp_path / "fail.flag",
            settings=settings,
            container=container,
            leases_name="leases",
            client=client,
            log_path=tmp_path / "runner.log",
        )
    finally:
        try:
            client.delete_database(database)
        finally:
            client.close()


def wait_for(condition: Callable[[], bool], what: str, deadline: float = SHORT) -> None:
    """`funcstack.deadlines.wait_for`, checking every 0.05 s for a second, then every 0.25 s:
    most conditions query the lease container (the endpoint's work and the test's), and the
    long waits are for lease intervals of seconds (an expiry, an acquire pass)."""
    start = time.monotonic()
    end = start + deadline
    while not condition():
        now = time.monotonic()
        if now >= end:
            raise DeadlineError(f"{what}: not within {deadline:g} s (waited {now - start:.1f} s)")
        time.sleep(0.05 if now - start < 1.0 else 0.25)


def write_docs(container: ContainerProxy, pks: list[str], per_pk: int) -> list[dict[str, Any]]:
    """Interleave writes across partition keys; ids carry (pk, sequence)."""
    docs = []
    for seq in range(per_pk):
        for pk in pks:
            doc = {"id": f"{pk}-{seq:03d}", "partitionKey": pk, "type": "domainEvent", "seq": seq}
            container.create_item(doc)
            docs.append(doc)
    return docs


def assert_in_order_per_pk(ids: list[str]) -> None:
    first_seen: dict[str, list[int]] = {}
    seen: set[str] = set()
    for doc_id in ids:
        if doc_id in seen:
            continue
        seen.add(doc_id)
        pk, seq = doc_id.rsplit("-", 1)
        first_seen.setdefault(pk, []).append(int(seq))
    for pk, seqs in first_seen.items():
        assert seqs == sorted(seqs), f"out of order for {pk}: {seqs}"


def test_each_document_is_delivered_once_in_order_per_partition_key(
    trigger_env: TriggerEnv,
) -> None:
    runner = trigger_env.start()
    try:
        docs = write_docs(trigger_env.container, ["a", "b", "c"], per_pk=6)
        expected = {d["id"] for d in docs}
        wait_for(lambda: set(trigger_env.delivered_ids()) >= expected, "all documents")
        more = write_docs(trigger_env.container, ["d"], per_pk=3)
        expected |= {d["id"] for d in more}
        wait_for(lambda: set(trigger_env.delivered_ids()) >= expected, "later documents")
    finally:
        runner.stop()
    delivered = trigger_env.delivered_ids()
    assert sorted(delivered) == sorted(expected)  # each exactly once
    assert all(len(r["ids"]) <= 5 for r in trigger_env.records())  # max_items_per_invocation
    assert_in_order_per_pk(delivered)
    leases = trigger_env.leases()
    assert leases, "no lease documents"
    assert all(lease["ContinuationToken"] for lease in leases)


def test_failed_invocation_is_retried_with_the_same_batch_and_lease_stays(
    trigger_env: TriggerEnv,
) -> None:
    trigger_env.fail_flag.touch()
    runner = trigger_env.start()
    try:
        docs = write_docs(trigger_env.container, ["a"], per_pk=3)
        wait_for(lambda: bool(trigger_env.records()), "a first failed attempt")
        # the lease's position once the batch failed (none, or the start it was read from,
        # which the processor keeps in the lease): the failures must not move it
        at_first_failure = [lease.get("ContinuationToken") for lease in trigger_env.leases()]
        wait_for(lambda: len(trigger_env.records()) >= 3, "three failed attempts")
        leases_during_failure = trigger_env.leases()
        failed = [r for r in trigger_env.records() if not r["ok"]]
        assert len({tuple(r["ids"]) for r in failed}) == 1, "retries must reuse the same batch"
        during = [lease.get("ContinuationToken") for lease in leases_during_failure]
        assert during == at_first_failure, "a failed batch moved the lease's checkpoint"
        trigger_env.fail_flag.unlink()
        expected = {d["id"] for d in docs}
        wait_for(lambda: set(trigger_env.delivered_ids()) >= expected, "delivery after recovery")
        wait_for(
            lambda: all(lease.get("ContinuationToken") for lease in trigger_env.leases()),
            "checkpoint after success",
        )
    finally:
        runner.stop()
    ok = [r for r in trigger_env.records() if r["ok"]]
    assert ok[0]["ids"] == failed[0]["ids"]
    assert sorted(trigger_env.delivered_ids()) == sorted(expected)


def test_killed_runner_resumes_from_the_lease_without_skipping(trigger_env: TriggerEnv) -> None:
    pks = ["a", "b", "c", "d"]
    docs = write_docs(trigger_env.container, pks, per_pk=10)  # 40 docs, 8+ batches
    expected = {d["id"] for d in docs}
    runner = trigger_env.start(SAMPLE_SLEEP_SECONDS="0.5")
    try:
        wait_for(lambda: len(trigger_env.delivered_ids()) >= 10, "some batches")
    finally:
        runner.kill()
    delivered_before = set(trigger_env.delivered_ids())
    assert delivered_before < expected, "runner finished before it was killed; test is moot"
    runner = trigger_env.start()
    try:
        wait_for(lambda: set(trigger_env.delivered_ids()) >= expected, "resumed delivery")
    finally:
        runner.stop()
    delivered = trigger_env.delivered_ids()
    assert set(delivered) == expected  # nothing skipped
    records = [r for r in trigger_env.records() if r["ok"]]
    first_pid = records[0]["pid"]
    before = [r for r in records if r["pid"] == first_pid]
    after = [r for r in records if r["pid"] != first_pid]
    order = [d["id"] for d in docs]
    resumed_at = order.index(after[0]["ids"][0])
    last_batch_start = order.index(before[-1]["ids"][0])
    last_batch_end = order.index(before[-1]["ids"][-1])
    # resumed exactly at the checkpoint: the uncheckpointed last batch again, or the next one
    assert resumed_at in {last_batch_start, last_batch_end + 1}
    counts: dict[str, int] = {}
    for doc_id in delivered:
        counts[doc_id] = counts.get(doc_id, 0) + 1
    assert max(counts.values()) <= 2  # at most the uncheckpointed batch again
    assert len(delivered) - len(expected) <= 5
    assert_in_order_per_pk(delivered)
    pids = {r["pid"] for r in trigger_env.records()}
    assert len(pids) == 2


@pytest.mark.parametrize("max_retry", ["none", "2"])
def test_failed_batch_is_checkpointed_without_retry_policy_or_after_exhausted_retries(
    trigger_env: TriggerEnv, max_retry: str
) -> None:
    attempts = 1 if max_retry == "none" else 1 + int(max_retry)
    trigger_env.fail_flag.touch()
    # written before the start, so that the first read takes both (one batch)
    failed_docs = write_docs(trigger_env.container, ["a"], per_pk=2)
    runner = trigger_env.start(SAMPLE_MAX_RETRY=max_retry)
    try:
        wait_for(
            lambda: any(lease.get("ContinuationToken") for lease in trigger_env.leases()),
            "checkpoint of the failed batch",
        )
        trigger_env.fail_flag.unlink()
        later = write_docs(trigger_env.container, ["b"], per_pk=2)
        wait_for(lambda: set(trigger_env.delivered_ids()) >= {d["id"] for d in later}, "later docs")
    finally:
        runner.stop()
    failed = [r for r in trigger_env.records() if not r["ok"]]
    assert len(failed) == attempts
    assert all(r["ids"] == [d["id"] for d in failed_docs] for r in failed)
    assert sorted(trigger_env.delivered_ids()) == sorted(d["id"] for d in later)  # moved on
    log = trigger_env.log_path.read_text()
    assert ("no retry policy" in log) if max_retry == "none" else ("retries exhausted" in log)


def test_a_stuck_lease_does_not_hold_back_the_others(trigger_env: TriggerEnv) -> None:
    """Two physical partitions, a lease each: the batch of one keeps failing (retried for
    ever) while the other lease's batches are delivered. The removed setting that cut one
    partition's feed into N leases is not read, and the host says so."""
    trigger_env.recreate_container(physical_partitions=2)
    trigger_env.container.create_item({"id": "stuck-000", "partitionKey": "stuck", "seq": 0})
    pks = [f"p{i:02d}" for i in range(16)]
    docs = write_docs(trigger_env.container, pks, per_pk=3)
    runner = trigger_env.start(SAMPLE_FAIL_PK="stuck", FUNCTIONS_HOST_COSMOS_LEASES="4")
    try:
        wait_for(lambda: len(trigger_env.leases()) == 2, "two leases")
        # the batch with "stuck" fails forever; the other lease needs several batches of 5
        # (both waited for: on a busy machine either lease's first invocation may come later)
        wait_for(
            lambda: (
                len(trigger_env.delivered_ids()) >= 10
                and any(not r["ok"] for r in trigger_env.records())
            ),
            "the healthy lease's batches and the stuck one's failure",
        )
        failures = [r for r in trigger_env.records() if not r["ok"]]
    finally:
        runner.stop()
    assert failures and all("stuck-000" in r["ids"] for r in failures)
    assert "stuck-000" not in trigger_env.delivered_ids()
    assert set(trigger_env.delivered_ids()) <= {d["id"] for d in docs}
    assert len(trigger_env.leases()) == 2  # the partitions', not the setting's 4
    assert "the app setting FUNCTIONS_HOST_COSMOS_LEASES is no longer read" in (
        trigger_env.log_path.read_text()
    )


def test_a_lease_without_a_checkpoint_starts_from_now_at_each_start(
    trigger_env: TriggerEnv,
) -> None:
    """The default start: a lease that never saw a change starts from "now" -- the processor's
    start, as .NET 3.60+ anchors it -- at each start, and "now" is never written into it, so
    what was written while no host ran is skipped, as in Azure (the extension's processor
    checkpoints only after changes). And the host is ready only once its processor listens (its
    lease taken, its start fixed): what is written at once after the ready line is delivered
    (funcstack before: the ready line came before the lease was even acquired, and such a
    document was never delivered)."""
    before = write_docs(trigger_env.container, ["old"], per_pk=3)
    time.sleep(2.5)  # time passing: older than "now" can reach back (see the gap below)
    trigger_env.start(SAMPLE_FROM_BEGINNING="false").stop()  # ready: its processor listening
    assert "listening, lease(s) 0" in trigger_env.log_path.read_text()
    [lease] = trigger_env.leases()
    assert not lease.get("ContinuationToken"), "'now' was pinned into the lease"
    assert lease.get("Owner") is None, "not released at the stop"
    gap = write_docs(trigger_env.container, ["gap"], per_pk=3)  # while no host runs
    # "now" is the processor's start less a second, read by the service at a second's
    # granularity: what was written in the two seconds before a start may be in it. The gap
    # is made older than that, so only the restart can deliver it (a fast host start on a
    # loaded machine delivered it in CI). Time passing, not a verdict.
    time.sleep(2.5)
    runner = trigger_env.start(SAMPLE_FROM_BEGINNING="false")
    try:
        after = write_docs(trigger_env.container, ["new"], per_pk=3)  # at once
        wait_for(
            lambda: set(trigger_env.delivered_ids()) >= {d["id"] for d in after}, "new documents"
        )
    finally:
        runner.stop()
    assert not {d["id"] for d in [*before, *gap]} & set(trigger_env.delivered_ids())
    assert trigger_env.log_path.read_text().count("listening, lease(s) 0") == 2


def test_a_document_written_as_soon_as_the_host_is_ready_is_delivered(
    trigger_env: TriggerEnv,
) -> None:
    """Ready means listening (issue 67): the runner returns at the host's ready line, which
    comes once the trigger's processor has taken its leases and fixed their start ("now");
    a document written at once, on each of two physical partitions, is delivered."""
    trigger_env.recreate_container(physical_partitions=2)
    runner = trigger_env.start(SAMPLE_FROM_BEGINNING="false")
    try:
        docs = write_docs(trigger_env.container, [f"p{i:02d}" for i in range(8)], per_pk=1)
        wait_for(
            lambda: set(trigger_env.delivered_ids()) >= {d["id"] for d in docs},
            "the documents written at the ready line",
        )
    finally:
        runner.stop()
    log = trigger_env.log_path.read_text()
    assert log.index("listening, lease(s) 0, 1") < log.index("host listening on")


def test_shutdown_does_not_checkpoint_an_unfinished_batch(trigger_env: TriggerEnv) -> None:
    docs = write_docs(trigger_env.container, ["a"], per_pk=3)
    runner = trigger_env.start(SAMPLE_SLEEP_SECONDS="30")
    try:
        wait_for(lambda: len(trigger_env.delivered_ids()) == 3, "the batch in the function")
    finally:
        runner.stop()  # SIGTERM while the invocation sleeps
    assert runner.process.returncode == 0
    assert not any(lease.get("ContinuationToken") for lease in trigger_env.leases())
    runner = trigger_env.start()
    try:
        wait_for(lambda: len(trigger_env.delivered_ids()) == 6, "the batch delivered again")
    finally:
        runner.stop()
    assert trigger_env.delivered_ids() == [d["id"] for d in docs] * 2


# -- lease ids across restarts with kept state (issue 36) -----------------------------------------


@dataclass
class KeptState:
    """A project's kept state and logs, and the app with a Cosmos DB trigger, run as
    ``funcstack run --free-ports`` runs it: a new stack (new ports) per run, the same state."""

    tmp: Path
    app_dir: Path
    used_ports: set[int]

    def start(self, shared: CosmosEndpoint | None = None) -> LocalStack:
        """The stack's Cosmos DB endpoint on a port no earlier run of this test used (or,
        for a test that never starts it again, ``shared``: the run's)."""
        port = free_port()
        while port in self.used_ports:
            port = free_port()
        self.used_ports.add(port)
        stack = LocalStack(
            workdir=self.tmp / "stack",
            state_dir=self.tmp / "state",
            ports=ServicePorts(cosmos=port),
            shared_cosmos=shared,
            with_servicebus=False,
            with_azurite=False,
        )
        return stack.start()

    def host(self, stack: LocalStack) -> RunningRunner:
        port = free_port()
        while port in self.used_ports:
            port = free_port()
        self.used_ports.add(port)
        settings = {
            "FUNCTIONS_WORKER_RUNTIME": "python",
            "CosmosDBConnection": stack.cosmos_connection_string,
            "COSMOS_DATABASE": "kept",
            "COSMOS_CONTAINER": "contacts",
            "COSMOS_LEASE_CONTAINER": "leases",
            "SAMPLE_OUT": str(self.out),
            "SAMPLE_FAIL_FLAG": str(self.tmp / "fail.flag"),
        }
        return stack.run_host("app", self.app_dir, settings=settings, port=port)

    @property
    def out(self) -> Path:
        return self.tmp / "out.jsonl"

    def delivered_ids(self) -> list[str]:
        if not self.out.exists():
            return []
        records = [json.loads(line) for line in self.out.read_text().splitlines() if line]
        return [i for r in records if r["ok"] for i in r["ids"]]

    def log(self) -> str:
        return (self.tmp / "stack" / "app.log").read_text()


@pytest.fixture
def kept(tmp_path: Path) -> KeptState:
    app_dir = tmp_path / "app"
    app_dir.mkdir()
    (app_dir / "function_app.py").write_text((HERE / "sample_cosmos_app.py").read_text())
    (app_dir / "host.json").write_text(json.dumps({"version": "2.0"}))
    return KeptState(tmp_path, app_dir, set())


def container(stack: LocalStack, name: str) -> ContainerProxy:
    assert stack.cosmos is not None
    client = CosmosClient.from_connection_string(
        stack.cosmos_connection_string, **stack.cosmos.client_options()
    )
    database = client.create_database_if_not_exists("kept")
    return database.create_container_if_not_exists(
        name, partition_key=PartitionKey(path="/partitionKey" if name == "contacts" else "/id")
    )


def all_leases(stack: LocalStack) -> list[dict[str, Any]]:
    """The lease documents (not the processor's ``.info`` / ``.lock``)."""
    return [
        doc
        for doc in container(stack, "leases").query_items(
            "SELECT * FROM c", enable_cross_partition_query=True
        )
        if "LeaseToken" in doc
    ]


def azure_lease_prefix(stack: LocalStack) -> str:
    """``<account host>_<database rid>_<container rid>..`` as the .NET change feed processor
    forms it (``GetLeasePrefix``: ``Uri.Host``, no port, an IPv6 literal in brackets; the
    database rid read from the service, not derived here)."""
    monitored = container(stack, "contacts")
    assert stack.cosmos is not None
    client = CosmosClient.from_connection_string(
        stack.cosmos_connection_string, **stack.cosmos.client_options()
    )
    database_rid = client.get_database_client("kept").read()["_rid"]
    # Uri.Host keeps an IPv6 literal's brackets (funcstack's endpoint is [::ffff:127.0.0.1])
    host = urlsplit(stack.cosmos_endpoint).netloc.rsplit(":", 1)[0]
    return f"{host}_{database_rid}_{monitored.read()['_rid']}.."


def wait_for_polls(kept: KeptState, runs: int) -> None:
    """The host of the ``runs``-th run watches its leases, and has polled them for `POLLED`
    (the sample's poll delay is 0.1 s): the window of a non-event, nothing delivered again."""
    wait_for(
        lambda: kept.log().count("cosmos trigger relay: watching") >= runs,
        f"run {runs} watching its leases",
    )
    time.sleep(POLLED)


def test_a_restart_on_other_ports_with_kept_state_delivers_nothing_again(
    kept: KeptState,
) -> None:
    stack = kept.start()
    try:
        docs = write_docs(container(stack, "contacts"), ["a", "b"], per_pk=3)
        kept.host(stack)
        wait_for(lambda: set(kept.delivered_ids()) >= {d["id"] for d in docs}, "delivery")
        wait_for(
            lambda: all(lease.get("ContinuationToken") for lease in all_leases(stack)),
            "the checkpoint",
        )
        first_run = [lease["id"] for lease in all_leases(stack)]
    finally:
        stack.stop()
    assert sorted(kept.delivered_ids()) == sorted(d["id"] for d in docs)

    stack = kept.start()  # the same state, the endpoint and the host on other ports
    try:
        runner = kept.host(stack)  # ready: its lease acquired and its start fixed
        assert runner.log_path is not None
        log = runner.log_path  # the log of both runs
        wait_for_polls(kept, runs=2)
        assert sorted(kept.delivered_ids()) == sorted(d["id"] for d in docs), "re-delivered"
        leases = all_leases(stack)
        assert [lease["id"] for lease in leases] == first_run  # the same lease, still current
        assert [lease["id"] for lease in leases] == [f"{azure_lease_prefix(stack)}0"]
        marker = write_docs(container(stack, "contacts"), ["later"], per_pk=1)
        wait_for(lambda: "later-000" in kept.delivered_ids(), "a later document")
        # the log says where it started: from its lease, not "no checkpoint" (issue 48); the
        # second run's line may come before its ready line (ready means listening)
        acquired = [line for line in log.read_text("utf-8").splitlines() if " acquired (" in line]
        assert len(acquired) == 2 and "resumed from its lease" in acquired[1], acquired
    finally:
        stack.stop()
    delivered = kept.delivered_ids()
    assert sorted(delivered) == sorted(d["id"] for d in [*docs, *marker])  # each once


def test_leases_an_older_funcstack_wrote_with_the_port_are_adopted_then_deleted(
    kept: KeptState, cosmos: Cosmos, request: pytest.FixtureRequest
) -> None:
    """An upgrade: the lease of the previous run, with the endpoint's port in its id (the
    format of older funcstack versions), gives its continuation to the new lease -- an EPK
    lease over its range, the form .NET gives a range it has no id for; it and the stale lease
    of a run before it are deleted; nothing is delivered again. The host is started again, the
    endpoint never: on the run's (its database dropped after)."""
    if not cosmos.local:
        pytest.skip("the stack's endpoint is funcstack's")
    shared: CosmosEndpoint = request.getfixturevalue("shared_cosmos")
    stack = kept.start(shared)
    try:
        leases = container(stack, "leases")
        docs = write_docs(container(stack, "contacts"), ["a", "b"], per_pk=3)
        kept.host(stack)
        wait_for(lambda: set(kept.delivered_ids()) >= {d["id"] for d in docs}, "delivery")
        wait_for(
            lambda: all(lease.get("ContinuationToken") for lease in all_leases(stack)),
            "the checkpoint",
        )
        stack.stop_part("app")
        [current] = [
            {k: v for k, v in lease.items() if not k.startswith("_")} for lease in all_leases(stack)
        ]
        leases.delete_item(current["id"], partition_key=current["id"])
        info = current["id"].removesuffix("..0") + ".info"  # older versions wrote no marker
        leases.delete_item(info, partition_key=info)
        legacy = f"127.0.0.1:{stack.cosmos_endpoint.rsplit(':', 1)[1].strip('/')}"
        older = {**current, "version": 1, "LeaseToken": "-FF"}  # as older versions wrote it
        leases.create_item({**older, "id": f"{legacy}_kept_contacts..-FF"})
        leases.create_item(
            {
                **older,
                "id": "127.0.0.1:8081_kept_contacts..-FF",
                "ContinuationToken": None,
                "timestamp": "2020-01-01T00:00:00+00:00",
            }
        )
        stack.hosts.pop("app")
        kept.host(stack)
        wait_for_polls(kept, runs=2)
        assert sorted(kept.delivered_ids()) == sorted(d["id"] for d in docs), "re-delivered"
        assert [lease["id"] for lease in all_leases(stack)] == [f"{azure_lease_prefix(stack)}-FF"]
    finally:
        stack.stop()
        with CosmosClient(shared.endpoint, shared.key, **shared.client_options()) as client:
            client.delete_database("kept")
    adopted = [line for line in kept.log().splitlines() if "older funcstack" in line]
    assert len(adopted) == 1, adopted


def test_documents_reach_the_function_as_the_azure_host_hands_them_over(
    trigger_env: TriggerEnv,
) -> None:
    """The Azure host reads the change feed with Newtonsoft.Json, which re-formats date-like
    strings (Azure/Azure-Functions#1399); FUNCTIONS_HOST_COSMOS_VERBATIM_DOCUMENTS=true opts
    out."""
    committed = {
        "at": "2019-01-01T00:00:01.0000000Z",
        "offset": "2019-01-01T10:00:05.120000+02:00",
        "body": '{"at":"2019-01-01T00:00:01.0000000Z"}',
        "day": "2019-01-01",
    }

    def received(doc_id: str) -> dict[str, Any]:
        found = [
            d
            for r in trigger_env.records()
            if r["ok"]
            for d in r.get("documents", [])
            if d["id"] == doc_id
        ]
        return found[0] if found else {}

    for verbatim, doc_id in ((False, "as-azure"), (True, "verbatim")):
        runner = trigger_env.start(
            SAMPLE_RECORD_DOCUMENTS="true",
            FUNCTIONS_HOST_COSMOS_VERBATIM_DOCUMENTS=str(verbatim).lower(),
        )
        try:
            trigger_env.container.create_item({"id": doc_id, "partitionKey": "p", **committed})
            wait_for(functools.partial(lambda i: bool(received(i)), doc_id), f"document {doc_id}")
        finally:
            runner.stop()
    as_azure, verbatim_doc = received("as-azure"), received("verbatim")
    assert {k: as_azure[k] for k in committed} == {
        "at": "2019-01-01T00:00:01Z",
        "offset": "2019-01-01T08:00:05.12+00:00",
        "body": '{"at":"2019-01-01T00:00:01.0000000Z"}',
        "day": "2019-01-01",
    }
    assert {k: verbatim_doc[k] for k in committed} == committed
