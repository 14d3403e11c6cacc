"""The relay: stored events in, messages out.

**Anywhere** (`cosmos-outbox relay`, or this API; `pip install "cosmos-outbox[relay]"`): the relay
as a process of its own, on cosmos-changefeed's change feed processor, with the settings the
Functions app reads and the leases the Functions trigger writes (the same processor name,
OUTBOX_PROCESSOR_NAME), so the relay moves between the trigger and these processes on its
checkpoints:

    import asyncio
    from cosmos_outbox.relay import RelayProcessor

    async def main() -> None:
        async with RelayProcessor() as relay:          # the settings from the environment
            await relay.wait_until_listening()
            print(relay.state().held)                  # the leases it processes
            await asyncio.Event().wait()               # until cancelled: the leases released

`RelayProcessor` (start / stop / `state()`), `ProcessState` (per lease: `LeaseFacts`, its owner,
continuation, last move, last error, the estimator's lag; configured, listening; `stalls`: the
held leases that do not move) and `Stall`; `run_relay` (a process until SIGTERM: the relay and its
probes, `/live`, `/ready`, `/health`) and `serve` (the same, awaited); `probe_app` (the probes as
an aiohttp application, to serve them your own way); `use_local_settings` (a
local.settings.json's Values into the environment, the environment winning), `read_local_settings`;
`default_instance_name`.

**À la carte**, for tools, benchmarks and tests that drive it without a host: `Relay` (change-feed
documents in, messages out through a publisher; `RelayReport` what one invocation did), its
`Quarantine` (stored events that cannot become messages) and `RelayTelemetry`; the outbox record
and message it sends (`OutboxRecord`, `OutboxMessage`, `to_message`; `Unreadable` a document it
could not read; `claim_check` a message whose body went to blob storage, `payload_name` where its
body is stored), scheduled events' releases at their due time (`Releases`; `ReleaseOutcome` what
one did) and the quarantine notice that takes a set-aside event's place (`quarantine_notice`,
`notice_id`, `QUARANTINE_NOTICE_SUBJECT`). An app registers the relay as Functions with
`Outbox.function_app` or `Outbox.relay_blueprint`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cosmos_outbox._lazy import lazy_exports
from cosmos_outbox._mapper import (
    QUARANTINE_NOTICE_SUBJECT,
    claim_check,
    notice_id,
    payload_name,
    quarantine_notice,
    to_message,
)
from cosmos_outbox._quarantine import Quarantine
from cosmos_outbox._records import OutboxMessage, OutboxRecord, Unreadable
from cosmos_outbox._relay.forwarding import Relay, RelayReport
from cosmos_outbox._relay.scheduled import ReleaseOutcome, Releases
from cosmos_outbox.telemetry import RelayTelemetry

if TYPE_CHECKING:  # what type checkers read; at run time: `_EXPORTS`
    from cosmos_outbox._relay_process.local_settings import (
        read_local_settings as read_local_settings,
    )
    from cosmos_outbox._relay_process.local_settings import (
        use_local_settings as use_local_settings,
    )
    from cosmos_outbox._relay_process.runner import RelayProcessor as RelayProcessor
    from cosmos_outbox._relay_process.runner import (
        default_instance_name as default_instance_name,
    )
    from cosmos_outbox._relay_process.serve import probe_app as probe_app
    from cosmos_outbox._relay_process.serve import run_relay as run_relay
    from cosmos_outbox._relay_process.serve import serve as serve
    from cosmos_outbox._relay_process.state import LeaseFacts as LeaseFacts
    from cosmos_outbox._relay_process.state import ProcessState as ProcessState
    from cosmos_outbox._relay_process.state import Stall as Stall

#: The relay anywhere, imported on first use (the change feed processor, aiohttp).
_EXPORTS = {
    "RelayProcessor": "cosmos_outbox._relay_process.runner",
    "default_instance_name": "cosmos_outbox._relay_process.runner",
    "ProcessState": "cosmos_outbox._relay_process.state",
    "LeaseFacts": "cosmos_outbox._relay_process.state",
    "Stall": "cosmos_outbox._relay_process.state",
    "run_relay": "cosmos_outbox._relay_process.serve",
    "probe_app": "cosmos_outbox._relay_process.serve",
    "serve": "cosmos_outbox._relay_process.serve",
    "read_local_settings": "cosmos_outbox._relay_process.local_settings",
    "use_local_settings": "cosmos_outbox._relay_process.local_settings",
}

__all__ = [
    *_EXPORTS,
    "QUARANTINE_NOTICE_SUBJECT",
    "OutboxMessage",
    "OutboxRecord",
    "Quarantine",
    "Relay",
    "RelayReport",
    "RelayTelemetry",
    "ReleaseOutcome",
    "Releases",
    "Unreadable",
    "claim_check",
    "notice_id",
    "payload_name",
    "quarantine_notice",
    "to_message",
]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
