"""The operators' commands of `cosmos-outbox`, named once. The package's entry points in the
group `cosmos_outbox.commands` are made from `COMMANDS` when it is built (hatch_build.py's
metadata hook reads this file: it imports nothing), so a command added here is a command of the
installed `cosmos-outbox`; `tests/operators/test_installed_commands.py` runs each through the
installed console script, and holds this package's parser and the core's `OPERATOR_COMMANDS` to
it.

An editable install made its entry points from the list it saw: after a change here, install
the package again (`make setup` does it: the Makefile names this file)."""

from __future__ import annotations

#: What runs the commands of `cosmos_outbox_operators.cli` (its parser and `_commands._RUN`).
CLI = "cosmos_outbox_operators.cli:main"

#: The operators' commands, by name: what runs each (`module:function`, called with the whole
#: command line as `function(argv, prog=...)`, returning the exit code).
COMMANDS: dict[str, str] = {
    "status": CLI,
    "health": CLI,
    "journey": CLI,
    "documents": CLI,
    "quarantine": CLI,
    "deadletters": CLI,
    "subscribers": CLI,
    "redrive": CLI,
    "groups": CLI,
    "operations": CLI,
    "failures": CLI,
    "mcp": CLI,
}
