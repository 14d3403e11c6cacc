"""The blob trigger as the Storage Blobs extension runs it on Azurite (``_blob_trigger.py``):
the container polled, a receipt per blob version in ``azure-webjobs-hosts`` so that a blob is
processed once across restarts and instances, a changed blob processed again, and a blob that
keeps failing moved to ``webjobs-blobtrigger-poison`` after ``poisonBlobThreshold`` tries.
Real azure-storage-blob/-queue SDKs; one Azurite for the module."""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from azure.storage.blob import BlobServiceClient, ContainerClient
from azure.storage.queue import QueueServiceClient

from funcstack.deadlines import SHORT, DeadlineError, wait_for
from funcstack.functions_host._launcher import RunningRunner, start_runner
from funcstack.services import Azurite

from .conftest import make_app_dir

pytestmark = pytest.mark.integration

THRESHOLD = 2
#: A non-event's window: two more scans of the container (one a second), and nothing is
#: processed again. Only an invocation fails the check, so a slow machine makes it no flakier.
SCANS = 2.5


@dataclass
class Env:
    storage: Azurite
    app_dir: Path
    out: Path
    container: str
    runners: list[RunningRunner]

    @property
    def blobs(self) -> ContainerClient:
        service = BlobServiceClient.from_connection_string(self.storage.connection_string)
        return service.get_container_client(self.container)

    def start(self) -> RunningRunner:
        runner = start_runner(
            app_dir=self.app_dir,
            settings_file=self.app_dir / "local.settings.json",
            log_path=self.out.parent / f"runner-{len(self.runners)}.log",
        )
        self.runners.append(runner)
        return runner

    def seen(self, name: str | None = None) -> list[dict[str, Any]]:
        if not self.out.exists():
            return []
        lines = [json.loads(x) for x in self.out.read_text("utf-8").splitlines() if x]
        return [x for x in lines if name is None or x["name"] == f"{self.container}/{name}"]

    def wait(self, until: Callable[[], bool], what: str, deadline: float = SHORT) -> None:
        try:
            wait_for(until, what, deadline, every=0.1)
        except DeadlineError as exc:
            raise DeadlineError(f"{exc}; seen: {self.seen()}") from None


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory, shared_azurite: Azurite) -> Iterator[Env]:
    """The run's Azurite (the container polled is this module's own), its hosts."""
    tmp = tmp_path_factory.mktemp("blobtrigger")
    storage = shared_azurite
    container = f"in-{uuid.uuid4().hex[:8]}"
    out = tmp / "seen.jsonl"
    app_dir = make_app_dir(
        tmp,
        "sample_blob_app.py",
        {
            "FUNCTIONS_WORKER_RUNTIME": "python",
            "AzureWebJobsStorage": storage.connection_string,
            "Data": storage.connection_string,
            "BLOB_CONTAINER": container,
            "BLOB_OUT": str(out),
            "AzureFunctionsWebHost__hostid": "blob-tests",
        },
    )
    (app_dir / "host.json").write_text(
        json.dumps({"version": "2.0", "extensions": {"blobs": {"poisonBlobThreshold": THRESHOLD}}})
    )
    BlobServiceClient.from_connection_string(storage.connection_string).create_container(container)
    e = Env(storage, app_dir, out, container, [])
    try:
        e.start()
        yield e
    finally:
        for runner in e.runners:
            runner.stop()


def receipts(env: Env) -> list[Any]:
    hosts = BlobServiceClient.from_connection_string(env.storage.connection_string)
    container = hosts.get_container_client("azure-webjobs-hosts")
    return list(container.list_blobs(name_starts_with="blobreceipts/", include=["metadata"]))


def test_a_blob_is_processed_once_across_a_restart(env: Env) -> None:
    etag = env.blobs.upload_blob("once.txt", b"hello").get_blob_properties().etag
    env.wait(lambda: len(env.seen("once.txt")) == 1, "the invocation")
    first = env.seen("once.txt")[0]
    assert (first["content"], first["length"], first["etag"]) == ("hello", 5, etag)
    assert first["uri"].endswith(f"/{env.container}/once.txt")
    receipt = f"blobreceipts/blob-tests/Host.Functions.on_blob/{etag}/{env.container}/once.txt"
    (found,) = [r for r in receipts(env) if r.name == receipt]
    assert "Incomplete" not in (found.metadata or {})  # complete: this version is handed over
    env.runners.pop().stop()
    env.start()  # a new host: it lists every blob again, and the receipt says "done"
    env.blobs.upload_blob("after.txt", b"restarted")
    env.wait(lambda: len(env.seen("after.txt")) == 1, "the new host's invocation")
    time.sleep(SCANS)  # a non-event: not processed again
    assert len(env.seen("once.txt")) == 1


def test_a_changed_blob_is_processed_again(env: Env) -> None:
    env.blobs.upload_blob("changed.txt", b"v1")
    env.wait(lambda: len(env.seen("changed.txt")) == 1, "the first version")
    env.blobs.upload_blob("changed.txt", b"v2", overwrite=True)
    env.wait(lambda: len(env.seen("changed.txt")) == 2, "the second version")
    assert [x["content"] for x in env.seen("changed.txt")] == ["v1", "v2"]


def test_two_instances_process_each_blob_once(env: Env) -> None:
    second = env.start()  # the same app and host id: receipts and queue are shared
    try:
        names = [f"many-{i}.txt" for i in range(6)]
        for name in names:
            env.blobs.upload_blob(name, name.encode())
        env.wait(lambda: all(env.seen(n) for n in names), "every blob")
        time.sleep(SCANS)  # a non-event: none processed twice
        assert [len(env.seen(n)) for n in names] == [1] * len(names)
    finally:
        env.runners.remove(second)
        second.stop()


def test_a_blob_that_keeps_failing_goes_to_the_poison_queue(env: Env) -> None:
    etag = env.blobs.upload_blob("poison.txt", b"fail always").get_blob_properties().etag
    queue = QueueServiceClient.from_connection_string(
        env.storage.connection_string
    ).get_queue_client("webjobs-blobtrigger-poison")

    def poisoned() -> bool:
        try:
            return bool(queue.peek_messages())
        except Exception:
            return False

    env.wait(poisoned, "the poison queue")
    (message,) = queue.peek_messages()
    assert json.loads(base64.b64decode(message.content)) == {
        "Type": "BlobTrigger",
        "FunctionId": "Host.Functions.on_blob",
        "BlobType": "BlockBlob",
        "ContainerName": env.container,
        "BlobName": "poison.txt",
        "ETag": etag,
    }
    time.sleep(SCANS)  # a non-event: not tried again once poisoned
    assert len(env.seen("poison.txt")) == THRESHOLD
