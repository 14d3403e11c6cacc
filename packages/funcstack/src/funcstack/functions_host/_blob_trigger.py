"""Blob trigger (``blobTrigger``), as the Storage Blobs extension 5.x runs it on a storage
account without logs (Azurite): the container polled, a receipt per blob version, a queue of
work shared by the host's instances, a poison queue (Azure/azure-sdk-for-net,
``Microsoft.Azure.WebJobs.Extensions.Storage.Blobs/src/Listeners``: ``ScanBlobScanLogHybrid
PollingStrategy``, ``BlobTriggerExecutor``, ``BlobReceiptManager``, ``BlobReceipt``,
``BlobTriggerMessage``, ``BlobQueueTriggerExecutor``, ``SharedBlobQueueListenerFactory``;
"Azure Blob storage trigger for Azure Functions", "Poison blobs" and "Blob receipts" on
learn.microsoft.com):

* ``path`` is ``<container>/<pattern>``: ``{name}`` in the pattern matches any text, slashes
  included (the SDK's capture ``(?<name>.*)``), and becomes binding data; the container is a
  name (``%SETTING%`` allowed). ``connection``: the blobs' storage connection
  (``_connections``), ``AzureWebJobsStorage`` when empty. ``source: EventGrid`` is refused
  (no Event Grid here; ``_bindings.plan``).
* Scan (``ScanBlobScanLogHybridPollingStrategy``): the container is listed; a blob last
  modified at or after the latest time the previous complete listing saw (every blob, at
  start) is a candidate. LOCAL DIFFERENCE: every second (``SCAN_INTERVAL``), where Azure lists
  every 10 s and also reads the account's analytics logs, which Azurite does not write.
* Receipt (``BlobTriggerExecutor``): for a matching blob, the blob
  ``azure-webjobs-hosts/blobreceipts/<hostId>/<functionId>/<ETag>/<container>/<name>`` in the
  host's storage (``AzureWebJobsStorage``). A complete receipt means that version was handed
  over already: nothing to do. Otherwise the receipt is created (``Incomplete`` metadata, only
  if it does not exist), leased (30 s), and under the lease a message
  ``{"Type": "BlobTrigger", "FunctionId", "BlobType", "ContainerName", "BlobName", "ETag"}`` is
  added to the host's queue ``azure-webjobs-blobtrigger-<hostId>``, then the receipt marked
  complete and released. A receipt another instance holds is tried again at the next scan. So
  a blob version is queued once, across restarts and instances; a changed blob (new ETag) is
  a new version and triggers again.
* Queue (``SharedBlobQueueListenerFactory``, a queue listener with its own processor,
  ``_queue_trigger``'s polling, visibility and settling): a message whose blob is gone, or
  whose ETag is no longer the blob's, is deleted without an invocation; otherwise the function
  runs with the blob (its text as a ``StreamReader`` reads it, bytes with ``dataType:
  binary``) and the trigger metadata ``BlobTrigger`` (``<container>/<name>``), ``Uri``,
  ``Properties``, ``Metadata`` and the pattern's names. Success deletes the message; a failure
  makes it visible again, and the failure at ``DequeueCount`` = host.json
  ``extensions.blobs.poisonBlobThreshold`` (default 5) moves the message to
  ``webjobs-blobtrigger-poison`` (LOCAL DIFFERENCE: in ``AzureWebJobsStorage``'s account; Azure
  writes it in the triggering blob's account, the same one unless the connection names
  another). A retry policy on the function is applied in memory first.
* The host id (``_config.host_id``: ``AzureFunctionsWebHost__hostid``, else the app folder's
  name) keys the receipts and the queue: instances of one app share them; the function id is
  ``Host.Functions.<name>``, as the script host names it.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from azure.core import MatchConditions
from azure.core.exceptions import (
    AzureError,
    HttpResponseError,
    ResourceExistsError,
    ResourceNotFoundError,
)
from azure.storage.blob import BlobProperties
from azure.storage.blob.aio import BlobClient, BlobServiceClient, ContainerClient
from azure.storage.queue import QueueMessage

from funcstack.functions_host._bindings.blob import stream_text
from funcstack.functions_host._config import SettingError, resolve
from funcstack.functions_host._connections import blob_service_for
from funcstack.functions_host._functions import FunctionSpec
from funcstack.functions_host._listener import (
    HostServices,
    TriggerListener,
    close_quietly,
    first_line,
)
from funcstack.functions_host._queue_trigger import QueueTriggerListener
from funcstack.functions_host._rpc import protos

logger = logging.getLogger("funcstack.functions_host.blob")

HOST_CONNECTION = "AzureWebJobsStorage"
HOSTS_CONTAINER = "azure-webjobs-hosts"
RECEIPTS_DIRECTORY = "blobreceipts"
QUEUE_PREFIX = "azure-webjobs-blobtrigger-"
POISON_QUEUE = "webjobs-blobtrigger-poison"
DEFAULT_POISON_BLOB_THRESHOLD = 5
RECEIPT_LEASE_SECONDS = 30
INCOMPLETE = "Incomplete"
#: LOCAL DIFFERENCE: Azure lists a container every 10 s (and reads the analytics logs).
SCAN_INTERVAL = 1.0


@dataclass(frozen=True)
class BlobTriggerOptions:
    """A ``blobTrigger`` binding with app settings resolved, and host.json
    ``extensions.blobs``."""

    connection: str
    container: str
    pattern: str
    data_type: str
    poison_threshold: int

    @classmethod
    def from_binding(
        cls, binding: Mapping[str, Any], blobs: Mapping[str, Any] | None = None
    ) -> BlobTriggerOptions:
        props = {str(k).casefold(): v for k, v in binding.items()}
        path = str(resolve(props.get("path")) or "").strip().lstrip("/")
        container, sep, pattern = path.partition("/")
        if not container or not sep:
            raise SettingError(
                f"blobTrigger path {path!r}: give <container>/<blob name pattern>, "
                "e.g. samples/{name}"
            )
        if "{" in container or "}" in container:
            raise SettingError(f"blobTrigger path {path!r}: the container must be a name")
        if str(resolve(props.get("source")) or "").casefold() == "eventgrid":
            raise SettingError("blobTrigger source EventGrid is not served (no Event Grid)")
        extension = {str(k).casefold(): v for k, v in dict(blobs or {}).items()}
        threshold = int(extension.get("poisonblobthreshold", DEFAULT_POISON_BLOB_THRESHOLD))
        if threshold < 1:
            raise SettingError("extensions.blobs.poisonBlobThreshold must be at least 1")
        return cls(
            connection=str(resolve(props.get("connection")) or HOST_CONNECTION),
            container=container,
            pattern=pattern,
            data_type=str(props.get("datatype") or "").casefold(),
            poison_threshold=threshold,
        )


class BlobPattern:
    """The blob name pattern (``BindingTemplateSource``): literals as they are, ``{name}`` a
    greedy capture; ``{{``/``}}`` a literal brace."""

    def __init__(self, pattern: str) -> None:
        self.names: list[str] = []
        regex = ["^"]
        for literal, name in re.findall(r"((?:[^{}]|\{\{|\}\})*)(?:\{([^{}]*)\})?", pattern):
            regex.append(re.escape(literal.replace("{{", "{").replace("}}", "}")))
            if name:
                name = name.strip()
                if "." in name or not name:
                    raise SettingError(f"blobTrigger path: {{{name}}} cannot capture a value")
                regex.append(f"(?P<g{len(self.names)}>.*)")
                self.names.append(name)
        self._regex = re.compile("".join(regex) + "$", re.DOTALL)

    def match(self, blob_name: str) -> dict[str, str] | None:
        found = self._regex.match(blob_name)
        if found is None:
            return None
        return {name: found.group(f"g{i}") for i, name in enumerate(self.names)}


def _moment(value: Any) -> str | None:
    return value.isoformat() if value is not None else None


def quoted_etag(value: Any) -> str:
    """An ETag as the .NET SDK's ``ETag.ToString()`` gives it from a blob's properties: quoted
    (a listing's XML has it without the quotes)."""
    return f'"{str(value).strip(chr(34))}"'


def _text(value: Any, default: str) -> str:
    """An SDK enum's value (the service's spelling)."""
    if value is None:
        return default
    return str(getattr(value, "value", value))


def properties_json(props: BlobProperties) -> str:
    """The blob's ``BlobProperties`` as the host serializes them for the worker (the names the
    .NET SDK's properties have; the library reads ``ContentLength``)."""
    settings = props.content_settings
    md5 = settings.content_md5 if settings is not None else None
    return json.dumps(
        {
            "LastModified": _moment(props.last_modified),
            "CreatedOn": _moment(props.creation_time),
            "Metadata": dict(props.metadata or {}),
            "BlobType": _text(props.blob_type, "BlockBlob").removesuffix("Blob"),
            "ContentLength": props.size,
            "ContentType": settings.content_type if settings is not None else None,
            "ETag": quoted_etag(props.etag),
            "ContentHash": base64.b64encode(bytes(md5)).decode() if md5 else None,
            "ContentEncoding": settings.content_encoding if settings is not None else None,
            "ContentLanguage": settings.content_language if settings is not None else None,
            "CacheControl": settings.cache_control if settings is not None else None,
            "LeaseState": _text(props.lease.state, "") if props.lease is not None else None,
            "LeaseStatus": _text(props.lease.status, "") if props.lease is not None else None,
            "IsServerEncrypted": props.server_encrypted,
        }
    )


class BlobTriggerListener(TriggerListener):
    """Feeds one function with the new blobs of its container; listening once its first
    listing is done (every blob there is a candidate then) and the host's blob trigger queue
    has answered its first receive."""

    kind = "blob trigger"

    def __init__(self, spec: FunctionSpec, host: HostServices) -> None:
        super().__init__(spec, host)
        self.options = BlobTriggerOptions.from_binding(spec.trigger, host.host_json.blobs)
        self.pattern = BlobPattern(self.options.pattern)
        self.function_id = f"Host.Functions.{spec.name}"
        self.host_id = host.host_id
        self._data: BlobServiceClient | None = None
        self._hosts: BlobServiceClient | None = None
        self._queue: SharedBlobQueue | None = None

    def start(self) -> None:
        opts = self.options
        self._data = blob_service_for(opts.connection)
        self._hosts = blob_service_for(HOST_CONNECTION)
        self._queue = SharedBlobQueue.join(self)
        self.spawn(self._scan_loop(), name=f"blob-{self.spec.name}")
        logger.info(
            "blob trigger %s: %s/%s (host id %s, queue %s, poisonBlobThreshold %d)",
            self.spec.name,
            opts.container,
            opts.pattern,
            self.host_id,
            self._queue.queue_name,
            opts.poison_threshold,
        )

    async def wait_listening(self) -> str | None:
        unable = await super().wait_listening()
        if unable is None and self._queue is not None:
            unable = await self._queue.wait_listening()
        return unable

    async def stop(self) -> None:
        await super().stop()
        if self._queue is not None:
            await self._queue.leave(self)
            self._queue = None
        await close_quietly(self._data, self._hosts)
        self._data = self._hosts = None

    # -- the scan: find new blob versions, queue each once -----------------------------------

    async def _scan_loop(self) -> None:
        assert self._data is not None
        container = self._data.get_container_client(self.options.container)
        last_sweep: Any = None
        retry: set[str] = set()
        while True:
            try:
                last_sweep, retry = await self._scan(container, last_sweep, retry)
            except asyncio.CancelledError:
                raise
            except AzureError as exc:
                logger.warning("blob trigger %s: scan: %s", self.spec.name, exc)
                self.unable_to_start(f"{type(exc).__name__}: {first_line(exc)}")
            else:
                self.listening()  # a blob written from now on is in a later listing
            await asyncio.sleep(SCAN_INTERVAL)

    async def _scan(
        self, container: ContainerClient, last_sweep: Any, retry: set[str]
    ) -> tuple[Any, set[str]]:
        """One listing: every blob modified at or after ``last_sweep`` (and the ones to try
        again) notified; the sweep's latest time and the blobs to try again next time."""
        latest = last_sweep
        failed: set[str] = set()
        try:
            async for item in container.list_blobs():
                modified = item.last_modified
                if latest is None or modified > latest:
                    latest = modified
                if last_sweep is not None and modified < last_sweep and item.name not in retry:
                    continue
                captured = self.pattern.match(item.name)
                if captured is None:
                    continue
                if not await self._notify(item.name, quoted_etag(item.etag)):
                    failed.add(item.name)
        except ResourceNotFoundError:
            return last_sweep, retry  # the container does not exist (yet)
        return latest, failed

    def _receipt(self, blob_name: str, etag: str) -> BlobClient:
        assert self._hosts is not None
        name = (
            f"{RECEIPTS_DIRECTORY}/{self.host_id}/{self.function_id}/{etag}/"
            f"{self.options.container}/{blob_name}"
        )
        return self._hosts.get_blob_client(HOSTS_CONTAINER, name)

    async def _notify(self, blob_name: str, etag: str) -> bool:
        """``BlobTriggerExecutor.ExecuteAsync``: whether this version is handled (queued now,
        or before); False: try again at the next scan."""
        receipt = self._receipt(blob_name, etag)
        state = await _receipt_state(receipt)
        if state == "complete":
            return True
        if state is None and not await _create_receipt(receipt, self._hosts):
            return False  # another instance just created it
        lease = await _acquire(receipt)
        if lease is None:
            return False  # another instance holds it
        try:
            if await _receipt_state(receipt) == "complete":
                return True
            assert self._queue is not None
            await self._queue.enqueue(
                {
                    "Type": "BlobTrigger",
                    "FunctionId": self.function_id,
                    "BlobType": "BlockBlob",
                    "ContainerName": self.options.container,
                    "BlobName": blob_name,
                    "ETag": etag,
                }
            )
            with contextlib.suppress(ResourceNotFoundError):
                await receipt.set_blob_metadata({}, lease=lease)  # Incomplete removed
            logger.info(
                "blob trigger %s: %s/%s (ETag %s) queued",
                self.spec.name,
                self.options.container,
                blob_name,
                etag,
            )
            return True
        finally:
            with contextlib.suppress(AzureError):
                await lease.release()

    # -- a queued blob: run the function ----------------------------------------------------

    async def execute(self, message: Mapping[str, Any]) -> bool:
        """``BlobQueueTriggerExecutor.ExecuteAsync``: whether the message is done with (success,
        or nothing to do)."""
        assert self._data is not None
        name = str(message.get("BlobName", ""))
        blob = self._data.get_blob_client(str(message.get("ContainerName", "")), name)
        try:
            props = await blob.get_blob_properties()
        except ResourceNotFoundError:
            logger.info("blob trigger %s: blob %s is gone; nothing to do", self.spec.name, name)
            return True
        if quoted_etag(props.etag) != quoted_etag(message.get("ETag")):
            return True  # changed since: its new version has a receipt of its own
        captured = self.pattern.match(name) or {}
        try:
            download = await blob.download_blob(
                etag=props.etag, match_condition=MatchConditions.IfNotModified
            )
            content = await download.readall()
        except (ResourceNotFoundError, HttpResponseError):
            return True  # changed or gone meanwhile
        return await self._invoke(blob, props, content, captured)

    async def _invoke(
        self, blob: BlobClient, props: BlobProperties, content: bytes, captured: dict[str, str]
    ) -> bool:
        pb = protos()
        data = (
            pb.TypedData(bytes=content)
            if self.options.data_type == "binary"
            else pb.TypedData(string=stream_text(content))
        )
        metadata: dict[str, Any] = {
            "BlobTrigger": pb.TypedData(string=f"{blob.container_name}/{blob.blob_name}"),
            "Uri": pb.TypedData(string=blob.url),
            "Properties": pb.TypedData(json=properties_json(props)),
            "Metadata": pb.TypedData(json=json.dumps(dict(props.metadata or {}))),
        }
        for key, value in captured.items():
            metadata[key] = pb.TypedData(string=value)
        where = f"{blob.container_name}/{blob.blob_name}"
        ok, _ = await self.invoke(
            data,
            trigger_metadata=metadata,
            what=f"blob trigger {self.spec.name}: {where}",
            detail=where,
        )
        return ok


async def _receipt_state(receipt: BlobClient) -> str | None:
    """``BlobReceiptManager.TryReadAsync``: None (no receipt), 'incomplete' or 'complete'."""
    try:
        props = await receipt.get_blob_properties()
    except ResourceNotFoundError:
        return None
    return "incomplete" if INCOMPLETE in (props.metadata or {}) else "complete"


async def _create_receipt(receipt: BlobClient, hosts: BlobServiceClient | None) -> bool:
    """``BlobReceiptManager.TryCreateAsync``: an empty blob with ``Incomplete``, only if none
    exists (the host container created when missing); False when another got there first."""
    for attempt in range(2):
        try:
            await receipt.upload_blob(b"", metadata={INCOMPLETE: INCOMPLETE}, overwrite=False)
            return True
        except ResourceExistsError:
            return False
        except ResourceNotFoundError:
            if attempt or hosts is None:
                raise
            with contextlib.suppress(ResourceExistsError):
                await hosts.create_container(HOSTS_CONTAINER)
        except HttpResponseError as exc:
            if exc.status_code in {409, 412}:  # a lease on it: someone else's
                return False
            raise
    return False


async def _acquire(receipt: BlobClient) -> Any:
    """``BlobReceiptManager.TryAcquireLeaseAsync``: a 30 s lease, or None when another holds
    it or the receipt is gone."""
    try:
        return await receipt.acquire_lease(lease_duration=RECEIPT_LEASE_SECONDS)
    except ResourceNotFoundError:
        return None
    except HttpResponseError as exc:
        if exc.status_code == 409:
            return None
        raise


class SharedBlobQueue(QueueTriggerListener):
    """The host's blob trigger queue, one per host id in this host, shared by its blob trigger
    functions: a queue listener whose messages are ``BlobTriggerMessage``s, run by the
    function they name (``SharedBlobQueueListener``)."""

    _shared: dict[tuple[int, str], SharedBlobQueue] = {}
    kind = "the host's"

    def __init__(self, host: HostServices, threshold: int) -> None:
        queue = f"{QUEUE_PREFIX}{host.host_id}"
        spec = FunctionSpec(
            name=f"blob trigger queue {queue}",
            function_id="",
            trigger={"type": "queueTrigger", "queueName": queue, "connection": HOST_CONNECTION},
            bindings=(),
            retry=None,
        )
        extension = {**dict(host.host_json.queues or {}), "maxDequeueCount": threshold}
        super().__init__(spec, host, extension=extension)
        self.queue_name = queue
        self._key = (id(asyncio.get_running_loop()), host.host_id)
        self._functions: dict[str, BlobTriggerListener] = {}

    @classmethod
    def join(cls, listener: BlobTriggerListener) -> SharedBlobQueue:
        key = (id(asyncio.get_running_loop()), listener.host_id)
        shared = cls._shared.get(key)
        if shared is None:
            shared = cls._shared[key] = cls(listener.host, listener.options.poison_threshold)
            shared.start()
        shared._functions[listener.function_id] = listener
        return shared

    async def leave(self, listener: BlobTriggerListener) -> None:
        """A function's listener stops (the host is stopping): no message is received any
        more (one for a function that left would be deleted as no longer served), those being
        run finish; the last to leave stops the queue."""
        self._functions.pop(listener.function_id, None)
        await self.stop_loops()
        if self._functions:
            return
        self._shared.pop(self._key, None)
        await self.stop()

    def poison_queue_name(self) -> str | None:
        return POISON_QUEUE

    async def enqueue(self, message: Mapping[str, Any]) -> None:
        """``BlobTriggerQueueWriter.EnqueueAsync`` (the queue created when missing)."""
        text = json.dumps(message)
        if self.options.message_encoding == "base64":
            text = base64.b64encode(text.encode("utf-8")).decode("ascii")
        assert self._service is not None, "the queue listener is started when joined"
        writer = self._service.get_queue_client(self.queue_name)
        try:
            await writer.send_message(text)
        except ResourceNotFoundError:
            with contextlib.suppress(ResourceExistsError):
                await writer.create_queue()
            await writer.send_message(text)

    async def _invoke(self, message: QueueMessage, body: bytes) -> bool:
        try:
            parsed = json.loads(body)
        except ValueError:
            parsed = None
        if not isinstance(parsed, dict) or not parsed.get("FunctionId"):
            logger.warning(
                "blob trigger queue: message %s: Invalid blob trigger message", message.id
            )
            return False  # a failure: back to the queue, then to the poison queue
        listener = self._functions.get(str(parsed["FunctionId"]))
        if listener is None:
            logger.info(
                "blob trigger queue: message %s names function %s, not served here; deleted",
                message.id,
                parsed["FunctionId"],
            )
            return True
        return await listener.execute(parsed)
