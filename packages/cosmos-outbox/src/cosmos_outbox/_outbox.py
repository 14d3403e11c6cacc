"""An app's outbox, wired: `Outbox` is the composition root an app builds its functions from.

    outbox = Outbox([Order])                        # no I/O: built on first use
    orders = outbox.routes(Order)                   # the route helper
    ...
    app = outbox.function_app(orders, title="Orders API")

One composition path (`_wiring`, below the blueprints, which take the wiring it builds). What
an outbox runs on is `Services`: the leaves (a document store, a
publisher, a payload store, a backlog estimator, the secret paging tokens are sealed with and
the TTLs), with two implementations, both made by one factory each: `services_from_settings`
(Cosmos DB, Service Bus and Blob Storage, from the validated app settings: the default) and the
test kit's `in_memory()`. Everything else (the unit of work, the relay and its telemetry, the
quarantine, the operators' use cases, the paging tokens) is built from the leaves by `Wiring`,
the same for both, once per process, on first use.

`Outbox` is the sync API (sync functions, the SDKs' sync clients, run by the worker's thread
pool); `cosmos_outbox.aio.Outbox` the async one (`async def` functions, the SDKs' `aio` clients,
on the worker's event loop). The logic is the same coroutines for both
(`cosmos_outbox._sync_over_async`).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import (
    TYPE_CHECKING,
    Any,
    ClassVar,
    Protocol,
    TypeAlias,
    TypeVar,
    Unpack,
    runtime_checkable,
)

import azure.functions as func

from cosmos_outbox._blueprints.docs import docs_blueprint
from cosmos_outbox._blueprints.relay_functions import relay_blueprint
from cosmos_outbox._domain import Aggregate
from cosmos_outbox._moved import OPERATORS, installed, moved_name
from cosmos_outbox._records import LegacyEvents
from cosmos_outbox._renamed import deprecated
from cosmos_outbox._sync_over_async import run_sync
from cosmos_outbox._wiring import Services, Wiring, services_from_settings
from cosmos_outbox._write.service import AggregateService as AsyncAggregateService
from cosmos_outbox._write.sync import AggregateService, Transaction, UnitOfWork
from cosmos_outbox._write.transaction import Transaction as AsyncTransaction
from cosmos_outbox._write.transaction import TransactionOptions
from cosmos_outbox._write.unit_of_work import UnitOfWork as AsyncUnitOfWork
from cosmos_outbox.http._aggregate_routes import AggregateRoutes
from cosmos_outbox.http._api import HttpApi
from cosmos_outbox.http._declaration import PathParameter
from cosmos_outbox.http._models import View
from cosmos_outbox.http._routing import IndexedFunctionApp
from cosmos_outbox.http.bounded import BOUND_SECONDS, checked_bound
from cosmos_outbox.ports import (
    AsyncDocumentStore,
    DocumentStore,
)

if TYPE_CHECKING:
    from cosmos_outbox.operations import Operations
    from cosmos_outbox.settings import TriggerSettings

A = TypeVar("A", bound="Aggregate")

logger = logging.getLogger("cosmos_outbox")


@runtime_checkable
class Part(Protocol):
    """A part of an app that makes its blueprint for the outbox it is given (the operators' routes
    and console: `cosmos_outbox_operators.Operators()`), at `Outbox.function_app`."""

    def blueprint_for(self, outbox: Any) -> func.Blueprint:
        """The part's functions, served by `outbox` (an `Outbox`, a `cosmos_outbox.aio.Outbox`)."""
        ...


#: A part of an app: a blueprint, what holds one, or what makes one for the outbox.
Functions: TypeAlias = func.Blueprint | HttpApi | AggregateRoutes[Any] | Part
#: `function_app(operators=...)` not given.
_UNSET: Any = object()


