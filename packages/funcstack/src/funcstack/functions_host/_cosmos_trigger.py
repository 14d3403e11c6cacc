"""Cosmos DB trigger: the monitored container's change feed, one lease document per feed range.

As the Functions host (the change feed processor behind it) does:

* One lease document per feed range in the lease container (partition key ``/id``), created
  if missing when the binding says ``createLeaseContainerIfNotExists``. Each lease is
  processed on its own and concurrently: a batch that keeps failing holds back only its lease.
* The lease holds the change-feed continuation; it moves only after an invocation finished
  -- successfully, or unsuccessfully once the retry policy is exhausted (or when there is
  none): then the host logs an error and checkpoints anyway.
* A failed invocation is retried with the same batch per the function's retry policy
  (``-1`` = forever), with the host's randomized exponential back-off; the retry count is
  kept in memory. On shutdown an unfinished batch is not checkpointed.
* With no lease the feed starts from "now", unless ``startFromBeginning`` or
  ``startFromTime`` says otherwise.
* The documents reach the worker as one JSON array (``TypedData.json``), written as the Azure
  host writes them: its Newtonsoft.Json reading re-formats date-like strings
  (``_newtonsoft``); the local-only app setting ``FUNCTIONS_HOST_COSMOS_VERBATIM_DOCUMENTS=true``
  hands them over verbatim instead.
* LOCAL DIFFERENCE: the local Cosmos endpoint has one physical partition, so one lease. The
  local-only app setting ``FUNCTIONS_HOST_COSMOS_LEASES=N`` splits the feed into N
  effective-partition-key ranges with a lease each, which behave as the host's leases on
  N physical partitions (used to test that leases are independent).
* LOCAL DIFFERENCE: a single host instance is assumed: a starting host takes over every lease
  at once (no lease expiry or balancing between instances).
* Lease ids as the change feed processor forms them (``GetLeasePrefix``):
  ``<leaseContainerPrefix><account Uri.Host>_<database rid>_<container rid>..<lease token>``:
  no port, so a local endpoint restarted on another port (``--free-ports``) with its kept
  state (which keeps the rids) finds its leases. Leases an older funcstack wrote, with the
  endpoint's port and the names in the id (``<prefix><host>:<port>_<database>_<container>..``),
  are adopted once: the continuation of the latest written one for a range goes to the new
  lease when it has none, then all of them are deleted (one log line).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime as dt
import itertools
import json
import logging
import os
import re
import socket
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from azure.cosmos import PartitionKey
from azure.cosmos.aio import ContainerProxy, CosmosClient, DatabaseProxy
from azure.cosmos.exceptions import CosmosHttpResponseError

from funcstack.functions_host._config import (
    SettingError,
    is_truthy,
    parse_connection_string,
    resolve,
)
from funcstack.functions_host._functions import FunctionSpec
from funcstack.functions_host._language_worker import LanguageWorker
from funcstack.functions_host._newtonsoft import host_documents, host_time_zone
from funcstack.functions_host._retry import invoke_with_retries
from funcstack.functions_host._rpc import protos

logger = logging.getLogger("funcstack.functions_host.cosmos")

DEFAULT_FEED_POLL_DELAY_MS = 5000
DEFAULT_MAX_ITEMS = 100
#: Local-only app setting: "false" accepts a local endpoint's self-signed certificate.
VERIFY_TLS_SETTING = "FUNCTIONS_HOST_COSMOS_VERIFY_TLS"
#: Local-only app setting: "true" hands documents to the function verbatim, where the Azure
#: host re-formats their date-like strings (`_newtonsoft`).
VERBATIM_SETTING = "FUNCTIONS_HOST_COSMOS_VERBATIM_DOCUMENTS"
_STARTUP_RETRY_SECONDS = 2.0
_STARTUP_TIMEOUT_SECONDS = 30.0


@dataclass
class CosmosTriggerOptions:
    """The binding properties of a ``cosmosDBTrigger``, with app settings resolved."""

    connection: str
    database_name: str
    container_name: str
    lease_connection: str
    lease_database_name: str
    lease_container_name: str
    lease_container_prefix: str
    create_lease_container: bool
    feed_poll_delay: float
    max_items: int
    start_time: dt.datetime | str

    @classmethod
    def from_binding(cls, binding: dict[str, Any]) -> CosmosTriggerOptions:
        def opt(key: str) -> Any:
            return resolve(binding.get(key))

        connection = str(opt("connection") or opt("connectionStringSetting") or "")
        if not connection:
            raise SettingError("cosmosDBTrigger needs 'connection'")
        database = str(opt("databaseName"))
        start: dt.datetime | str = "Now"
        start_from_time = opt("startFromTime")
        start_from_beginning = opt("startFromBeginning")
        if start_from_time:
            start = dt.datetime.fromisoformat(str(start_from_time).replace("Z", "+00:00"))
            if start.tzinfo is None:
                start = start.replace(tzinfo=dt.UTC)
        elif start_from_beginning is not None and _as_bool(start_from_beginning):
            start = "Beginning"
        return cls(
            connection=connection,
            database_name=database,
            container_name=str(opt("containerName") or opt("collectionName")),
            lease_connection=str(opt("leaseConnection") or connection),
            lease_database_name=str(opt("leaseDatabaseName") or database),
            # "leases" is the extension's documented default (leaseContainerName unset)
            lease_container_name=str(
                opt("leaseContainerName") or opt("leaseCollectionName") or "leases"
            ),
            lease_container_prefix=str(
                opt("leaseContainerPrefix") or opt("leaseCollectionPrefix") or ""
            ),
            create_lease_container=_as_bool(
                opt("createLeaseContainerIfNotExists")
                or opt("createLeaseCollectionIfNotExists")
                or False
            ),
            feed_poll_delay=int(opt("feedPollDelay") or DEFAULT_FEED_POLL_DELAY_MS) / 1000.0,
            max_items=int(opt("maxItemsPerInvocation") or DEFAULT_MAX_ITEMS),
            start_time=start,
        )


def _as_bool(value: Any) -> bool:
    return value if isinstance(value, bool) else is_truthy(str(value))


def cosmos_client_for(setting: str) -> CosmosClient:
    """A client for the app setting ``setting``: a connection string, or
    ``<setting>__accountEndpoint`` with DefaultAzureCredential. The local-only setting
    ``FUNCTIONS_HOST_COSMOS_VERIFY_TLS=false`` turns TLS verification off (for a local endpoint
    with a self-signed certificate; the host in Azure always verifies)."""
    verify = os.environ.get(VERIFY_TLS_SETTING, "true").strip().lower() not in {"false", "0", "no"}
    value = os.environ.get(setting)
    if value:
        parts = parse_connection_string(value)
        endpoint, key = parts.get("accountendpoint"), parts.get("accountkey")
        if not endpoint or not key:
            raise SettingError(f"app setting {setting} lacks AccountEndpoint or AccountKey")
        return CosmosClient(endpoint, credential=key, connection_verify=verify)
    endpoint = os.environ.get(f"{setting}__accountEndpoint")
    if endpoint:
        from azure.identity.aio import DefaultAzureCredential

        return CosmosClient(endpoint, credential=DefaultAzureCredential(), connection_verify=verify)
    raise SettingError(f"app setting {setting} (or {setting}__accountEndpoint) is not set")


@dataclass
class Lease:
    """One lease document; ``doc`` is what is stored."""

    doc: dict[str, Any]
    processed: int = field(default=0)

    @property
    def id(self) -> str:
        return str(self.doc["id"])

    @property
    def continuation(self) -> str | None:
        token = self.doc.get("ContinuationToken")
        return str(token) if token else None

    @property
    def feed_range(self) -> dict[str, Any]:
        feed_range: dict[str, Any] = self.doc["feedRange"]
        return feed_range


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
        self._owner = owner or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._verbatim = is_truthy(os.environ.get(VERBATIM_SETTING, "false"))
        self._zone = host_time_zone(dict(os.environ))
        self._clients: list[CosmosClient] = []
        self._task: asyncio.Task[None] | None = None
        self._lease_tasks: list[asyncio.Task[None]] = []
        # Page reads share one client (and its last response headers): one at a time.
        # Deliveries, the slow part, run concurrently per lease.
        self._read_lock = asyncio.Lock()
        self._monitored: ContainerProxy | None = None
        self._leases_container: ContainerProxy | None = None
        self._leases: list[Lease] = []
        self._prefix = ""

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name=f"cosmos-trigger-{self.spec.name}")

    async def stop(self) -> None:
        tasks = [*self._lease_tasks, *([self._task] if self._task else [])]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._task = None
        self._lease_tasks.clear()
        for client in self._clients:
            with contextlib.suppress(Exception):
                await client.close()
        self._clients.clear()

    async def _run(self) -> None:
        while True:
            try:
                await asyncio.wait_for(self._initialise(), _STARTUP_TIMEOUT_SECONDS)
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
                await self._close_clients()
                await asyncio.sleep(_STARTUP_RETRY_SECONDS)
        self._lease_tasks = [
            asyncio.create_task(self._poll_lease(lease), name=f"lease-{lease.id}")
            for lease in self._leases
        ]
        await asyncio.gather(*self._lease_tasks)

    async def _close_clients(self) -> None:
        for client in self._clients:
            with contextlib.suppress(Exception):
                await client.close()
        self._clients.clear()

    async def _initialise(self) -> None:
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
            leases = await lease_db.create_container_if_not_exists(
                id=opts.lease_container_name, partition_key=PartitionKey(path="/id")
            )
        else:
            leases = lease_db.get_container_client(opts.lease_container_name)
            await leases.read()
        account = str(client.client_connection.url_connection)
        self._prefix = lease_prefix(opts.lease_container_prefix, account, container_rid)
        existing: dict[str, dict[str, Any]] = {}
        legacy: list[dict[str, Any]] = []
        legacy_id = _legacy_lease_id(opts)
        async for item in leases.query_items(query="SELECT * FROM c"):
            item_id = str(item.get("id", ""))
            if item_id.startswith(self._prefix):
                existing[item_id] = item
            elif legacy_id.fullmatch(item_id):
                legacy.append(item)
        self._leases = []
        ranges = [feed_range async for feed_range in monitored.read_feed_ranges()]
        split = int(os.environ.get("FUNCTIONS_HOST_COSMOS_LEASES", "1") or "1")
        if split > 1 and len(ranges) == 1:
            ranges = _split_range(ranges[0], split)
        adopted = 0
        for feed_range in ranges:
            token = _range_token(feed_range)
            lease_id = f"{self._prefix}{token}"
            found = existing.get(lease_id)
            doc: dict[str, Any] = found if found is not None else {
                "id": lease_id,
                "version": 1,
                "LeaseToken": token,
                "feedRange": feed_range,
                "ContinuationToken": None,
                "mode": "LatestVersion",
                "properties": {"function": self.spec.name},
            }
            if found is None:
                older = _latest_legacy(legacy, token)
                if older is not None:
                    doc["ContinuationToken"] = older["ContinuationToken"]
                    adopted += 1
            doc["Owner"] = self._owner
            doc["timestamp"] = _now()
            stored = await leases.upsert_item(_clean(doc))
            self._leases.append(Lease(doc=_clean(stored)))
        for item in legacy:  # after the new leases are stored: nothing is lost if this fails
            await leases.delete_item(item["id"], partition_key=item["id"])
        if legacy:
            logger.info(
                "cosmos trigger %s: %d lease(s) an older funcstack wrote (ids with the "
                "endpoint's port) replaced by the current format; %d continuation(s) adopted",
                self.spec.name,
                len(legacy),
                adopted,
            )
        self._monitored = monitored
        self._leases_container = leases
        logger.info(
            "cosmos trigger %s: watching %s/%s, %d lease(s) in %s, poll %.3fs, batch %d, start %s",
            self.spec.name,
            opts.database_name,
            opts.container_name,
            len(self._leases),
            opts.lease_container_name,
            opts.feed_poll_delay,
            opts.max_items,
            opts.start_time if isinstance(opts.start_time, str) else opts.start_time.isoformat(),
        )

    async def _poll_lease(self, lease: Lease) -> None:
        """One lease's loop: read a page, deliver it, checkpoint; wait when caught up."""
        while True:
            full_page = False
            try:
                full_page = await self._poll_once(lease)
            except asyncio.CancelledError:
                raise
            except CosmosHttpResponseError as exc:
                logger.warning(
                    "cosmos trigger %s: change feed read failed on lease %s (status %s)",
                    self.spec.name,
                    lease.doc.get("LeaseToken"),
                    exc.status_code,
                )
            except Exception:
                logger.exception("cosmos trigger %s: change feed read failed", self.spec.name)
            if not full_page:
                await asyncio.sleep(self.options.feed_poll_delay)

    async def _read_page(self, lease: Lease) -> tuple[list[dict[str, Any]], str | None]:
        async with self._read_lock:
            return await self._read_page_locked(lease)

    async def _read_page_locked(self, lease: Lease) -> tuple[list[dict[str, Any]], str | None]:
        monitored = self._monitored
        assert monitored is not None
        kwargs: dict[str, Any] = {"max_item_count": self.options.max_items}
        if lease.continuation:
            kwargs["continuation"] = lease.continuation
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
            # nothing new: keep the token the SDK produced (fixes "now"/time starts in place)
            headers = monitored.client_connection.last_response_headers
            token = headers.get("etag") if headers else None
        return items, token if isinstance(token, str) else None

    async def _poll_once(self, lease: Lease) -> bool:
        items, token = await self._read_page(lease)
        if not items:
            pinned = self.options.start_time != "Beginning"
            if pinned and lease.continuation is None and token and not token.strip('"').isdigit():
                # pin a "now"/point-in-time start so later polls do not move it forward
                await self._checkpoint(lease, token, 0)
            return False
        await self._deliver(lease, items)
        await self._checkpoint(lease, token, len(items))
        return len(items) >= self.options.max_items

    async def _deliver(self, lease: Lease, items: list[dict[str, Any]]) -> None:
        """Invoke the function with ``items``; retry per policy; return when it may checkpoint."""
        pb = protos()
        policy = self.spec.retry
        binding = pb.ParameterBinding(
            name=self.spec.trigger_arg,
            data=pb.TypedData(json=json.dumps(
                items if self._verbatim else host_documents(items, self._zone),
                separators=(",", ":"))))

        async def attempt(retries: int, max_retries: int) -> str | None:
            return await self._worker.try_invoke(
                self.spec.function_id, [binding], retry_count=retries,
                max_retry_count=max_retries, time_limit=self._timeout())

        what = f"cosmos trigger {self.spec.name} (lease {lease.doc.get('LeaseToken')})"
        ok, retries = await invoke_with_retries(policy, attempt, what=what)
        if ok:
            logger.info("%s: delivered %d document(s) (retry %d)", what, len(items), retries)
        elif policy is None:
            logger.error("%s: no retry policy; checkpointing the failed batch of %d "
                         "(host behaviour)", what, len(items))
        else:
            logger.error("%s: %d retries exhausted; checkpointing the failed batch of %d",
                         what, retries, len(items))

    async def _checkpoint(self, lease: Lease, token: str | None, count: int) -> None:
        if token is None:
            logger.error("cosmos trigger %s: no continuation token to checkpoint", self.spec.name)
            return
        leases = self._leases_container
        assert leases is not None
        doc = dict(lease.doc)
        doc["ContinuationToken"] = token
        doc["Owner"] = self._owner
        doc["timestamp"] = _now()
        props = dict(doc.get("properties") or {})
        props["documentsProcessed"] = int(props.get("documentsProcessed", 0)) + count
        doc["properties"] = props
        stored = await leases.upsert_item(doc)
        lease.doc = _clean(stored)


