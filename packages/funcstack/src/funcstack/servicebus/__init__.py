"""The local Service Bus endpoint: an AMQP 1.0 server the unmodified azure-servicebus SDK talks to
(``UseDevelopmentEmulator=true``), with entities from the official emulator's Config.json.
See docs/servicebus.md. ``funcstack.servicebus.tail`` prints what arrives on a subscription."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from funcstack.servicebus._config import connection_string
    from funcstack.servicebus._launcher import ServiceBusEndpoint, start_servicebus

__all__ = [
    "ServiceBusEndpoint",
    "connection_string",
    "start_servicebus",
]

_WHERE = {
    "ServiceBusEndpoint": "funcstack.servicebus._launcher",
    "start_servicebus": "funcstack.servicebus._launcher",
    "connection_string": "funcstack.servicebus._config",
}


def __getattr__(name: str) -> Any:
    """The public names, imported when first used (the worker and the pytest plugin
    import this package: they pay only for what they use)."""
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_WHERE[name]), name)