class OutboxBase:
    """What the sync and the async outbox share: the aggregates, the services (built once per
    process on first use; no I/O before), the wiring, and the functions it registers."""

    #: whether its functions are `async def` ones, on the SDKs' `aio` clients
    asynchronous: ClassVar[bool] = False

    def __init__(
        self,
        aggregates: Iterable[type[Aggregate]] = (),
        *,
        services: Callable[[], Services] | None = None,
        legacy_events: LegacyEvents | None = None,
        bound_seconds: float = BOUND_SECONDS,
    ) -> None:
        self.aggregates: tuple[type[Aggregate], ...] = tuple(aggregates)
        #: the bound of its bounded routes (/health, the operators'), in seconds
        #: (`cosmos_outbox.http.bounded`): what they answer within, and what the OpenAPI
        #: document says they do
        self.bound_seconds = checked_bound(bound_seconds)
        asynchronous = self.asynchronous
        self._build = (
            services
            if services is not None
            else (lambda: services_from_settings(asynchronous=asynchronous))
        )
        self.legacy_events = legacy_events
        self._wiring: Wiring | None = None
        self._lock = threading.Lock()

    def services(self) -> Services:
        """The services, built on first use (once per process)."""
        return self.wiring().services

    def wiring(self) -> Wiring:
        wiring = self._wiring  # built once: every request after the first finds it here
        if wiring is not None:
            return wiring
        with self._lock:
            if self._wiring is None:
                self._wiring = Wiring(self._build(), legacy=self.legacy_events)
            return self._wiring

    @contextlib.contextmanager
    def override(self, services: Services) -> Iterator[Services]:
        """Run on `services` inside the block (a test's in-memory ones), then on what it ran on
        before."""
        with self._lock:
            before, self._wiring = self._wiring, Wiring(services, legacy=self.legacy_events)
        try:
            yield services
        finally:
            with self._lock:
                self._wiring = before

    def _checked(self, kind: type[A]) -> type[A]:
        if kind not in self.aggregates:
            raise ValueError(
                f"{kind.__qualname__} is not an aggregate of this outbox: "
                "add it to Outbox(aggregates=...)"
            )
        return kind

    def _core_service(self, kind: type[A]) -> AsyncAggregateService[A]:
        return AsyncAggregateService(self._checked(kind), lambda: self.wiring().unit_of_work())

    def routes(
        self,
        kind: type[A],
        *,
        view: type[View] | None = None,
        id_parameter: PathParameter | None = None,
        auth_level: func.AuthLevel = func.AuthLevel.FUNCTION,
        etag_request_header: bool = False,
    ) -> AggregateRoutes[A]:
        """The route helper for `kind`: its `create`, `read` and `update` declare routes on a
        blueprint of their own (its route parameter `id`: `id_parameter`, else "the <type>
        id"), served by this outbox; answers show `view` (default: every field)."""
        parameter = id_parameter or PathParameter("id", f"the {kind.aggregate_type} id")
        api = HttpApi(
            parameters={parameter.name: parameter},
            auth_level=auth_level,
            etag_request_header=etag_request_header,
        )
        return AggregateRoutes(
            api,
            self._checked(kind),
            lambda: self._core_service(kind),
            view=view,
            asynchronous=self.asynchronous,
        )

    def relay_blueprint(self, *, triggers: TriggerSettings | None = None) -> func.Blueprint:
        """The relay (`relay_events`, the change-feed trigger) and the backlog timer
        (`outbox_backlog`); their trigger settings read from the app settings now, at
        indexing, unless given."""
        return relay_blueprint(self.wiring, asynchronous=self.asynchronous, triggers=triggers)

    def operators_blueprint(self, **options: Any) -> func.Blueprint:
        """Deprecated (removed in 0.6): the operators' routes and console are
        cosmos-outbox-operators': `cosmos_outbox_operators.operators_blueprint(outbox, ...)`, or
        `Operators(...)` among `function_app`'s parts. Same options, same blueprint."""
        deprecated(
            "Outbox.operators_blueprint",
            "cosmos_outbox_operators.operators_blueprint(outbox, ...) (pip install "
            "cosmos-outbox-operators)",
        )
        build = moved_name(f"{OPERATORS}.operators_blueprint")
        blueprint: func.Blueprint = build(self, **options)
        return blueprint

    def operations(self) -> Operations:
        """The operators' one API (`cosmos_outbox.operations`): status, quarantine, dead
        letters, journey, subscribers' holds, re-drive, by role; what every way in calls."""
        return self.wiring().operations()

    def docs_blueprint(
        self, functions: Callable[[], Sequence[Any]], *, title: str, description: str = ""
    ) -> func.Blueprint:
        """/health (the store answers; "degraded", with what the relay is stuck on, when the
        relay says it is blocked), /openapi.json (every route of `functions()` and the events
        of this outbox's aggregates) and the 404/405 fallback."""
        return docs_blueprint(
            functions,
            health_answer=lambda: self.operations().status.health(),
            title=title,
            description=description,
            aggregates=self.aggregates,
            asynchronous=self.asynchronous,
            bound_seconds=self.bound_seconds,
        )

    def function_app(
        self,
        *parts: Functions,
        title: str,
        description: str = "",
        http_auth_level: func.AuthLevel = func.AuthLevel.FUNCTION,
        relay: bool = True,
        operators: Any = _UNSET,
        **options: Any,
    ) -> func.FunctionApp:
        """The app: `parts` (blueprints, the route helper's routes, or a part that makes its
        blueprint for this outbox: the operators' routes and console,
        `cosmos_outbox_operators.Operators()`), then the relay's (unless `relay=False`: it runs
        in another app) and the docs' (health, the OpenAPI document of every route and of the
        events of this outbox's aggregates, the 404/405 fallback).

        `operators` is deprecated (removed in 0.6): `Operators(models=...)` among the parts says
        it. Until then, `operators=True` or an `OperatorModels` registers the operators' routes as
        0.4 did (cosmos-outbox-operators installed, else an error naming it), `operators=False`
        none; left out, an app given no `Operators` part gets them as in 0.4 where
        cosmos-outbox-operators is installed, with a DeprecationWarning (none where it is not:
        an app on the core alone)."""
        app = IndexedFunctionApp(http_auth_level=http_auth_level, **options)
        for part in parts:
            app.register_functions(self._blueprint_of(part))
        if relay:
            app.register_functions(self.relay_blueprint())
        if operators is not False and not any(_is_operators(part) for part in parts):
            asked = operators is not _UNSET
            if asked or installed(OPERATORS):
                deprecated(
                    "Outbox.function_app(operators=...)"
                    if asked
                    else "Outbox.function_app registering the operators' routes unasked",
                    "cosmos_outbox_operators.Operators() among the parts, e.g. "
                    "outbox.function_app(orders, Operators(), title=...)",
                )
                make = moved_name(f"{OPERATORS}.Operators")
                models = {} if isinstance(operators, bool) or not asked else {"models": operators}
                app.register_functions(make(**models).blueprint_for(self))
        app.register_functions(
            self.docs_blueprint(app.get_functions, title=title, description=description)
        )
        return app

    def _blueprint_of(self, part: Functions) -> func.Blueprint:
        if isinstance(part, AggregateRoutes):
            part = part.api
        if isinstance(part, HttpApi):
            return part.blueprint
        if isinstance(part, func.Blueprint):
            return part
        return part.blueprint_for(self)


