"""Never a silent success: a change that alters an aggregate without recording its event is
refused (500, logged with the aggregate type and the fields, nothing written), a new aggregate
without an event too; a coroutine function is refused where it is declared and an awaitable
where it is returned, never dropped; the test kit's `check_commands` fails for such commands
before they ship; the in-memory store gives copies, as Cosmos DB does."""

from __future__ import annotations

import functools
import gc
import json
import logging
import warnings
from collections.abc import Callable, Iterator
from typing import Any, ClassVar, Literal

import azure.functions as func
import pytest
from conftest import body, problem
from pydantic import ConfigDict

from cosmos_outbox._documents import EVENT_TYPE, IDEMPOTENCY_TYPE
from cosmos_outbox._domain import Aggregate, DomainEvent, event_aliases
from cosmos_outbox._outbox import Outbox, Services
from cosmos_outbox.http import HttpApi, HttpCall, PathParameter, Reply
from cosmos_outbox.http._models import RequestModel, view_of
from cosmos_outbox.http._routes import AggregateRoutes
from cosmos_outbox.testing import FunctionClient, InMemory, in_memory
from cosmos_outbox.testing._checks import check_commands
from cosmos_outbox.testing._fakes import InMemoryStore


class MemoEvent(DomainEvent):
    model_config = ConfigDict(alias_generator=event_aliases("memo"))
    aggregate_type: ClassVar[str] = "memo"


class MemoWritten(MemoEvent):
    action: Literal["MemoWritten"] = "MemoWritten"
    text: str


class MemoEdited(MemoEvent):
    action: Literal["MemoEdited"] = "MemoEdited"
    text: str


class Memo(Aggregate):
    aggregate_type: ClassVar[str] = "memo"
    collection: ClassVar[str] = "memos"
    text: str

    @classmethod
    def write(cls, text: str) -> Memo:
        memo = cls(text=text)
        memo._record(MemoWritten, text=text)
        return memo

    @classmethod
    def write_silently(cls, text: str) -> Memo:
        return cls(text=text)  # no event: subscribers would never hear of it

    def edit(self, *, text: str) -> None:
        self.text = text
        self._change(MemoEdited, text=text)

    def edit_silently(self, *, text: str) -> None:
        self.text = text  # no event: the change would be lost to subscribers

    async def edit_later(self, *, text: str) -> None:
        self.edit(text=text)


class EditMemo(RequestModel):
    text: str


class WriteMemo(RequestModel):
    text: str


MemoView = view_of(Memo, name="MemoView", hidden=set())
MEMO_ID = {"id": PathParameter("id", "the memo id")}


def memo_app(services: Callable[[], Services], *, build: Callable[[Any], Memo] | None = None,
             apply: Callable[..., object] = Memo.edit_silently) -> func.FunctionApp:
    outbox = Outbox([Memo], services=services)
    bp = func.Blueprint()  # type: ignore[no-untyped-call]  # untyped in azure-functions
    memos = AggregateRoutes(HttpApi(bp, parameters=MEMO_ID), Memo,
                            lambda: outbox.service(Memo), view=MemoView)
    memos.create(route="memos", request=WriteMemo, summary="Write a memo",
                 build=build or (lambda b: Memo.write(b.text)))
    memos.read(route="memos/{id}", summary="Read a memo")
    memos.update(route="memos/{id}", method="PATCH", request=EditMemo, apply=apply,
                 summary="Edit a memo")
    return outbox.function_app(bp, title="Memos")


class Memos:
    def __init__(self, **kwargs: Any) -> None:
        self.memory: InMemory = in_memory()
        self.app = memo_app(lambda: self.memory.services, **kwargs)
        self.client = FunctionClient(self.app)

    def stored(self, memo_id: str) -> list[dict[str, Any]]:
        return sorted((d for (pk, _), d in self.memory.store.documents.items()
                       if pk == memo_id), key=lambda d: d["id"])


@pytest.fixture
def memos() -> Memos:
    return Memos()


