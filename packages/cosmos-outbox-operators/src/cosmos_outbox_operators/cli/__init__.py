"""The operators' command line, `cosmos-outbox <command>` (this package's commands of the core's
`cosmos-outbox`; also `python -m cosmos_outbox`): status, health, journey, documents,
quarantine, deadletters, failures (either kind, by the records' ids), subscribers, groups and
redrive, run on the app's stores with its
settings (the environment's, and a local.settings.json's with `--settings`), through the same
operations the operators' routes serve (`_direct`); docs/operating.md, "The operators' command
line". No host, no key: it can do what the settings' credentials allow.

    cosmos-outbox --settings local.settings.json status
    cosmos-outbox journey --event-id <id>
    cosmos-outbox deadletters resubmit <subscription> --all

`main(argv, outbox=...)` runs it (on an app's own outbox when given); `parser` is its command
line."""

from __future__ import annotations

from cosmos_outbox_operators.cli._commands import main, parser

__all__ = ["main", "parser"]
