"""The runner drives Storage queue triggers on Azurite as the host's Storage Queues extension
does: base64 messages decoded, the trigger metadata the library's QueueMessage reads, delete on
success, visible again on failure (DequeueCount + 1), moved to ``<queue>-poison`` after
maxDequeueCount failures; polling with the host's back-off. Real azure-storage-queue SDK."""

from __future__ import annotations

import base64
import datetime as dt
import json
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from azure.core.exceptions import ResourceNotFoundError
from azure.storage.queue import QueueClient, QueueServiceClient

from funcstack.deadlines import SHORT, DeadlineError, wait_for
from funcstack.functions_host._launcher import RunningRunner, start_runner
from funcstack.functions_host._queue_trigger import (
    QueueTriggerListener,
    QueueTriggerOptions,
    decode_body,
    poison_queue_name,
    queue_service_for,
)
from funcstack.services import Azurite

from .conftest import make_app_dir

pytestmark = pytest.mark.integration

MAX_DEQUEUE = 3


@pytest.fixture(scope="module")
def azurite(shared_azurite: Azurite) -> Azurite:
    """The run's Azurite: each host here polls a queue of its own name."""
    return shared_azurite


@dataclass
class Env:
    storage: Azurite
    queue: str
    out: Path
    runner: RunningRunner

    def client(self, name: str | None = None) -> QueueClient:
        return QueueServiceClient.from_connection_string(
            self.storage.connection_string
        ).get_queue_client(name or self.queue)

    def send(self, text: str, *, queue: str | None = None, encode: bool = True) -> str:
        content = base64.b64encode(text.encode()).decode() if encode else text
        return str(self.client(queue).send_message(content).id)

    def peek(self, name: str | None = None) -> list[Any]:
        try:
            return list(self.client(name).peek_messages(max_messages=32))
        except ResourceNotFoundError:
            return []  # not created yet

    def lines(self) -> list[dict[str, Any]]:
        if not self.out.exists():
            return []
        return [json.loads(x) for x in self.out.read_text("utf-8").splitlines() if x]

    def wait(
        self, until: Callable[[list[dict[str, Any]]], bool], deadline: float = SHORT
    ) -> list[dict[str, Any]]:
        """The invocations so far, once `until` holds of them."""
        lines: list[dict[str, Any]] = []

        def done() -> bool:
            lines[:] = self.lines()
            return until(lines)

        try:
            wait_for(done, "the invocations awaited", deadline)
        except DeadlineError as exc:
            raise DeadlineError(f"{exc}; invocations so far: {lines}") from None
        return lines

    def of(self, message_id: str) -> list[dict[str, Any]]:
        return [line for line in self.lines() if line["id"] == message_id]


def host(storage: Azurite, tmp: Path, queues: dict[str, Any]) -> Env:
    queue = f"jobs-{uuid.uuid4().hex[:8]}"
    out = tmp / "out.jsonl"
    app_dir = make_app_dir(
        tmp,
        "sample_queue_app.py",
        {
            "FUNCTIONS_WORKER_RUNTIME": "python",
            "AzureWebJobsStorage": storage.connection_string,
            "JobsStorage": storage.connection_string,
            "JOBS_QUEUE": queue,
            "QUEUE_OUT": str(out),
        },
    )
    (app_dir / "host.json").write_text(
        json.dumps({"version": "2.0", "extensions": {"queues": queues}})
    )
    service = QueueServiceClient.from_connection_string(storage.connection_string)
    for name in (queue, f"plain-{queue}"):
        service.create_queue(name)
    runner = start_runner(
        app_dir=app_dir, settings_file=app_dir / "local.settings.json", log_path=tmp / "runner.log"
    )
    return Env(storage, queue, out, runner)


