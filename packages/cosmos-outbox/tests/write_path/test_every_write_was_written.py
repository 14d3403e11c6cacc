"""Never a silent success: a change that alters an aggregate without recording its event is
refused (500, logged with the aggregate type and the fields, nothing written), a new aggregate
without an event too; no coroutine is dropped: an async callable is awaited where it can be (an
`async def` handler, an `aio` outbox's route helper), refused where it is declared where it
cannot (the sync route helper and service), and an awaitable a plain function returns is
awaited, or refused (500) and closed when it would wait on I/O in a sync function; the test
kit's `check_commands` fails for such commands before they ship; the in-memory store gives
copies, as Cosmos DB does."""

from __future__ import annotations

import asyncio
import functools
import gc
import inspect
import json
import logging
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import azure.functions as func
import pytest
from conftest import body, problem

from cosmos_outbox import Outbox, Services
from cosmos_outbox._mapper import EVENT_TYPE, envelope_and_data
from cosmos_outbox._write.idempotency import IDEMPOTENCY_TYPE
from cosmos_outbox.aggregates import Aggregate, Event
from cosmos_outbox.aio import Outbox as AsyncOutbox
from cosmos_outbox.http import HttpApi, HttpCall, PathParameter, Reply
from cosmos_outbox.http._models import RequestModel, view_of
from cosmos_outbox_testing import FunctionClient, InMemory, InMemoryStore, check_commands, in_memory


class Draft(Aggregate):
    text: str

    @classmethod
    def write(cls, text: str) -> Draft:
        draft = cls(text=text)
        draft.record(DraftWritten)
        return draft

    @classmethod
    def write_silently(cls, text: str) -> Draft:
        return cls(text=text)  # no event: subscribers would never hear of it

    def edit(self, *, text: str) -> None:
        self.text = text
        self.record(DraftEdited)

    def edit_silently(self, *, text: str) -> None:
        self.text = text  # no event: the change would be lost to subscribers

    async def edit_later(self, *, text: str) -> None:
        self.edit(text=text)

    async def edit_after_io(self, *, text: str) -> None:
        await asyncio.sleep(0)  # waits on the event loop, as I/O would
        self.edit(text=text)


@Draft.event
class DraftWritten(Event):
    text: str


@Draft.event
class DraftEdited(Event):
    text: str


class EditDraft(RequestModel):
    text: str


class WriteDraft(RequestModel):
    text: str


DraftView = view_of(Draft, name="DraftView", hidden=set())
DRAFT_ID = {"id": PathParameter("id", "the draft id")}


def draft_app(
    services: Callable[[], Services],
    *,
    build: Callable[[Any], Any] | None = None,
    apply: Callable[..., object] = Draft.edit_silently,
    outbox_kind: type[Outbox] | type[AsyncOutbox] = Outbox,
) -> func.FunctionApp:
    outbox = outbox_kind([Draft], services=services)
    drafts = outbox.routes(Draft, view=DraftView)
    drafts.create(
        route="drafts",
        request=WriteDraft,
        summary="Write a draft",
        build=build or (lambda b: Draft.write(b.text)),
    )
    drafts.read(route="drafts/{id}", summary="Read a draft")
    drafts.update(
        route="drafts/{id}", method="PATCH", request=EditDraft, apply=apply, summary="Edit a draft"
    )
    return outbox.function_app(drafts, title="Drafts")


class Drafts:
    def __init__(self, **kwargs: Any) -> None:
        self.memory: InMemory = in_memory()
        self.app = draft_app(lambda: self.memory.services, **kwargs)
        self.client = FunctionClient(self.app)

    def stored(self, draft_id: str) -> list[dict[str, Any]]:
        return sorted(
            (d for (pk, _), d in self.memory.store.documents.items() if pk == draft_id),
            key=lambda d: d["id"],
        )


@pytest.fixture
def drafts() -> Drafts:
    return Drafts()