def lease_prefix(lease_container_prefix: str, account_endpoint: str, container_rid: str) -> str:
    """``<leaseContainerPrefix><Uri.Host>_<database rid>_<container rid>..``: the change feed
    processor's ``GetLeasePrefix`` (the account endpoint's host without its port, the
    monitored container's database and container resource ids) and the ``..`` before each
    lease token. The database rid is the first four bytes of the container rid
    (``ResourceId.DatabaseId``), in the service's base64 (``/`` written ``-``)."""
    host = urlsplit(account_endpoint).hostname or account_endpoint
    raw = base64.b64decode(container_rid.replace("-", "/"))
    database_rid = base64.b64encode(raw[:4]).decode("ascii").replace("/", "-")
    return f"{lease_container_prefix}{host}_{database_rid}_{container_rid}.."


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
        item for item in legacy
        if str(item.get("LeaseToken")) == token and item.get("ContinuationToken")
    ]
    if not candidates:
        return None
    return max(candidates, key=lambda item: (str(item.get("timestamp") or ""), item.get("_ts", 0)))


def _split_range(feed_range: dict[str, Any], parts: int) -> list[dict[str, Any]]:
    """``parts`` contiguous sub-ranges of the full effective-partition-key range."""
    rng = feed_range.get("Range", feed_range)
    if not (isinstance(rng, dict) and rng.get("min") == "" and rng.get("max") == "FF"):
        return [feed_range]
    # hash (v2) effective partition keys begin with a byte in 00..3F: split that space evenly
    bounds = [""] + [f"{(64 * i) // parts:02X}" for i in range(1, parts)] + ["FF"]
    return [
        {"Range": {"isMaxInclusive": False, "isMinInclusive": True, "min": lo, "max": hi}}
        for lo, hi in itertools.pairwise(bounds)
    ]


def _range_token(feed_range: dict[str, Any]) -> str:
    rng = feed_range.get("Range", feed_range)
    if isinstance(rng, dict) and "min" in rng and "max" in rng:
        return f"{rng['min']}-{rng['max']}"
    return uuid.uuid5(uuid.NAMESPACE_OID, repr(sorted(feed_range.items()))).hex


def _clean(doc: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in doc.items() if not k.startswith("_")}


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat()