@pytest.fixture(scope="module")
def env(azurite: Azurite, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    e = host(azurite, tmp_path_factory.mktemp("queue"), {"maxDequeueCount": MAX_DEQUEUE})
    try:
        yield e
    finally:
        e.runner.stop()


def near(stamp: str, expected: dt.datetime, seconds: float) -> bool:
    return abs((dt.datetime.fromisoformat(stamp) - expected).total_seconds()) <= seconds


def test_a_message_is_decoded_and_comes_with_its_metadata(env: Env) -> None:
    sent_at = dt.datetime.now(dt.UTC)
    message_id = env.send("hello é")
    seen = env.wait(lambda _: bool(env.of(message_id)))
    [line] = env.of(message_id)
    assert (line["function"], line["body"], line["dequeue_count"]) == ("jobs", "hello é", 1)
    assert line["pop_receipt"]
    assert near(line["insertion_time"], sent_at, 5)
    # the service's default time to live (7 days); invisible for the listener's 10 minutes
    assert near(line["expiration_time"], sent_at + dt.timedelta(days=7), 5)
    assert near(line["time_next_visible"], sent_at + dt.timedelta(minutes=10), 5)
    assert seen
    wait_for(  # deleted on success
        lambda: not [m for m in env.peek() if m.id == message_id], "the message deleted"
    )


def test_a_connection_name_is_also_read_with_the_azure_web_jobs_prefix(env: Env) -> None:
    message_id = env.send("to the plain queue", queue=f"plain-{env.queue}")
    env.wait(lambda _: bool(env.of(message_id)))
    assert env.of(message_id)[0]["function"] == "plain"


def test_an_idle_queue_is_polled_at_least_every_second_and_a_new_message_picked_up(
    env: Env,
) -> None:
    """An idle queue is polled ever less often, up to maxPollingInterval: with none in
    host.json, the local cap of 1 s (not Azure's minute), so a message sent to a queue idle for
    a while is picked up about a second later. The bound, without a clock: the delays between
    the listener's polls of an idle queue grow to the cap and never past it. Then a message
    sent once the back-off has reached its cap is picked up (how soon is printed: a figure of
    the machine's speed, not a verdict)."""
    options = QueueTriggerOptions.from_binding({"type": "queueTrigger", "queueName": "q"})
    backoff = QueueTriggerListener._delays(SimpleNamespace(options=options))  # type: ignore[arg-type]
    delays = [backoff.next_delay() for _ in range(20)]
    assert delays == sorted(delays) and delays[0] < 0.2  # growing from the minimum (0.1 s)
    assert max(delays) == delays[-1] == options.max_polling_interval == 1.0
    time.sleep(3)  # time passing: the listener's back-off reaches its cap
    started = time.monotonic()
    message_id = env.send("after a pause")
    env.wait(lambda _: bool(env.of(message_id)))
    print(f"picked up {time.monotonic() - started:.2f} s after it was sent (polling cap 1 s)")


def test_a_failing_message_is_retried_then_moved_to_the_poison_queue(env: Env) -> None:
    text = f"fail {uuid.uuid4().hex}"
    message_id = env.send(text)
    env.wait(lambda _: len(env.of(message_id)) >= MAX_DEQUEUE)
    poison = f"{env.queue}-poison"
    stored = base64.b64encode(text.encode()).decode()  # the text as stored, base64 still
    moved = wait_for(
        lambda: [m for m in env.peek(poison) if m.content == stored], "the poison queue's copy"
    )
    assert len(moved) == 1
    time.sleep(0.5)  # a non-event: not invoked again once moved
    assert [line["dequeue_count"] for line in env.of(message_id)] == [1, 2, 3]
    assert not [m for m in env.peek() if m.id == message_id]


def test_a_message_that_is_not_base64_goes_to_the_poison_queue_uninvoked(env: Env) -> None:
    text = f"not base64 {uuid.uuid4().hex}!"
    message_id = env.send(text, encode=False)
    wait_for(
        lambda: [m for m in env.peek(f"{env.queue}-poison") if m.content == text],
        "the message in the poison queue",
    )
    assert env.of(message_id) == []


def test_with_message_encoding_none_the_text_arrives_as_sent(
    azurite: Azurite, tmp_path: Path
) -> None:
    e = host(azurite, tmp_path, {"messageEncoding": "none"})
    try:
        message_id = e.send('{"plain": "text"}', encode=False)
        e.wait(lambda _: bool(e.of(message_id)))
        assert e.of(message_id)[0]["body"] == '{"plain": "text"}'
    finally:
        e.runner.stop()


# -- options, without a host ------------------------------------------------------------------


def test_host_json_options_and_their_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("Q", "Orders")
    binding = {"type": "queueTrigger", "queueName": "%Q%"}
    defaults = QueueTriggerOptions.from_binding(binding)
    assert (defaults.queue, defaults.connection) == ("orders", "AzureWebJobsStorage")
    assert (
        defaults.batch_size,
        defaults.max_dequeue_count,
        defaults.visibility_timeout,
        defaults.message_encoding,
    ) == (16, 5, 0.0, "base64")
    assert defaults.new_batch_threshold % 8 == 0  # (16 / 2) x processor count
    assert defaults.max_polling_interval == 1.0  # the local cap when host.json sets none
    tuned = QueueTriggerOptions.from_binding(
        binding,
        {
            "batchSize": 4,
            "newBatchThreshold": 1,
            "maxPollingInterval": "00:00:30",
            "visibilityTimeout": "00:00:05",
            "maxDequeueCount": 2,
            "messageEncoding": "None",
        },
    )
    assert (
        tuned.batch_size,
        tuned.new_batch_threshold,
        tuned.max_polling_interval,
        tuned.visibility_timeout,
        tuned.max_dequeue_count,
        tuned.message_encoding,
    ) == (4, 1, 30.0, 5.0, 2, "none")


def test_poison_queue_names_and_base64() -> None:
    assert poison_queue_name("jobs") == "jobs-poison"
    assert poison_queue_name("jobs-poison") is None
    assert poison_queue_name("j" * 60) is None  # too long with the suffix
    assert decode_body(" aGk=\n", "base64") == b"hi"
    assert decode_body("hi!", "base64") is None
    assert decode_body("hi!", "none") == b"hi!"


def test_a_connection_by_queue_service_uri(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("Ident__queueServiceUri", "https://acct.queue.core.windows.net")
    client = queue_service_for("Ident")
    assert client.url.startswith("https://acct.queue.core.windows.net")
