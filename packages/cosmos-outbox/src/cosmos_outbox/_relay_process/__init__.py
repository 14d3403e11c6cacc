"""The relay as a process of its own, outside Functions (`cosmos-outbox relay`; the public names are
`cosmos_outbox.relay`'s): `runner` (`RelayProcessor`: the relay on cosmos-changefeed's change feed
processor, the backlog timer's work, scheduled events' releases), `state` (what it knows, as
facts: `ProcessState`), `serve` (its probes over HTTP, SIGTERM), `local_settings` (a
local.settings.json read as `func start` reads it), `exporters` (its OpenTelemetry exporter, as the
Functions worker configures one), `schedule_receiver` (the schedule queue's receiver).

A composition, as the Functions blueprints are: it builds its relay from the app's settings with
`cosmos_outbox._wiring`, which builds the relay of `cosmos_outbox._relay`; so it stands beside
the blueprints, above both, and not inside the relay it runs."""
