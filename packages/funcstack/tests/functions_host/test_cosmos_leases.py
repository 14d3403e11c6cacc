"""The Cosmos DB trigger on several instances: the change feed processor's lease protocol.

Instances share the leases evenly and a new one is handed its share; a killed instance's leases are
taken over once they expire; an instance paused past the expiry loses its lease, its checkpoint
is refused and the new owner delivers again from the last checkpoint; two triggers on one lease
container and prefix split the changes between them. Short intervals in the sample's binding
(acquire 1 s, renew 1 s, expiry 10 s: a host stalled a few seconds on a busy machine keeps its
leases); a container declared with four physical partitions gets four leases, as in Azure.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from azure.cosmos import ContainerProxy, CosmosClient, PartitionKey
from azure.cosmos.exceptions import CosmosResourceNotFoundError

from funcstack import deadlines
from funcstack.cosmos import PhysicalPartition, physical_partitions
from funcstack.deadlines import LOOPBACK, SHORT
from funcstack.scaleout import AppInstances, RestartPolicy
from funcstack.stack import LocalStack, ServicePorts

from .test_cosmos_trigger import Cosmos, cosmos, wait_for, write_docs

pytestmark = pytest.mark.integration
__all__ = ["cosmos"]  # the module's endpoint (a fixture)

HERE = Path(__file__).resolve().parent


@dataclass
class Scaled:
    """The sample Cosmos DB app, hosted by a stack of hosts only (the endpoint is the
    module's)."""

    stack: LocalStack
    app_dir: Path
    tmp: Path
    settings: dict[str, str]
    container: ContainerProxy
    leases_container: ContainerProxy
    cosmos: Cosmos

    def split(self) -> list[str]:
        """Split the container's physical partition holding the most documents now; the
        children's range ids."""
        return self.cosmos.split(self.settings["COSMOS_DATABASE"], "contacts")

    def physical_partitions(self) -> list[PhysicalPartition]:
        return physical_partitions(
            self.cosmos.endpoint, self.settings["COSMOS_DATABASE"], "contacts"
        )

    def logs(self) -> dict[str, str]:
        """Each instance's log, by instance (``app-1``, ...)."""
        return {path.stem: path.read_text() for path in (self.tmp / "stack").glob("app*.log")}

    def host(
        self, instances: int, *, restart: RestartPolicy | None = None, **extra: str
    ) -> AppInstances:
        """The app on ``instances`` instances; one that exits stays down unless ``restart``
        says how it comes back."""
        app = self.stack.host_app(
            self.app_dir,
            name="app",
            port=0,
            instances=instances,
            settings_file=self.tmp / "app.settings.json",
            overrides={**self.settings, **extra},
            restart=restart,
        )
        assert isinstance(app, AppInstances)
        return app

    def host_one(self, **extra: str) -> None:
        """One host (not scaled out), named ``app``; its log is ``app.log``."""
        self.stack.hosts.pop("app", None)
        self.stack.host_app(
            self.app_dir,
            name="app",
            port=0,
            settings_file=self.tmp / "app.settings.json",
            overrides={**self.settings, **extra},
        )

    def records(self) -> list[dict[str, Any]]:
        out = self.tmp / "out.jsonl"
        if not out.exists():
            return []
        return [json.loads(line) for line in out.read_text().splitlines() if line.strip()]

    def delivered(self, fn: str = "relay") -> list[tuple[str, str]]:
        """(instance, document id) per successful delivery of ``fn``."""
        return [
            (r["instance"], i)
            for r in self.records()
            if r["ok"] and r["fn"] == fn
            for i in r["ids"]
        ]

    def delivered_ids(self, fn: str = "relay") -> list[str]:
        return [doc for _, doc in self.delivered(fn)]

    def leases(self) -> list[dict[str, Any]]:
        try:
            found = list(
                self.leases_container.query_items(
                    "SELECT * FROM c", enable_cross_partition_query=True
                )
            )
        except CosmosResourceNotFoundError:
            return []
        return [doc for doc in found if "LeaseToken" in doc]

    def settled(self) -> bool:
        """Every lease stolen so far has been given up by the instance it was stolen from
        (until then, both may read it: at least once)."""
        logs = [path.read_text() for path in (self.tmp / "stack").glob("app*.log")]
        return sum(log.count("stolen from") for log in logs) == sum(
            log.count(" lost (lease") for log in logs
        )

    def owners(self) -> Counter[str]:
        """Leases per owning instance (an owner is ``<instance>:<pid>:<random>``)."""
        return Counter(
            str(lease.get("Owner") or "").split(":")[0] or "-" for lease in self.leases()
        )


#: The local endpoint's create header for a container's physical partitions (what
#: ``PhysicalPartitions`` in funcstack.json sends).
PARTITIONS_HEADER = "x-funcstack-physical-partitions"
#: ``@FOUR_PARTITIONS`` on a test: its container has four physical partitions (default one).
FOUR_PARTITIONS = pytest.mark.parametrize("scaled", [4], indirect=True, ids=["4-partitions"])


@pytest.fixture
def scaled(cosmos: Cosmos, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Scaled]:
    """The sample app's stack; its container has ``request.param`` physical partitions (1
    unless the test is parametrised indirectly, as ``FOUR_PARTITIONS``)."""
    partitions = int(getattr(request, "param", 1))
    app_dir = tmp_path / "app"
    app_dir.mkdir()
    (app_dir / "function_app.py").write_text((HERE / "sample_cosmos_app.py").read_text())
    (app_dir / "host.json").write_text(json.dumps({"version": "2.0"}))
    database = f"leases-{uuid.uuid4().hex[:8]}"
    client = cosmos.client()
    db = client.create_database_if_not_exists(database)
    container = db.create_container_if_not_exists(
        "contacts",
        partition_key=PartitionKey(path="/partitionKey"),
        default_ttl=-1,
        headers={PARTITIONS_HEADER: str(partitions)},
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
    stack = LocalStack(
        workdir=tmp_path / "stack",
        ports=ServicePorts.free(),
        with_servicebus=False,
        with_azurite=False,
    )
    try:
        yield Scaled(
            stack, app_dir, tmp_path, settings, container, db.get_container_client("leases"), cosmos
        )
    finally:
        stack.stop()
        try:
            client.delete_database(database)
        finally:
            client.close()


PKS = [f"p{i:02d}" for i in range(32)]  # spread over the four ranges


@FOUR_PARTITIONS
def test_two_instances_share_the_leases_evenly_and_a_third_is_handed_its_share(
    scaled: Scaled,
) -> None:
    app = scaled.host(2)
    wait_for(
        lambda: scaled.owners() == Counter({"app-1": 2, "app-2": 2}) and scaled.settled(),
        "two leases each",
    )
    docs = write_docs(scaled.container, PKS, per_pk=2)
    expected = sorted(d["id"] for d in docs)
    wait_for(lambda: sorted(scaled.delivered_ids()) == expected, "every document")
    assert sorted(scaled.delivered_ids()) == expected  # each exactly once: no lease read twice
    assert {instance for instance, _ in scaled.delivered()} == {"app-1", "app-2"}

    third = app.add_instance()
    wait_for(
        lambda: (
            sorted(scaled.owners().values()) == [1, 1, 2]
            and scaled.owners()["app-3"] == 1
            and scaled.settled()
        ),
        "the third instance's share",
    )
    # its lease's line is written just after the lease (which owners() saw): waited for. It
    # asked for one (handed over to it once its owner's batch in flight was checkpointed) or
    # took one given back; it took none from under its owner
    wait_for(
        lambda: any(
            how in ("handed over to it", "unowned")
            for _, how in ACQUIRED.findall(third.log_path.read_text())
        ),
        "the hand-over logged",
        LOOPBACK,
    )
    assert "stolen from" not in third.log_path.read_text()
    more = write_docs(scaled.container, [f"q{i:02d}" for i in range(32)], per_pk=2)
    expected += [d["id"] for d in more]
    wait_for(lambda: set(scaled.delivered_ids()) >= set(expected), "the later documents")
    assert "app-3" in {instance for instance, doc in scaled.delivered() if doc.startswith("q")}


#: A lease acquisition in a host's log (cosmos_changefeed's line): its token, and how it came
#: (``unowned``, ``handed over to it``, ``expired, was <owner>'s``, ``stolen from <owner>``).
ACQUIRED = re.compile(r": lease (\S+) acquired \(([^)]*)\)")
#: A lease given back by an instance over its fair share: its token.
GIVEN_BACK = re.compile(r": lease (\S+) given back: ")


#: Lease intervals of the kill test (ms: acquire, renew, expiry), and the restart delay it
#: gives the killed instance: past the expiry and LOOPBACK more (an acquire pass, its queries
#: answered on a slow machine too), so that the survivor's takeover comes first, as when an
#: instance takes longer to come back than its leases live.
KILL_INTERVALS_MS = "1000,1000,5000"
KILL_RESTART = RestartPolicy(delay=5.0 + LOOPBACK)


@FOUR_PARTITIONS
def test_a_killed_instance_comes_back_and_its_leases_move_as_documented(scaled: Scaled) -> None:
    """SIGKILL releases nothing: the survivor takes the leases at its first acquire after
    their expiry (5 s + up to 1 s here), and delivers what the killed one had not checkpointed
    again (nothing lost); the killed instance is restarted (its name, a new pid, a new owner)
    and takes its share back from the survivor as the fair share balances: holding none, it
    asks for one, which the survivor hands over (or it takes it once expired, where the
    survivor renews late), and the survivor, over its share, gives the rest back, which it
    takes unowned (or expired)
    (docs/functions-host.md, The lease protocol: Balancing, Stop; Scaled out)."""
    app = scaled.host(
        2,
        restart=KILL_RESTART,
        SAMPLE_SLEEP_SECONDS="0.3",
        SAMPLE_LEASE_INTERVALS_MS=KILL_INTERVALS_MS,
    )
    wait_for(
        lambda: scaled.owners() == Counter({"app-1": 2, "app-2": 2}) and scaled.settled(),
        "two leases each",
    )
    docs = write_docs(scaled.container, PKS, per_pk=3)
    wait_for(lambda: {i for i, _ in scaled.delivered()} == {"app-1", "app-2"}, "both deliver")
    victim = app.instance("app-1")
    killed_pid = victim.pid
    killed_at = time.monotonic()
    app.kill(victim)
    wait_for(lambda: scaled.owners() == Counter({"app-2": 4}), "the survivor owns every lease")
    takeover = time.monotonic() - killed_at
    assert victim.state == "restarting" and victim.last_exit == "killed by SIGKILL"
    # a lease's line is written just after its write, which owners() saw: waited for
    survivor = app.instance("app-2").log_path
    was_app1 = f"expired, was app-1:{killed_pid}:"
    wait_for(
        lambda: survivor.read_text().count(was_app1) >= 2, "app-2's takeovers logged", LOOPBACK
    )
    assert survivor.read_text().count(was_app1) == 2  # taken once expired, not stolen
    holding_all = survivor.stat().st_size  # what app-2 says from here on: as the sole owner
    wait_for(lambda: victim.state == "running", "app-1 back", KILL_RESTART.delay + SHORT)
    back = time.monotonic() - killed_at
    assert victim.pid != killed_pid and victim.restarts == 1
    wait_for(
        lambda: scaled.owners() == Counter({"app-1": 2, "app-2": 2}) and scaled.settled(),
        "two leases each again",
    )
    balanced = time.monotonic() - killed_at
    # The restarted instance's acquisitions: its log is app-1's, appended to (the first run's
    # lines come before the supervisor's note of the kill), and a line comes just after its
    # lease's write, which owners() saw: waited for.
    killed = f"app-1 was killed (killed by SIGKILL, asked): pid {killed_pid}"

    def back_acquired() -> list[tuple[str, str]]:
        _, noted, after = victim.log_path.read_text().partition(killed)
        found: list[tuple[str, str]] = ACQUIRED.findall(after) if noted else []
        return found if len(found) >= 2 else []

    taken = deadlines.wait_for(back_acquired, "the restarted app-1's leases logged", LOOPBACK)
    given_back = GIVEN_BACK.findall(survivor.read_bytes()[holding_all:].decode())
    # Holding none, it asks for one: the survivor hands it over (or, where the survivor's
    # renewal came more than the 5 s expiry late -- a loaded machine -- it takes it once
    # expired); the others: given back by the survivor, over its share once it counts app-1
    # (taken unowned), handed over, or expired. None is taken from under the survivor.
    handed = [token for token, how in taken if how == "handed over to it"]
    assert handed or any(how.startswith("expired, was app-2:") for _, how in taken), taken
    for token, how in taken:
        assert (
            how in ("handed over to it",)
            or how.startswith("expired, was app-2:")
            or (how == "unowned" and token in given_back)
        ), (token, how, given_back)
    wait_for(lambda: set(scaled.delivered_ids()) >= {d["id"] for d in docs}, "every document")
    more = write_docs(scaled.container, [f"r{i:02d}" for i in range(16)], per_pk=1)
    wait_for(lambda: set(scaled.delivered_ids()) >= {d["id"] for d in more}, "later documents")
    assert "app-1" in {inst for inst, doc in scaled.delivered() if doc.startswith("r")}
    print(
        f"after SIGKILL: takeover {takeover:.1f} s (expiry 5 s, acquire 1 s), back "
        f"{back:.1f} s (restart delay {KILL_RESTART.delay:g} s), balanced {balanced:.1f} s"
    )


def test_an_instance_paused_past_the_expiry_loses_its_lease_and_its_checkpoint_is_refused(
    scaled: Scaled,
) -> None:
    """One lease: app-1 delivers a batch and is paused (SIGSTOP) before its checkpoint; app-2
    takes the expired lease and delivers from the last checkpoint (the same batch again: at
    least once); resumed, app-1's checkpoint is refused and it stops reading that lease."""
    app = scaled.host(2, SAMPLE_SLEEP_SECONDS="3")
    wait_for(lambda: scaled.owners() == Counter({"app-1": 1}), "app-1 owns the lease")
    docs = write_docs(scaled.container, ["a", "b"], per_pk=5)  # two batches of five
    wait_for(lambda: len(scaled.delivered()) >= 5, "app-1's first batch")
    app.pause("app-1")  # in the function's 3 s sleep: delivered, not checkpointed
    batches = [r for r in scaled.records() if r["ok"] and r["fn"] == "relay"]
    assert {r["instance"] for r in batches} == {"app-1"}, "app-2 read the lease too"
    # the batch app-1 is paused in: its first, or on a loaded machine, where the pause can come
    # more than 3 s after the first batch was seen, its second
    unfinished: list[str] = batches[-1]["ids"]
    by_app1 = len(scaled.delivered())
    wait_for(lambda: scaled.owners() == Counter({"app-2": 1}), "app-2 took the expired lease")
    wait_for(lambda: set(scaled.delivered_ids()) >= {d["id"] for d in docs}, "every document")
    app.resume("app-1")
    log = app.instance("app-1").log_path
    wait_for(
        lambda: "lease 0 lost (lease 0: taken over by owner 'app-2:" in log.read_text(),
        "app-1's checkpoint refused",
    )
    by_app2 = [doc for instance, doc in scaled.delivered() if instance == "app-2"]
    # the uncheckpointed batch, again, from the checkpoint
    assert by_app2[: len(unfinished)] == unfinished
    assert [i for i, _ in scaled.delivered()].count("app-1") == by_app1  # nothing more
    assert scaled.owners() == Counter({"app-2": 1})


@FOUR_PARTITIONS
def test_two_triggers_on_one_lease_container_split_the_changes_between_them(
    scaled: Scaled,
) -> None:
    """An app adds a second trigger (``audit``) on the same container and lease container,
    without a prefix of its own: as in Azure, it is one more instance of the same processor and
    takes half the leases, so each change reaches one of the two functions; the host says so
    at start. With a prefix of its own, each function sees every change."""
    scaled.host_one()  # the store, initialised
    wait_for(lambda: len(scaled.leases()) == 4, "four leases")
    scaled.stack.stop_part("app")
    scaled.host_one(SAMPLE_SECOND_TRIGGER="true")

    def two_each() -> bool:  # two owners of two leases each (unowned leases are no owner's:
        # counted as one, two owned and two not yet looked like "two each", and the documents
        # written then all went to the trigger that took the other two a moment later)
        owners = Counter(lease.get("Owner") or None for lease in scaled.leases())
        return None not in owners and sorted(owners.values()) == [2, 2]

    wait_for(lambda: two_each() and scaled.settled(), "two leases each")
    docs = write_docs(scaled.container, PKS, per_pk=2)

    def both() -> list[str]:
        return sorted(scaled.delivered_ids("relay") + scaled.delivered_ids("audit"))

    wait_for(lambda: both() == sorted(d["id"] for d in docs), "every document, once")
    assert scaled.delivered_ids("relay") and scaled.delivered_ids("audit")
    assert not set(scaled.delivered_ids("relay")) & set(scaled.delivered_ids("audit"))
    log = scaled.stack.log_path("app").read_text()
    warning = [line for line in log.splitlines() if "compete for the same leases" in line]
    assert len(warning) == 1
    assert "functions relay and audit" in warning[0]
    assert "lease_container_prefix" in warning[0]

    scaled.stack.stop_part("app")
    scaled.host_one(SAMPLE_SECOND_TRIGGER="true", SAMPLE_SECOND_PREFIX="audit.")
    later = write_docs(scaled.container, [f"q{i:02d}" for i in range(8)], per_pk=1)
    ids = {d["id"] for d in later}
    wait_for(
        lambda: (
            ids <= set(scaled.delivered_ids("relay")) and ids <= set(scaled.delivered_ids("audit"))
        ),
        "each function, every change",
    )
    assert scaled.stack.log_path("app").read_text().count("compete for the same leases") == 1


def test_a_stacks_stop_lets_the_trigger_release_its_leases_before_cosmos_db_stops(
    tmp_path: Path,
) -> None:
    """``stop()`` stops the hosts, then the endpoints: the trigger's processor releases each
    lease it holds (its owner cleared, as the Azure host does at shutdown), which it could not
    do with the stack's Cosmos DB stopping beside it; a next start would wait out the
    leases' expiry."""
    stack = LocalStack(
        workdir=tmp_path / "stack",
        ports=ServicePorts.free(),
        with_servicebus=False,
        with_azurite=False,
    ).start()
    try:
        assert stack.cosmos is not None
        app_dir = tmp_path / "app"
        app_dir.mkdir()
        (app_dir / "function_app.py").write_text((HERE / "sample_cosmos_app.py").read_text())
        (app_dir / "host.json").write_text(json.dumps({"version": "2.0"}))
        client = CosmosClient(
            stack.cosmos.endpoint, credential=stack.cosmos.key, **stack.cosmos.client_options()
        )
        database = client.create_database(f"stop-{uuid.uuid4().hex[:8]}")
        database.create_container(
            "contacts",
            partition_key=PartitionKey(path="/partitionKey"),
            headers={PARTITIONS_HEADER: "2"},
        )
        stack.host_app(
            app_dir,
            name="app",
            port=0,
            settings_file=tmp_path / "app.settings.json",
            overrides={
                "FUNCTIONS_WORKER_RUNTIME": "python",
                "CosmosDBConnection": stack.cosmos.connection_string,
                "COSMOS_DATABASE": database.id,
                "COSMOS_CONTAINER": "contacts",
                "COSMOS_LEASE_CONTAINER": "leases",
                "SAMPLE_OUT": str(tmp_path / "out.jsonl"),
                "SAMPLE_FAIL_FLAG": str(tmp_path / "fail.flag"),
            },
        )
        log = stack.log_path("app")
        wait_for(lambda: log.read_text().count(" acquired (") >= 2, "the host holding both leases")
        client.close()
    finally:
        stack.stop()
    text = log.read_text()
    assert "not released" not in text, text[-2000:]
    assert text.count(" released") == 2, text[-2000:]