def _is_operators(part: object) -> bool:
    """Whether `part` is the operators' (a part of cosmos-outbox-operators')."""
    return isinstance(part, Part) and type(part).__module__.startswith(OPERATORS)


class Outbox(OutboxBase):
    """The outbox of one app (the sync API): the aggregates it writes and relays, the services
    its functions run on, and the functions: the route helper's (`routes`), the relay's, the
    operators', the docs' (`function_app`, or each blueprint à la carte).

    `services`: the services factory (default: Cosmos DB, Service Bus and Blob Storage from the
    app settings); `legacy_events`: how to read event documents written before documents named
    their aggregate type and source (an older app's); `bound_seconds`: what its bounded routes
    (/health, the operators') answer within (default `cosmos_outbox.http.bounded.BOUND_SECONDS`,
    4 s; at most 230), said in its OpenAPI document."""

    asynchronous: ClassVar[bool] = False

    def unit_of_work(self) -> UnitOfWork:
        """A unit of work on this outbox's store (`with outbox.unit_of_work() as uow:`): for a
        command handled outside the route helper (a queue- or timer-triggered function, ...)."""
        return UnitOfWork(self.wiring().unit_of_work())

    def service(self, kind: type[A]) -> AggregateService[A]:
        """Create, read and change aggregates of `kind` (one of this outbox's aggregates)."""
        return AggregateService(self._core_service(kind))

    def transaction(
        self, partition_key: str, *, entity: str, **options: Unpack[TransactionOptions]
    ) -> Transaction:
        """A transaction on `partition_key` of the outbox's container: your own documents and
        the events you publish (about `entity`: their `aggregateType`; their Service Bus
        SessionId `session_id`, the partition key unless given; their CloudEvents source
        `source`, `/<entity>s` unless given; `traceparent`), committed in one transactional
        batch."""
        return Transaction(self.wiring().transaction(partition_key, entity=entity, **options))

    def session(self, partition_key: str, **options: Any) -> Transaction:
        """Deprecated (removed in 0.5): `transaction`."""
        deprecated("Outbox.session", "Outbox.transaction")
        return self.transaction(partition_key, **options)

    @property
    def store(self) -> DocumentStore:
        """The outbox's container (`cosmos_outbox.ports.DocumentStore`: point reads, documents
        of a type, a page at a time), for reads of your own that must see what your transactions
        wrote, on Azure and on the test kit's fakes alike."""
        store = self.services().store
        if not isinstance(store, DocumentStore):
            raise TypeError("this outbox's services are async: use cosmos_outbox.aio.Outbox")
        return store

    def ping(self) -> None:
        """Health: the store answers and its container exists (TransientStoreError if not)."""
        run_sync(self.wiring().store.ping())