@pytest.fixture
def no_coroutine_dropped() -> Iterator[None]:
    """Fails the test if a coroutine was created and never awaited."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
        gc.collect()
    dropped = [w for w in caught if "was never awaited" in str(w.message)]
    assert not dropped, dropped


def created(memos: Memos, text: str = "first") -> tuple[str, str]:
    answer = memos.client.request("POST", "memos", body={"text": text})
    assert answer.status_code == 201, answer.get_body()
    return body(answer)["id"], answer.headers["ETag"]


# -- a change without its event ------------------------------------------------------------

@pytest.mark.parametrize("key", [None, "edit-1"], ids=["plain", "idempotency-key"])
def test_a_change_without_its_event_answers_500_logs_it_and_writes_nothing(
    memos: Memos, caplog: pytest.LogCaptureFixture, key: str | None
) -> None:
    memo_id, etag = created(memos)
    before = memos.stored(memo_id)
    headers = {"Idempotency-Key": key} if key else {}
    with caplog.at_level(logging.ERROR):
        answer = memos.client.request("PATCH", f"memos/{memo_id}", body={"text": "second"},
                                      headers=headers)
    assert problem(answer, 500)["detail"] == "an unexpected error occurred"  # no internals
    [record] = [r for r in caplog.records if r.getMessage().startswith("change refused")]
    assert getattr(record, "aggregate.type") == "memo"
    assert getattr(record, "aggregate.changed_fields") == ["text"]
    assert memos.stored(memo_id) == before  # no event, no replace, no idempotency record
    assert not [d for d in before if d["type"] in (EVENT_TYPE, IDEMPOTENCY_TYPE)][1:]
    read = memos.client.request("GET", f"memos/{memo_id}")
    assert (read.status_code, body(read)["text"], read.headers["ETag"]) == (200, "first", etag)


def test_a_change_with_its_event_is_written() -> None:
    app = Memos(apply=Memo.edit)
    memo_id, etag = created(app)
    answer = app.client.request("PATCH", f"memos/{memo_id}", body={"text": "second"})
    assert (answer.status_code, body(answer)["text"]) == (200, "second")
    assert answer.headers["ETag"] != etag
    events = sorted((d["data"] for d in app.stored(memo_id) if d["type"] == EVENT_TYPE),
                    key=lambda e: e["version"])
    assert [e["action"] for e in events] == ["MemoWritten", "MemoEdited"]


def test_a_change_that_changes_nothing_answers_the_etag_it_read(memos: Memos) -> None:
    memo_id, etag = created(memos)
    answer = memos.client.request("PATCH", f"memos/{memo_id}", body={"text": "first"})
    assert (answer.status_code, answer.headers["ETag"]) == (200, etag)


def test_a_new_aggregate_without_an_event_answers_500_and_writes_nothing() -> None:
    memos = Memos(build=lambda b: Memo.write_silently(b.text))
    answer = memos.client.request("POST", "memos", body={"text": "first"})
    problem(answer, 500)
    assert memos.memory.store.documents == {}


def test_check_commands_fails_for_a_change_without_its_event(memos: Memos) -> None:
    with pytest.raises(AssertionError, match=r"Memo\.edit_silently changes \['text'\] of the "
                                             r"memo without recording an event"):
        check_commands(memos.app)
    check_commands(Memos(apply=Memo.edit).app)


def test_check_commands_fails_for_a_create_without_an_event() -> None:
    memos = Memos(build=lambda b: Memo.write_silently(b.text))
    with pytest.raises(AssertionError, match="records no event"):
        check_commands(memos.app)


# -- async callables -----------------------------------------------------------------------

def test_an_async_apply_is_refused_where_it_is_declared() -> None:
    with pytest.raises(TypeError, match=r"apply Memo\.edit_later is a coroutine function"):
        Memos(apply=Memo.edit_later)


def test_an_async_build_is_refused_where_it_is_declared() -> None:
    async def build(body: WriteMemo) -> Memo:
        return Memo.write(body.text)

    with pytest.raises(TypeError, match=r"build .*build is a coroutine function"):
        Memos(build=build)


def test_an_async_handler_is_refused_where_it_is_declared() -> None:
    api = HttpApi(func.Blueprint())  # type: ignore[no-untyped-call]

    async def ping(call: HttpCall[None]) -> Reply:
        return Reply()

    with pytest.raises(TypeError, match=r"the handler .*ping is a coroutine function"):
        api.operation(route="ping", method="GET", summary="Ping", status=200, errors=())(
            ping)  # type: ignore[arg-type]


def test_an_awaitable_returned_by_a_plain_function_is_refused_never_dropped(
    no_coroutine_dropped: None
) -> None:
    memos = Memos(apply=lambda memo, **changes: memo.edit_later(**changes))
    memo_id, etag = created(memos)
    answer = memos.client.request("PATCH", f"memos/{memo_id}", body={"text": "second"})
    problem(answer, 500)
    assert memos.client.request("GET", f"memos/{memo_id}").headers["ETag"] == etag
    with pytest.raises(AssertionError, match="returned an awaitable"):
        check_commands(memos.app)


def test_a_handler_returning_an_awaitable_answers_500(no_coroutine_dropped: None) -> None:
    bp = func.Blueprint()  # type: ignore[no-untyped-call]
    api = HttpApi(bp)

    async def later() -> Reply:
        return Reply()

    api.operation(route="ping", method="GET", summary="Ping", status=200, errors=())(
        lambda call: later())  # type: ignore[arg-type, return-value]
    app = func.FunctionApp()
    app.register_functions(bp)
    problem(FunctionClient(app).request("GET", "ping"), 500)


def test_the_service_refuses_an_async_change_before_reading(memos: Memos) -> None:
    memo_id, _ = created(memos)
    service = Outbox([Memo], services=lambda: memos.memory.services).service(Memo)
    with pytest.raises(TypeError, match="coroutine function"):
        service.change(memo_id, functools.partial(Memo.edit_later, text="second"))


# -- the in-memory store behaves as Cosmos DB --------------------------------------------

def test_what_the_in_memory_store_gives_back_is_a_copy_of_what_it_keeps() -> None:
    store = InMemoryStore()
    document: dict[str, Any] = {"id": "a", "partitionKey": "a", "type": "memo",
                                "data": {"tags": ["x"]}}
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
