"""Cosmos DB trigger: the monitored container's change feed, shared between the app's
instances by the change feed processor's lease protocol.

As the Cosmos DB extension (``CosmosDBTriggerListener`` in Azure/azure-webjobs-sdk-extensions)
drives the .NET SDK v3 change feed processor (``ChangeFeedProcessorCore``, ``BootstrapperCore``
in Azure/azure-cosmos-dotnet-v3, 3.41):

* Each trigger listener is a processor instance with an owner name of its own, new at each
  start (the extension's ``Guid``; funcstack prefixes it with ``WEBSITE_INSTANCE_ID`` and the
  pid, so a lease's owner names its instance). Its lease prefix is the binding's
  ``leaseContainerPrefix`` (the processor's name).
* Start: the lease container (partition key ``/id``, TTL on) is created if missing when the
  binding says ``createLeaseContainerIfNotExists``; then, unless the store's ``.info`` marker
  exists, the instance that wins ``.lock`` (30 s ``ttl``) creates a lease per feed range and
  the marker (the others wait 15 s and look again) (``BootstrapperCore``); after that, leases
  change only by splits.
* Leases are shared by equal-partitions balancing every ``leaseAcquireInterval``, renewed every
  ``leaseRenewInterval``, and expire after ``leaseExpirationInterval`` without renewal (13 s,
  17 s, 60 s by default; milliseconds in the binding) (``lease_balancer``); each owned
  lease is processed on its own and concurrently: a batch that keeps failing holds back only its
  lease (``lease_processing``); every lease update is conditional (``If-Match``) and a
  checkpoint after the lease was lost is refused (``lease_store``). A clean stop
  releases the leases; a killed instance's leases are taken over once they expire.
* A lease's continuation moves only after an invocation finished -- successfully, or
  unsuccessfully once the retry policy is exhausted (or when there is none): then the host logs
  an error and checkpoints anyway. A failed invocation is retried with the same batch per the
  function's retry policy (``-1`` = forever), with the host's randomized exponential back-off;
  the retry count is kept in memory. On shutdown an unfinished batch is not checkpointed.
* A lease without a checkpoint starts from "now" (at the first read after it is acquired),
  unless ``startFromBeginning`` or ``startFromTime`` says otherwise; "now" is never written
  into the lease, so changes written while no instance ran are skipped (``options``
  reads the start options as the extension does; a listener that refuses to start says why).
* Two Cosmos DB triggers of the app on the same monitored container, lease container and
  prefix compete for the same leases, as in Azure; the runner says so at start
  (``options.shared_leases``).
* The documents reach the worker as one JSON array (``TypedData.json``), written as the Azure
  host writes them: its Newtonsoft.Json reading re-formats date-like strings
  (``_newtonsoft``); the local-only app setting ``FUNCTIONS_HOST_COSMOS_VERBATIM_DOCUMENTS=true``
  hands them over verbatim instead.
* A lease per physical partition of the monitored container when the store is initialised;
  when a partition splits, its lease is replaced by child leases that start where it was, its
  owner acquires them and balancing spreads them (``lease_split``, as
  ``PartitionSynchronizerCore.HandlePartitionGoneAsync``); a read shows the split
  (``continuation``).
* Lease ids as the change feed processor forms them (``GetLeasePrefix``):
  ``<leaseContainerPrefix><account Uri.Host>_<database rid>_<container rid>..<lease token>``:
  no port, so a local endpoint restarted on another port (``--free-ports``) with its kept
  state (which keeps the rids) finds its leases. Leases an older funcstack wrote, with the
  endpoint's port and the names in the id (``<prefix><host>:<port>_<database>_<container>..``),
  are adopted when the store is initialised: the continuation of the latest written one for a
  range goes to the new lease, then all of them are deleted (one log line).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import os
import re
import socket
import uuid
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from azure.cosmos import PartitionKey
from azure.cosmos.aio import ContainerProxy, CosmosClient, DatabaseProxy

from funcstack.functions_host._config import is_truthy
from funcstack.functions_host._connections import VERIFY_TLS_SETTING as VERIFY_TLS_SETTING
from funcstack.functions_host._connections import cosmos_client_for
from funcstack.functions_host._cosmos_trigger import continuation as continuations
from funcstack.functions_host._cosmos_trigger.lease_balancer import LoadBalancer
from funcstack.functions_host._cosmos_trigger.lease_processing import (
    Page,
    PartitionController,
    ProcessingOptions,
)
from funcstack.functions_host._cosmos_trigger.lease_split import PartitionSynchronizer
from funcstack.functions_host._cosmos_trigger.lease_store import Lease, LeaseStore, range_token
from funcstack.functions_host._cosmos_trigger.options import CosmosTriggerOptions
from funcstack.functions_host._functions import FunctionSpec
from funcstack.functions_host._language_worker import LanguageWorker
from funcstack.functions_host._newtonsoft import VERBATIM_SETTING, host_documents, host_time_zone
from funcstack.functions_host._retry import invoke_with_retries
from funcstack.functions_host._rpc import protos

logger = logging.getLogger("funcstack.functions_host.cosmos")

#: A local-only app setting that cut a one-partition feed into N leases, removed: physical
#: partitions give the leases now; the host says so when it is still set.
REMOVED_LEASES_SETTING = "FUNCTIONS_HOST_COSMOS_LEASES"
#: ``BootstrapperCore.DefaultLockTime`` / ``DefaultSleepTime``.
INIT_LOCK_SECONDS = 30.0
INIT_SLEEP_SECONDS = 15.0
_STARTUP_RETRY_SECONDS = 2.0
_STARTUP_TIMEOUT_SECONDS = 30.0


def new_owner() -> str:
    """A processor instance's name, new at each start (the extension's ``Guid.NewGuid()``),
    prefixed with the instance (``WEBSITE_INSTANCE_ID``, else the machine) and the pid."""
    instance = os.environ.get("WEBSITE_INSTANCE_ID") or socket.gethostname()
    return f"{instance}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class CosmosTriggerListener:
    """Feeds one function from the change feed of its monitored container."""

    def __init__(
        self,
        spec: FunctionSpec,
        worker: LanguageWorker,
        *,
        timeout: Callable[[], float | None] = lambda: None,
        owner: str | None = None,
    ) -> None:
        self.spec = spec
        self.options = CosmosTriggerOptions.from_binding(spec.trigger)
        self._worker = worker
        self._timeout = timeout
        self.owner = owner or new_owner()
        self._verbatim = is_truthy(os.environ.get(VERBATIM_SETTING, "false"))
        self._zone = host_time_zone(dict(os.environ))
        self._clients: list[CosmosClient] = []
        self._task: asyncio.Task[None] | None = None
        # Page reads share one client (and its last response headers): one at a time.
        # Deliveries, the slow part, run concurrently per lease.
        self._read_lock = asyncio.Lock()
        self._monitored: ContainerProxy | None = None
        self._store: LeaseStore | None = None
        self._controller: PartitionController | None = None
        # Ready (``wait_listening``): the first balancing round ended, and each lease held then
        # read once (its start position fixed: a "now" lease takes it at its first read).
        self._listening = asyncio.Event()  # listening, or unable to start (why: ``_unable``)
        self._unable: str | None = None
        self._read_once: set[str] = set()
        self._positioning: asyncio.Task[None] | None = None

    @property
    def owned(self) -> list[str]:
        """The tokens of the leases this listener processes now."""
        return self._controller.owned if self._controller is not None else []

    def start(self) -> None:
        if self.options.start_error is not None:
            # the host keeps running; this function's listener does not (Azure: the listener
            # fails in StartAsync and the host logs it)
            logger.error(
                "The listener for function 'Functions.%s' was unable to start: %s",
                self.spec.name,
                self.options.start_error,
            )
            self._unable = self.options.start_error  # never listens; the host goes on
            self._listening.set()
            return
        if os.environ.get(REMOVED_LEASES_SETTING):
            logger.warning(
                "cosmos trigger %s: the app setting %s is no longer read (a lease per physical "
                "partition, as in Azure): declare the container's physical partitions instead "
                '("PhysicalPartitions": N in funcstack.json)',
                self.spec.name,
                REMOVED_LEASES_SETTING,
            )
        self._task = asyncio.create_task(self._run(), name=f"cosmos-trigger-{self.spec.name}")

    async def stop(self) -> None:
        """Stop the balancer and every lease's processing (an unfinished batch is not
        checkpointed), release the leases, close the clients."""
        if self._positioning is not None:
            self._positioning.cancel()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self._controller is not None:
            await self._controller.shutdown()
            self._controller = None
        await self._close_clients()

    async def _run(self) -> None:
        while True:
            try:
                await asyncio.wait_for(self._initialise(), _STARTUP_TIMEOUT_SECONDS)
                assert self._store is not None
                await self._bootstrap(self._store)  # may wait for another instance's lock
                break
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                logger.warning(
                    "cosmos trigger %s: cannot start yet (%s: %s); retrying in %.0fs",
                    self.spec.name,
                    type(exc).__name__,
                    str(exc).splitlines()[0][:200] if str(exc) else "",
                    _STARTUP_RETRY_SECONDS,
                )
                logger.debug("start-up failure", exc_info=True)
                if not self._listening.is_set():  # the host goes on, saying this one does not
                    self._unable = f"{type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}"
                    self._listening.set()
                await self._close_clients()
                await asyncio.sleep(_STARTUP_RETRY_SECONDS)
        store = self._store
        assert store is not None
        opts = self.options
        synchronizer = PartitionSynchronizer(store, self._current_feed_ranges, name=self.spec.name)
        self._controller = PartitionController(
            store,
            ProcessingOptions(
                renew_interval=opts.renew_interval,
                expiration=opts.expiration_interval,
                feed_poll_delay=opts.feed_poll_delay,
                max_items=opts.max_items,
                start=opts.start_label,
            ),
            read_page=self._read_page,
            deliver=self._deliver,
            split=synchronizer.handle_partition_gone,
            name=self.spec.name,
        )
        logger.info(
            "cosmos trigger %s: watching %s/%s, leases in %s (prefix '%s'), owner %s; acquire "
            "%gs, renew %gs, expiry %gs; poll %.3fs, batch %d; a lease without a checkpoint "
            "starts at %s",
            self.spec.name,
            opts.database_name,
            opts.container_name,
            opts.lease_container_name,
            opts.lease_container_prefix,
            self.owner,
            opts.acquire_interval,
            opts.renew_interval,
            opts.expiration_interval,
            opts.feed_poll_delay,
            opts.max_items,
            opts.start_label,
        )
        balancer = LoadBalancer(
            store,
            acquire_interval=opts.acquire_interval,
            expiration=opts.expiration_interval,
            take=self._controller.add,
            name=self.spec.name,
            after_round=self._balanced,
        )
        await balancer.run()

    async def wait_listening(self) -> str | None:
        """Return once a change made from now on is delivered (the host's readiness), or why
        the listener could not start (it keeps trying)."""
        await self._listening.wait()
        return self._unable

    def _balanced(self) -> None:
        if self._positioning is None:
            self._positioning = asyncio.create_task(self._positioned())

    async def _positioned(self) -> None:
        """Listening once each lease taken in the first round was read once (or lost)."""
        while not set(self.owned) <= self._read_once:  # noqa: ASYNC110 - reads and losses
            await asyncio.sleep(0.02)
        self._unable = None
        self._listening.set()
        logger.info(
            "cosmos trigger %s: listening (lease(s) %s)",
            self.spec.name,
            ", ".join(self.owned) or "none: other instances hold them",
        )

    async def _close_clients(self) -> None:
        for client in self._clients:
            with contextlib.suppress(Exception):
                await client.close()
        self._clients.clear()

    async def _initialise(self) -> None:
        """Clients, the monitored container's rid, the lease container (created if asked)."""
        opts = self.options
        client = cosmos_client_for(opts.connection)
        self._clients.append(client)
        lease_client = client
        if opts.lease_connection != opts.connection:
            lease_client = cosmos_client_for(opts.lease_connection)
            self._clients.append(lease_client)
        monitored = client.get_database_client(opts.database_name).get_container_client(
            opts.container_name
        )
        container_rid = str((await monitored.read())["_rid"])
        lease_db: DatabaseProxy = lease_client.get_database_client(opts.lease_database_name)
        if opts.create_lease_container:
            # as the extension creates it: partition key /id, TTL on (the init lock expires)
            leases = await lease_db.create_container_if_not_exists(
                id=opts.lease_container_name, partition_key=PartitionKey(path="/id"), default_ttl=-1
            )
        else:
            leases = lease_db.get_container_client(opts.lease_container_name)
        properties = await leases.read()
        paths = list((properties.get("partitionKey") or {}).get("paths") or ["/id"])
        account = str(client.client_connection.url_connection)
        self._store = LeaseStore(
            leases,
            lease_prefix(opts.lease_container_prefix, account, container_rid),
            self.owner,
            partition_key_path=paths[0],
        )
        self._monitored = monitored

    async def _bootstrap(self, store: LeaseStore) -> None:
        """``BootstrapperCore.InitializeAsync``: until the store is initialised, the instance
        holding ``.lock`` creates the missing leases and ``.info``; the others wait."""
        while not await store.is_initialized():
            if not await store.acquire_initialization_lock(INIT_LOCK_SECONDS):
                logger.info(
                    "cosmos trigger %s: another instance is initialising the lease "
                    "store; looking again in %.0fs",
                    self.spec.name,
                    INIT_SLEEP_SECONDS,
                )
                await asyncio.sleep(INIT_SLEEP_SECONDS)
                continue
            try:
                await self._create_missing_leases(store)
                with contextlib.suppress(Exception):  # 409: someone marked it meanwhile
                    await store.mark_initialized()
            finally:
                with contextlib.suppress(Exception):
                    await store.release_initialization_lock()
            break
        ranges = await self._feed_ranges()
        tokens = {range_token(r) for r in ranges}
        held = {lease.token for lease in await store.all_leases()}
        if len(ranges) > 1 and not tokens <= held:
            logger.info(
                "cosmos trigger %s: %d physical partitions, lease(s) %s: a lease whose partition "
                "split since is replaced by its children when it is next read",
                self.spec.name,
                len(ranges),
                ", ".join(sorted(held)) or "none",
            )

    async def _feed_ranges(self) -> list[dict[str, Any]]:
        """The monitored container's feed ranges, one per physical partition, as the SDK's
        routing map has them."""
        monitored = self._monitored
        assert monitored is not None
        return [feed_range async for feed_range in monitored.read_feed_ranges()]

    async def _current_feed_ranges(self) -> list[dict[str, Any]]:
        """The feed ranges read afresh (``TryGetOverlappingRangesAsync(forceRefresh: true)``);
        the refresh replaces the client's routing map, so not during another lease's read."""
        monitored = self._monitored
        assert monitored is not None
        async with self._read_lock:
            return [
                feed_range async for feed_range in monitored.read_feed_ranges(force_refresh=True)
            ]

    async def _create_missing_leases(self, store: LeaseStore) -> None:
        """``PartitionSynchronizerCore.CreateMissingLeasesAsync``; leases an older funcstack
        wrote give their continuation to the new ones, then are deleted."""
        existing = await store.all_leases()
        legacy_id = _legacy_lease_id(self.options)
        legacy = [
            dict(item)
            async for item in store.container.query_items(query="SELECT * FROM c")
            if legacy_id.fullmatch(str(item.get("id", "")))
        ]
        adopted = 0
        for feed_range in await self._feed_ranges():
            rng = feed_range.get("Range", feed_range)
            if any(
                lease.token == range_token(feed_range)
                or (
                    lease.feed_range is not None
                    and (
                        lease.feed_range.get("Range", {}).get("min") == rng.get("min")
                        or lease.feed_range.get("Range", {}).get("max") == rng.get("max")
                    )
                )
                for lease in existing
            ):
                continue
            older = _latest_legacy(legacy, range_token(feed_range))
            continuation = str(older["ContinuationToken"]) if older is not None else None
            if await store.create_if_missing(feed_range, continuation) is not None and older:
                adopted += 1
        for item in legacy:  # after the new leases are stored: nothing is lost if this fails
            await store.container.delete_item(item["id"], partition_key=item["id"])
        if legacy:
            logger.info(
                "cosmos trigger %s: %d lease(s) an older funcstack wrote (ids with the "
                "endpoint's port) replaced by the current format; %d continuation(s) adopted",
                self.spec.name,
                len(legacy),
                adopted,
            )

    async def _read_page(self, lease: Lease, position: str | None) -> Page:
        async with self._read_lock:
            monitored = self._monitored
            assert monitored is not None
            kwargs: dict[str, Any] = {"max_item_count": self.options.max_items}
            if position:
                kwargs["continuation"] = position
            else:
                kwargs["feed_range"] = lease.feed_range
                kwargs["start_time"] = self.options.start_time
            pages = monitored.query_items_change_feed(**kwargs).by_page()
            try:
                page = await pages.__anext__()
            except StopAsyncIteration:
                page = None
            items = [item async for item in page] if page is not None else []
            token: str | None
            if items:
                token = pages.continuation_token  # type: ignore[attr-defined]
            else:
                # nothing new: the SDK's continuation is in the response's etag
                headers = monitored.client_connection.last_response_headers
                token = headers.get("etag") if headers else None
            token = token if isinstance(token, str) else None
            self._read_once.add(lease.token)
            # the SDK met the partition's split (410 / 1002) and reads on in its children
            return Page(items, token, split=len(continuations.ranges(token)) > 1)

    async def _deliver(self, lease: Lease, items: list[dict[str, Any]]) -> None:
        """Invoke the function with ``items``; retry per policy; return when it may checkpoint."""
        pb = protos()
        policy = self.spec.retry
        binding = pb.ParameterBinding(
            name=self.spec.trigger_arg,
            data=pb.TypedData(
                json=json.dumps(
                    items if self._verbatim else host_documents(items, self._zone),
                    separators=(",", ":"),
                )
            ),
        )

        async def attempt(retries: int, max_retries: int) -> str | None:
            return await self._worker.try_invoke(
                self.spec.function_id,
                [binding],
                retry_count=retries,
                max_retry_count=max_retries,
                time_limit=self._timeout(),
            )

        what = f"cosmos trigger {self.spec.name} (lease {lease.token})"
        ok, retries = await invoke_with_retries(policy, attempt, what=what)
        if ok:
            logger.info("%s: delivered %d document(s) (retry %d)", what, len(items), retries)
        elif policy is None:
            logger.error(
                "%s: no retry policy; checkpointing the failed batch of %d (host behaviour)",
                what,
                len(items),
            )
        else:
            logger.error(
                "%s: %d retries exhausted; checkpointing the failed batch of %d",
                what,
                retries,
                len(items),
            )


def lease_prefix(lease_container_prefix: str, account_endpoint: str, container_rid: str) -> str:
    """``<leaseContainerPrefix><Uri.Host>_<database rid>_<container rid>``: the change feed
    processor's ``GetLeasePrefix`` (the account endpoint's host without its port, the
    monitored container's database and container resource ids); each lease id adds ``..`` and
    its token. The database rid is the first four bytes of the container rid
    (``ResourceId.DatabaseId``), in the service's base64 (``/`` written ``-``)."""
    host = urlsplit(account_endpoint).hostname or account_endpoint
    raw = base64.b64decode(container_rid.replace("-", "/"))
    database_rid = base64.b64encode(raw[:4]).decode("ascii").replace("/", "-")
    return f"{lease_container_prefix}{host}_{database_rid}_{container_rid}"


def _legacy_lease_id(opts: CosmosTriggerOptions) -> re.Pattern[str]:
    """The ids older funcstack versions gave this trigger's leases:
    ``<prefix><host>[:<port>]_<database name>_<container name>..<token>``."""
    return re.compile(
        re.escape(opts.lease_container_prefix)
        + r"[^_/]+_"
        + re.escape(f"{opts.database_name}_{opts.container_name}..")
        + r".+"
    )


def _latest_legacy(legacy: list[dict[str, Any]], token: str) -> dict[str, Any] | None:
    """The legacy lease of ``token`` written last that holds a continuation, if any."""
    candidates = [
        item
        for item in legacy
        if str(item.get("LeaseToken")) == token and item.get("ContinuationToken")
    ]
    if not candidates:
        return None
    return max(candidates, key=lambda item: (str(item.get("timestamp") or ""), item.get("_ts", 0)))
