"""Cosmos DB trigger: the monitored container's change feed, shared between the app's
instances by the change feed processor -- cosmos-changefeed's, whose leases are the .NET
processor's, so .NET's estimator and KEDA read them and a .NET processor (the Azure host's) can
take them over.

As the Cosmos DB extension (``CosmosDBTriggerListener`` in Azure/azure-webjobs-sdk-extensions)
builds the .NET processor (``InitializeBuilder``) and runs it:

* The processor's name is the binding's ``leaseContainerPrefix``; its instance name is new at
  each start (the extension's ``Guid``; funcstack prefixes it with ``WEBSITE_INSTANCE_ID`` and
  the pid, so a lease's owner names its instance).
* The lease container (partition key ``/id``, TTL on) is created if missing when the binding
  says ``createLeaseContainerIfNotExists``; the lease intervals are the binding's
  (``leaseAcquireInterval``, ``leaseRenewInterval``, ``leaseExpirationInterval``, ms; 0 or
  none: the processor's 13 s / 17 s / 60 s, or funcstack's local-only
  ``FUNCTIONS_HOST_COSMOS_LEASE_*`` settings, ``options``); the poll delay is
  ``feedPollDelay``, a batch at most ``maxItemsPerInvocation``; a lease without a checkpoint
  starts from ``startFromBeginning`` / ``startFromTime``, else from now -- the processor's
  start, as .NET 3.60+ anchors it: never written into a lease, so what was written while no
  host ran is skipped.
* The processor does the rest (cosmos_changefeed: a lease per physical partition, balancing
  by fair share -- a lease asked for and handed over by an instance that holds none, a surplus
  given back --, renewals, checkpoints after the handler, splits, a release at a stop).
  LOCAL ONLY: ``FUNCTIONS_HOST_COSMOS_BALANCING=dotnet`` balances and keeps the leases as the
  Azure host's .NET processor does (``EqualPartitionsBalancingStrategy``: one steal a round,
  nothing given back nor handed over, a read before each renewal): a fleet that mixes this
  trigger and ``cosmos-changefeed`` processes then meets the one it meets in Azure. The
  handler is the invocation, the host's as for every trigger (``TriggerListener.invoke``):
  the documents as one JSON array (``TypedData.json``), written as the Azure host writes them
  (its Newtonsoft.Json re-formats date-like strings, ``_newtonsoft``;
  ``FUNCTIONS_HOST_COSMOS_VERBATIM_DOCUMENTS=true`` hands them over verbatim); a failed
  invocation is retried with the same batch per the function's retry policy (``-1``: for
  ever), and once it succeeds, or fails for good, the handler returns: the batch is
  checkpointed (the host's behaviour: an error logged, the lease moves on). So the handler
  never raises, and the processor's own retry of a failing handler (the same batch after its
  poll delay) is not what a function sees: the host's policy is. A stop cancels the
  invocation in flight; its batch is not checkpointed.
* Ready means listening: the listener says it listens (``listening()``, the host's
  readiness, ``_listener``) when its processor does (``is_listening``: its first acquire round
  done and the start of each lease it took fixed), so a change written after the host's ready
  line is delivered. A start that fails (the container missing, the endpoint down) is the
  host's "unable to start", said once; the listener goes on trying every 2 s, as the Azure host
  retries a listener that fails to start, and says when it listens.
* Leases an older funcstack wrote with the endpoint's port in their ids
  (``<prefix><host>:<port>_<database>_<container>..``) are adopted before the processor
  starts: the latest written one's continuation goes to an EPK lease over its range (the form
  .NET gives a range it has no id for), then all of them are deleted (one log line). Leases of
  the previous round (EPK leases with the Python SDK's continuation) need nothing: they are
  .NET's EPK leases, and their continuation is read as the etag it holds.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import logging
import os
import re
import socket
import uuid
from typing import Any, cast

from azure.cosmos import PartitionKey
from azure.cosmos.aio import ContainerProxy, CosmosClient

from cosmos_changefeed import Balancing, Lease, LeaseContext, StartFrom, lease_prefix
from cosmos_changefeed.aio import ChangeFeedProcessor
from funcstack.functions_host._config import is_truthy
from funcstack.functions_host._connections import VERIFY_TLS_SETTING as VERIFY_TLS_SETTING
from funcstack.functions_host._connections import cosmos_client_for
from funcstack.functions_host._cosmos_trigger.options import CosmosTriggerOptions
from funcstack.functions_host._functions import FunctionSpec
from funcstack.functions_host._listener import HostServices, TriggerListener, first_line
from funcstack.functions_host._newtonsoft import VERBATIM_SETTING, host_documents, host_time_zone
from funcstack.functions_host._rpc import protos

logger = logging.getLogger("funcstack.functions_host.cosmos")

#: A local-only app setting that cut a one-partition feed into N leases, removed: physical
#: partitions give the leases now; the host says so when it is still set.
REMOVED_LEASES_SETTING = "FUNCTIONS_HOST_COSMOS_LEASES"
_STARTUP_RETRY_SECONDS = 2.0
_STARTUP_TIMEOUT_SECONDS = 30.0
#: A stack stops each part within 1.5 s: the leases get a second to be released.
_STOP_GRACE_SECONDS = 1.0
#: A local-only app setting: "dotnet" balances as the Azure host's processor (see the module).
BALANCING_SETTING = "FUNCTIONS_HOST_COSMOS_BALANCING"


def new_owner() -> str:
    """A processor instance's name, new at each start (the extension's ``Guid.NewGuid()``),
    prefixed with the instance (``WEBSITE_INSTANCE_ID``, else the machine) and the pid."""
    instance = os.environ.get("WEBSITE_INSTANCE_ID") or socket.gethostname()
    return f"{instance}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def balancing() -> Balancing:
    """How the trigger's processor balances (``BALANCING_SETTING``; the processor refuses a
    value it does not know, and the listener says so as it cannot start)."""
    return cast(Balancing, os.environ.get(BALANCING_SETTING) or "fair-share")


def start_from(options: CosmosTriggerOptions) -> StartFrom:
    """The processor's start for the binding's start options."""
    start = options.start_time
    if isinstance(start, dt.datetime):
        return start
    return "beginning" if start == "Beginning" else "now"


class CosmosTriggerListener(TriggerListener):
    """Feeds one function from the change feed of its monitored container; listening once its
    processor is."""

    kind = "cosmos trigger"

    def __init__(self, spec: FunctionSpec, host: HostServices, *, owner: str | None = None) -> None:
        super().__init__(spec, host)
        self.options = CosmosTriggerOptions.from_binding(spec.trigger)
        self.owner = owner or new_owner()
        self._verbatim = is_truthy(os.environ.get(VERBATIM_SETTING, "false"))
        self._zone = host_time_zone(dict(os.environ))
        self._clients: list[CosmosClient] = []
        self._processor: ChangeFeedProcessor | None = None

    @property
    def owned(self) -> list[str]:
        """The tokens of the leases this listener processes now."""
        return self._processor.owned_leases if self._processor is not None else []

    def start(self) -> None:
        if self.options.start_error is not None:
            # the host keeps running; this function's listener does not (Azure: the listener
            # fails in StartAsync and the host logs it; its retries would fail the same way)
            self.unable_to_start(self.options.start_error, retrying=False)
            return
        if os.environ.get(REMOVED_LEASES_SETTING):
            logger.warning(
                "cosmos trigger %s: the app setting %s is no longer read (a lease per physical "
                "partition, as in Azure): declare the container's physical partitions instead "
                '("PhysicalPartitions": N in funcstack.json)',
                self.spec.name,
                REMOVED_LEASES_SETTING,
            )
        self.spawn(self._run(), name=f"cosmos-trigger-{self.spec.name}")

    async def stop(self) -> None:
        """Stop the processor (an unfinished batch is not checkpointed), release the leases,
        close the clients."""
        await super().stop()  # its start, or its wait for the processor to listen
        if self._processor is not None:
            await self._processor.stop(timeout=_STOP_GRACE_SECONDS)
            self._processor = None
        await self._close_clients()

    async def _run(self) -> None:
        while True:
            try:
                processor = await asyncio.wait_for(self._prepare(), _STARTUP_TIMEOUT_SECONDS)
                await processor.start()  # may wait for another instance's initialisation
                self._processor = processor
                break
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.unable_to_start(f"{type(exc).__name__}: {first_line(exc)}")
                logger.warning(
                    "cosmos trigger %s: cannot start yet (%s: %s); retrying in %.0fs",
                    self.spec.name,
                    type(exc).__name__,
                    first_line(exc)[:200],
                    _STARTUP_RETRY_SECONDS,
                )
                logger.debug("start-up failure", exc_info=True)
                await self._close_clients()
                await asyncio.sleep(_STARTUP_RETRY_SECONDS)
        opts = self.options
        logger.info(
            "cosmos trigger %s: watching %s/%s, leases in %s (prefix '%s', %s), owner %s; "
            "acquire %gs, renew %gs, expiry %gs; poll %.3fs, batch %d; a lease without a "
            "checkpoint starts at %s",
            self.spec.name,
            opts.database_name,
            opts.container_name,
            opts.lease_container_name,
            opts.lease_container_prefix,
            processor.lease_prefix,
            self.owner,
            opts.acquire_interval,
            opts.renew_interval,
            opts.expiration_interval,
            opts.feed_poll_delay,
            opts.max_items,
            _label(processor),
        )
        await processor.wait_until_listening()  # the processor's signal: ours
        self.listening()

    async def _prepare(self) -> ChangeFeedProcessor:
        """Clients, the lease container (created if asked), leases of older funcstack
        versions adopted, and the processor (not started)."""
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
        lease_db = lease_client.get_database_client(opts.lease_database_name)
        if opts.create_lease_container:
            # as the extension creates it: partition key /id, TTL on (the init lock expires)
            leases = await lease_db.create_container_if_not_exists(
                id=opts.lease_container_name, partition_key=PartitionKey(path="/id"), default_ttl=-1
            )
        else:
            leases = lease_db.get_container_client(opts.lease_container_name)
        container_rid = str((await monitored.read())["_rid"])
        prefix = lease_prefix(
            opts.lease_container_prefix, str(client.client_connection.url_connection), container_rid
        )
        await self._adopt_older_leases(leases, prefix)
        return ChangeFeedProcessor(
            monitored,
            leases,
            processor_name=opts.lease_container_prefix,
            instance_name=self.owner,
            handler=self._deliver,
            start_from=start_from(opts),
            poll_delay=opts.feed_poll_delay,
            max_items=opts.max_items,
            lease_renew_interval=opts.renew_interval,
            lease_acquire_interval=opts.acquire_interval,
            lease_expiration_interval=opts.expiration_interval,
            # as the extension's .NET processor: a lease is written only by a checkpoint after
            # changes, never with its start ("now" again at each new owner)
            keep_start=False,
            balancing=balancing(),
        )

    async def _close_clients(self) -> None:
        for client in self._clients:
            with contextlib.suppress(Exception):
                await client.close()
        self._clients.clear()

    async def _adopt_older_leases(self, leases: ContainerProxy, prefix: str) -> None:
        """Leases an older funcstack wrote with the endpoint's port in their ids: the latest
        one's continuation goes to an EPK lease over its range, unless the store is
        initialised already; then all of them are deleted."""
        legacy_id = _legacy_lease_id(self.options)
        legacy = [
            dict(item)
            async for item in leases.query_items(query="SELECT * FROM c")
            if legacy_id.fullmatch(str(item.get("id", "")))
        ]
        if not legacy:
            return
        adopted = 0
        initialised = [
            item
            async for item in leases.query_items(
                query="SELECT c.id FROM c WHERE c.id = @id",
                parameters=[{"name": "@id", "value": f"{prefix}.info"}],
            )
        ]
        latest = _latest_legacy(legacy)
        if not initialised and latest is not None:
            old = Lease.from_document(latest)
            if old.feed_range is not None:
                body = Lease(
                    id=f"{prefix}..{old.feed_range.token}",
                    lease_token=old.feed_range.token,
                    version=1,
                    feed_range=old.feed_range,
                    continuation=old.continuation,
                ).to_document()
                with contextlib.suppress(Exception):  # 409: another instance adopted it
                    await leases.create_item(body)
                    adopted = 1
        for item in legacy:  # after the new lease is stored: nothing is lost if this fails
            await leases.delete_item(item["id"], partition_key=item["id"])
        logger.info(
            "cosmos trigger %s: %d lease(s) an older funcstack wrote (ids with the endpoint's "
            "port) deleted; %d continuation(s) adopted",
            self.spec.name,
            len(legacy),
            adopted,
        )

    async def _deliver(self, context: LeaseContext, items: list[dict[str, Any]]) -> None:
        """The processor's handler: invoke the function with ``items``, retried per its policy
        (``invoke``); return when the batch may be checkpointed, whether it succeeded or failed
        for good (never raises: the processor would give the batch again)."""
        documents = items if self._verbatim else host_documents(items, self._zone)
        data = protos().TypedData(json=json.dumps(documents, separators=(",", ":")))
        what = f"cosmos trigger {self.spec.name} (lease {context.lease_token})"
        ok, retries = await self.invoke(data, what=what)
        policy = self.spec.retry
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


def _label(processor: ChangeFeedProcessor) -> str:
    start = processor.start_position
    return start.isoformat() if isinstance(start, dt.datetime) else str(start)


def _legacy_lease_id(opts: CosmosTriggerOptions) -> re.Pattern[str]:
    """The ids older funcstack versions gave this trigger's leases:
    ``<prefix><host>:<port>_<database name>_<container name>..<token>``."""
    return re.compile(
        re.escape(opts.lease_container_prefix)
        + r"[^_/]+:\d+_"
        + re.escape(f"{opts.database_name}_{opts.container_name}..")
        + r".+"
    )


def _latest_legacy(legacy: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The legacy lease written last that holds a continuation, if any."""
    candidates = [item for item in legacy if item.get("ContinuationToken")]
    if not candidates:
        return None
    return max(candidates, key=lambda item: (str(item.get("timestamp") or ""), item.get("_ts", 0)))