@pytest.fixture
def no_coroutine_dropped() -> Iterator[None]:
    """Fails the test if a coroutine was created and never awaited."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
        gc.collect()
    dropped = [w for w in caught if "was never awaited" in str(w.message)]
    assert not dropped, dropped


def created(drafts: Drafts, text: str = "first") -> tuple[str, str]:
    answer = drafts.client.request("POST", "drafts", body={"text": text})
    assert answer.status_code == 201, answer.get_body()
    return body(answer)["id"], answer.headers["ETag"]


# -- a change without its event ------------------------------------------------------------


@pytest.mark.parametrize("key", [None, "edit-1"], ids=["plain", "idempotency-key"])
def test_a_change_without_its_event_answers_500_logs_it_and_writes_nothing(
    drafts: Drafts, caplog: pytest.LogCaptureFixture, key: str | None
) -> None:
    draft_id, etag = created(drafts)
    before = drafts.stored(draft_id)
    headers = {"Idempotency-Key": key} if key else {}
    with caplog.at_level(logging.ERROR):
        answer = drafts.client.request(
            "PATCH", f"drafts/{draft_id}", body={"text": "second"}, headers=headers
        )
    assert problem(answer, 500)["detail"] == "an unexpected error occurred"  # no internals
    [record] = [r for r in caplog.records if r.getMessage().startswith("change refused")]
    assert getattr(record, "aggregate.type") == "draft"
    assert getattr(record, "aggregate.changed_fields") == ["text"]
    assert drafts.stored(draft_id) == before  # no event, no replace, no idempotency record
    assert not [d for d in before if d["type"] in (EVENT_TYPE, IDEMPOTENCY_TYPE)][1:]
    read = drafts.client.request("GET", f"drafts/{draft_id}")
    assert (read.status_code, body(read)["text"], read.headers["ETag"]) == (200, "first", etag)


def test_a_change_with_its_event_is_written() -> None:
    app = Drafts(apply=Draft.edit)
    draft_id, etag = created(app)
    answer = app.client.request("PATCH", f"drafts/{draft_id}", body={"text": "second"})
    assert (answer.status_code, body(answer)["text"]) == (200, "second")
    assert answer.headers["ETag"] != etag
    events = sorted(
        (envelope_and_data(d) for d in app.stored(draft_id) if d["type"] == EVENT_TYPE),
        key=lambda e: e["version"],
    )
    assert [e["action"] for e in events] == ["DraftWritten", "DraftEdited"]


def test_a_change_that_changes_nothing_answers_the_etag_it_read(drafts: Drafts) -> None:
    draft_id, etag = created(drafts)
    answer = drafts.client.request("PATCH", f"drafts/{draft_id}", body={"text": "first"})
    assert (answer.status_code, answer.headers["ETag"]) == (200, etag)


def test_a_new_aggregate_without_an_event_answers_500_and_writes_nothing() -> None:
    drafts = Drafts(build=lambda b: Draft.write_silently(b.text))
    answer = drafts.client.request("POST", "drafts", body={"text": "first"})
    problem(answer, 500)
    assert drafts.memory.store.documents == {}


def test_check_commands_fails_for_a_change_without_its_event(drafts: Drafts) -> None:
    with pytest.raises(
        AssertionError,
        match=r"Draft\.edit_silently changes \['text'\] of the "
        r"draft without recording an event",
    ):
        check_commands(drafts.app)
    check_commands(Drafts(apply=Draft.edit).app)


def test_check_commands_fails_for_a_create_without_an_event() -> None:
    drafts = Drafts(build=lambda b: Draft.write_silently(b.text))
    with pytest.raises(AssertionError, match="records no event"):
        check_commands(drafts.app)


# -- async callables -----------------------------------------------------------------------


def test_an_async_apply_is_refused_where_it_is_declared() -> None:
    with pytest.raises(TypeError, match=r"apply Draft\.edit_later is a coroutine function"):
        Drafts(apply=Draft.edit_later)


def test_an_async_build_is_refused_where_it_is_declared() -> None:
    async def build(body: WriteDraft) -> Draft:
        return Draft.write(body.text)

    with pytest.raises(TypeError, match=r"build .*build is a coroutine function"):
        Drafts(build=build)


def test_an_async_handler_is_served_by_an_async_function_and_awaited(
    no_coroutine_dropped: None,
) -> None:
    api = HttpApi()

    async def ping(call: HttpCall[None]) -> Reply:
        await asyncio.sleep(0)
        return Reply({"pong": True})

    api.operation(route="ping", method="GET", summary="Ping", status=200, errors=())(ping)
    app = func.FunctionApp()
    app.register_functions(api.blueprint)
    client = FunctionClient(app)
    assert inspect.iscoroutinefunction(client.functions["ping"].get_user_function())
    answer = client.request("GET", "ping")
    assert (answer.status_code, body(answer)) == (200, {"pong": True})


def test_an_async_apply_and_build_are_awaited_on_an_async_outbox(
    no_coroutine_dropped: None,
) -> None:
    async def build(body: WriteDraft) -> Draft:
        await asyncio.sleep(0)
        return Draft.write(body.text)

    drafts = Drafts(build=build, apply=Draft.edit_after_io, outbox_kind=AsyncOutbox)
    draft_id, etag = created(drafts)
    answer = drafts.client.request("PATCH", f"drafts/{draft_id}", body={"text": "second"})
    assert (answer.status_code, body(answer)["text"]) == (200, "second")
    assert answer.headers["ETag"] != etag
    check_commands(drafts.app)  # the async callables run, awaited, on the example


def test_check_commands_runs_an_async_outbox_s_callables_and_fails_a_silent_one() -> None:
    async def build(body: WriteDraft) -> Draft:
        await asyncio.sleep(0)
        return Draft.write(body.text)

    silent = Drafts(build=build, outbox_kind=AsyncOutbox)  # apply: Draft.edit_silently
    with pytest.raises(AssertionError, match="without recording an event"):
        check_commands(silent.app)


def test_an_awaitable_returned_by_a_plain_function_is_awaited_when_it_needs_no_io(
    no_coroutine_dropped: None,
) -> None:
    drafts = Drafts(apply=lambda draft, **changes: draft.edit_later(**changes))
    draft_id, _ = created(drafts)
    answer = drafts.client.request("PATCH", f"drafts/{draft_id}", body={"text": "second"})
    assert (answer.status_code, body(answer)["text"]) == (200, "second")
    check_commands(drafts.app)


def test_an_awaitable_that_waits_on_io_in_a_sync_function_is_refused_never_dropped(
    no_coroutine_dropped: None,
) -> None:
    drafts = Drafts(apply=lambda draft, **changes: draft.edit_after_io(**changes))
    draft_id, etag = created(drafts)
    answer = drafts.client.request("PATCH", f"drafts/{draft_id}", body={"text": "second"})
    problem(answer, 500)
    assert drafts.client.request("GET", f"drafts/{draft_id}").headers["ETag"] == etag
    with pytest.raises(AssertionError, match="waits on I/O"):
        check_commands(drafts.app)


def test_a_handler_returning_an_awaitable_that_waits_on_io_answers_500(
    no_coroutine_dropped: None,
) -> None:
    api = HttpApi()

    async def later() -> Reply:
        await asyncio.sleep(0)
        return Reply()

    api.operation(route="ping", method="GET", summary="Ping", status=200, errors=())(
        lambda call: later()
    )
    app = func.FunctionApp()
    app.register_functions(api.blueprint)
    problem(FunctionClient(app).request("GET", "ping"), 500)


def test_an_awaitable_a_sync_adapter_returns_is_awaited_on_an_async_outbox(
    no_coroutine_dropped: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The async API sees a sync adapter through its async port: what one of its methods
    returns that is awaitable (a test's stand-in for I/O that takes its time) is awaited."""
    drafts = Drafts(outbox_kind=AsyncOutbox)
    draft_id, etag = created(drafts)
    read = InMemoryStore.read

    def later(self: InMemoryStore, partition_key: str, document_id: str) -> Any:
        async def answer() -> Any:
            await asyncio.sleep(0)
            return read(self, partition_key, document_id)

        return answer()

    monkeypatch.setattr(InMemoryStore, "read", later)
    answer = drafts.client.request("GET", f"drafts/{draft_id}")
    assert (answer.status_code, answer.headers["ETag"]) == (200, etag)


def test_the_service_refuses_an_async_change_before_reading(drafts: Drafts) -> None:
    draft_id, _ = created(drafts)
    service = Outbox([Draft], services=lambda: drafts.memory.services).service(Draft)
    with pytest.raises(TypeError, match="coroutine function"):
        service.change(draft_id, functools.partial(Draft.edit_later, text="second"))


# -- the in-memory store behaves as Cosmos DB --------------------------------------------


def test_what_the_in_memory_store_gives_back_is_a_copy_of_what_it_keeps() -> None:
    store = InMemoryStore()
    document: dict[str, Any] = {
        "id": "a",
        "partitionKey": "a",
        "type": "draft",
        "data": {"tags": ["x"]},
    }
    store.put(document)
    document["data"]["tags"].append("written after")
    read = store.read("a", "a")
    assert read is not None and read["data"] == {"tags": ["x"]}
    read["data"]["tags"].append("changed by a reader")
    again = store.read("a", "a")
    assert again is not None and again["data"] == {"tags": ["x"]}


def test_the_in_memory_store_refuses_what_is_not_json() -> None:
    with pytest.raises(TypeError):
        InMemoryStore().put({"id": "a", "partitionKey": "a", "data": {1, 2}})
    assert json.dumps({"ok": True})
