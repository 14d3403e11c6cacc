"""The local Service Bus endpoint: an AMQP 1.0 server the unmodified azure-servicebus SDK talks to
(``UseDevelopmentEmulator=true``), with entities from the official emulator's Config.json.
See docs/servicebus.md. ``funcstack.servicebus.tail`` prints what arrives on a subscription."""

from __future__ import annotations

from typing import TYPE_CHECKING

from funcstack._lazy import lazy_exports

if TYPE_CHECKING:
    from funcstack.servicebus._config import connection_string
    from funcstack.servicebus._control import control_request
    from funcstack.servicebus._launcher import ServiceBusEndpoint, start_servicebus

__all__ = [
    "ServiceBusEndpoint",
    "connection_string",
    "control_request",
    "start_servicebus",
]

# the public names, imported when first used (funcstack/_lazy.py)
__getattr__, __dir__ = lazy_exports(
    __name__,
    __all__,
    {
        "ServiceBusEndpoint": "funcstack.servicebus._launcher",
        "start_servicebus": "funcstack.servicebus._launcher",
        "connection_string": "funcstack.servicebus._config",
        "control_request": "funcstack.servicebus._control",
    },
)
