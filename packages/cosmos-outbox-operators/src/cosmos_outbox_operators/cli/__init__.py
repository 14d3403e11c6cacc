"""The operators' command line, `cosmos-outbox` (installed with the package; also
`python -m cosmos_outbox`): the operators' routes of any app on cosmos-outbox (status, health,
journey, quarantine list / replay / discard, dead letters count / list / peek / resubmit /
discard, subscribers status / release, redrive), over HTTP with the admin key in the
`x-functions-key` header, read from `COSMOS_OUTBOX_KEY` (or asked for, not echoed, when the app
wants one and the terminal is interactive): never an argument, never in a URL.

    export COSMOS_OUTBOX_API=https://<app>.azurewebsites.net/api COSMOS_OUTBOX_KEY=<master key>
    cosmos-outbox status
    cosmos-outbox journey --event-id <id>
    cosmos-outbox deadletters resubmit <subscription> --all

`main(argv)` runs it; `OperatorsApi` is its HTTP client (one call of a route, its JSON answer,
and one line, `OperatorsApiError`, when what answered is not the app). Its modules: `_client`,
the HTTP calls and their one-line errors; `_commands`, the commands, their arguments and what
each prints. Standard library only: nothing of the SDKs is imported."""

from __future__ import annotations

from cosmos_outbox_operators.cli._client import (
    DEFAULT_API,
    KEY_VARIABLE,
    OperatorsApi,
    OperatorsApiError,
)
from cosmos_outbox_operators.cli._commands import main, parser

__all__ = ["DEFAULT_API", "KEY_VARIABLE", "OperatorsApi", "OperatorsApiError", "main", "parser"]