class AsyncOutbox(OutboxBase):
    """`Outbox`, async (`cosmos_outbox.aio.Outbox`): its functions are `async def` ones on the
    worker's event loop, over the SDKs' `aio` clients (one client per process, one Service Bus
    sender per running invocation, reused); its unit of work, services and transactions are awaited.
    The route helper's `build` / `apply` may be async."""

    asynchronous: ClassVar[bool] = True

    def unit_of_work(self) -> AsyncUnitOfWork:
        """`async with outbox.unit_of_work() as uow:` (see `Outbox.unit_of_work`)."""
        return self.wiring().unit_of_work()

    def service(self, kind: type[A]) -> AsyncAggregateService[A]:
        return self._core_service(kind)

    def transaction(
        self, partition_key: str, *, entity: str, **options: Unpack[TransactionOptions]
    ) -> AsyncTransaction:
        """`async with outbox.transaction(...) as tx:` (see `Outbox.transaction`)."""
        return self.wiring().transaction(partition_key, entity=entity, **options)

    def session(self, partition_key: str, **options: Any) -> AsyncTransaction:
        """Deprecated (removed in 0.5): `transaction`."""
        deprecated("Outbox.session", "Outbox.transaction")
        return self.transaction(partition_key, **options)

    @property
    def store(self) -> AsyncDocumentStore:
        """The outbox's container (`cosmos_outbox.ports.AsyncDocumentStore`), for reads of your
        own that must see what your transactions wrote (see `Outbox.store`)."""
        return self.wiring().store

    async def ping(self) -> None:
        await self.wiring().store.ping()
