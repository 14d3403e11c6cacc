"""What every binding file shares: a binding's declaration as the host reads it, the errors, and
the two shapes a served binding has (an input read before the function runs, an output written
after it succeeded).

A binding's declaration is one entry of the function's ``raw_bindings`` (the worker's
``RpcFunctionMetadata``, the JSON a ``function.json`` would hold): ``type`` and ``direction``
compared ignoring case, as the host's ``BindingMetadata`` does; its other properties read
ignoring case too, as ``ExtensionBinding.GetAttributeBuilderInfo`` matches them to the
extension attribute's properties; ``%SETTING%`` resolved once, at indexing
(``INameResolver``), ``{...}`` per invocation (``expressions``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from funcstack.functions_host._bindings.expressions import BindingData, ExpressionError, Template
from funcstack.functions_host._config import SettingError, is_truthy, resolve

if TYPE_CHECKING:
    from funcstack.functions_host._bindings.clients import Clients
    from funcstack.functions_host._bindings.values import HostValue
    from funcstack.functions_host._config import HostJson

__all__ = [
    "BindingDecl",
    "BindingEnv",
    "BindingError",
    "BindingRefusedError",
    "ClientBinding",
    "InputBinding",
    "OutputBinding",
]


class BindingRefusedError(ValueError):
    """A binding funcstack cannot honour, found when the app is indexed: the reason."""


class BindingError(RuntimeError):
    """An input that could not be read or an output that could not be written: the invocation
    fails with this message, as the host fails it when a binding throws."""


@dataclass(frozen=True)
class BindingEnv:
    """What a binding gets from the host: the clients, host.json, the function's name."""

    clients: Clients
    host_json: HostJson
    function_name: str


@dataclass(frozen=True)
class BindingDecl:
    """One binding of a function, as declared."""

    raw: Mapping[str, Any]
    props: Mapping[str, Any] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "props", {str(k).casefold(): v for k, v in self.raw.items()})

    @property
    def name(self) -> str:
        return str(self.raw.get("name", ""))

    @property
    def type(self) -> str:
        return str(self.props.get("type", ""))

    @property
    def direction(self) -> str:
        return str(self.props.get("direction", "")).casefold()

    @property
    def is_trigger(self) -> bool:
        return self.type.casefold().endswith("trigger")

    def get(self, key: str) -> Any:
        """A property, ``%SETTING%`` resolved (a missing setting: BindingRefusedError)."""
        value = self.props.get(key.casefold())
        try:
            return resolve(value)
        except SettingError as exc:
            raise BindingRefusedError(str(exc)) from None

    def text(self, key: str, default: str = "") -> str:
        value = self.get(key)
        return default if value is None or value == "" else str(value)

    def connection(self, kind: str, default: str) -> str:
        """The ``connection`` property (``default`` when empty), refused when no app setting
        makes it (``_connections.connection_problem``)."""
        from funcstack.functions_host._connections import connection_problem

        name = self.text("connection", default)
        problem = connection_problem(kind, name)
        if problem is not None:
            raise BindingRefusedError(problem)
        return name

    def flag(self, key: str, default: bool = False) -> bool:
        value = self.get(key)
        if value is None:
            return default
        return value if isinstance(value, bool) else is_truthy(str(value))

    def template(self, key: str, default: str = "") -> Template:
        """A property that may hold ``{...}`` expressions."""
        try:
            return Template.parse(self.text(key, default))
        except ExpressionError as exc:
            raise BindingRefusedError(f"{key}: {exc}") from None

    @property
    def data_type(self) -> str:
        """``dataType`` lower-cased ('' when not set): string, binary, stream."""
        return self.text("dataType").casefold()

    @property
    def deferred(self) -> bool:
        """An SDK-type binding (``SupportsDeferredBinding``: the worker wants a
        ``ModelBindingData`` instead of the value)."""
        properties = self.props.get("properties")
        if not isinstance(properties, Mapping):
            return False
        flags = {str(k).casefold(): v for k, v in properties.items()}
        value = flags.get("supportsdeferredbinding")
        return value is True or is_truthy(str(value)) if value is not None else False


class ClientBinding:
    """A binding through a service's client: its name, the host's clients, and its connection
    (the ``connection`` property, else ``default_connection``), whose client the host makes
    when it starts (``Clients.want``)."""

    #: The kind of client (``Clients``' method: ``cosmos``, ``blobs``, ``queues``,
    #: ``servicebus``).
    kind: ClassVar[str]
    default_connection: ClassVar[str]

    def __init__(self, decl: BindingDecl, env: BindingEnv) -> None:
        self.name = decl.name
        self._env = env
        self._connection = decl.connection(self.kind, self.default_connection)
        env.clients.want(self.kind, self._connection)


class InputBinding(Protocol):
    """An input binding: read before the function runs; the ``TypedData`` the worker gets."""

    name: str

    async def read(self, data: BindingData) -> Any: ...


class OutputBinding(Protocol):
    """An output binding: its value written after the function succeeded."""

    name: str

    async def write(self, value: HostValue, data: BindingData) -> None: ...
