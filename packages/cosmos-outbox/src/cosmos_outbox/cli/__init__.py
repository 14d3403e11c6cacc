"""`cosmos-outbox`, the package's command line (also `python -m cosmos_outbox`): its commands
are found by name in the entry-point group `cosmos_outbox.commands`, which the distributions
on top of the core fill (cosmos-outbox-operators: `status`, `health`, `journey`, `documents`,
`quarantine`, `deadletters`, `subscribers`, `redrive`, `groups`, `operations`, `mcp`, on the
stores with the app's settings), beside the core's own (`CORE_COMMANDS`: `relay`, the relay as a
process of its own; `target-rules`, the targeted-delivery rule of the topic's subscriptions).
The command named first on the line runs with the whole line (its options before it included);
an operators' command without cosmos-outbox-operators installed says which package to install.

The global `--settings FILE` is every command's, before the command's name or after it: a
command whose options follow its name (`relay`, `target-rules`) is handed it there. A script
written for 0.4's HTTP mode (`COSMOS_OUTBOX_API`, `COSMOS_OUTBOX_KEY` in its environment) is told
so by name, and the way now (`LEGACY_VARIABLES`).

`main(argv)` runs it. `parser`, here in 0.4, is `cosmos_outbox_operators.cli`'s, read here with a
DeprecationWarning until 0.6 (0.4's HTTP client, `OperatorsApi`, is gone: the command line runs
on the stores)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from importlib.metadata import entry_points

from cosmos_outbox._lazy import lazy_exports

__all__ = ["COMMANDS_GROUP", "CORE_COMMANDS", "LEGACY_VARIABLES", "OPERATOR_COMMANDS", "main"]

#: The entry-point group a distribution names its commands in: `name = "module:main"`, where
#: `main(argv, prog=...)` runs the whole command line and returns its exit code.
COMMANDS_GROUP = "cosmos_outbox.commands"


def _relay(argv: list[str], *, prog: str = "cosmos-outbox") -> int:
    """`relay`: the outbox's relay as a process (`cosmos_outbox.cli._relay`, imported when run)."""
    from cosmos_outbox.cli._relay import main as relay_main

    return relay_main(argv, prog=prog)


def _target_rules(argv: list[str], *, prog: str = "cosmos-outbox") -> int:
    """`target-rules`: the subscriptions lacking the targeted-delivery rule, and `--yes` to
    give it them (`cosmos_outbox.cli._target_rules`, imported when run)."""
    from cosmos_outbox.cli._target_rules import main as target_rules_main

    return target_rules_main(argv, prog=prog)


#: The core's own commands: `relay`, the outbox's relay as a process on the change feed
#: processor (`cosmos-outbox relay --help`); `target-rules`, the subscriptions of the topic
#: lacking the targeted-delivery rule and `--yes` to apply it (docs/upgrading.md, step 6).
CORE_COMMANDS: dict[str, Callable[..., int]] = {"relay": _relay, "target-rules": _target_rules}
#: The commands cosmos-outbox-operators brings, named when it is not installed (where it is, its
#: entry points are what runs: cosmos-outbox-operators' tests hold this list to its own).
OPERATOR_COMMANDS = (
    "status",
    "health",
    "journey",
    "documents",
    "quarantine",
    "deadletters",
    "subscribers",
    "redrive",
    "groups",
    "operations",
    "failures",
    "mcp",
)
USAGE = 2
FAILED = 1
#: The environment of 0.4's HTTP mode (the routes' URL, the admin key), removed in 0.5: a
#: script that still sets them is told so, and the way now (the app's settings).
LEGACY_VARIABLES = ("COSMOS_OUTBOX_API", "COSMOS_OUTBOX_KEY")
#: The setting every command needs (the outbox's container): without it, and with the HTTP
#: mode's variables set, the script is one of 0.4's.
_REQUIRED_SETTING = "COSMOS_CONTAINER"

_MOVED = {"parser": "cosmos_outbox_operators.cli.parser"}
__getattr__, __dir__ = lazy_exports(__name__, {}, renamed=_MOVED)


def _installed() -> dict[str, Callable[..., int]]:
    """The commands the installed distributions name in `COMMANDS_GROUP`, loaded when run."""
    found: dict[str, Callable[..., int]] = dict(CORE_COMMANDS)
    for point in entry_points(group=COMMANDS_GROUP):
        found.setdefault(point.name, lambda *a, _p=point, **k: _p.load()(*a, **k))
    return found


def main(argv: list[str] | None = None, *, prog: str = "cosmos-outbox") -> int:
    """Run the command line `argv` (default: the process's): the command it names, or the list
    of commands (exit 2) when it names none."""
    args = sys.argv[1:] if argv is None else list(argv)
    commands = _installed()
    named = next((a for a in args if a in commands or a in OPERATOR_COMMANDS), None)
    if named is not None and named in commands:
        if named not in CORE_COMMANDS and not _not_the_http_mode(args, prog):
            return FAILED
        if named in CORE_COMMANDS:
            args = _settings_after(args, named)
        return commands[named](args, prog=prog)
    if named is not None:
        print(
            f"{prog} {named}: this command is cosmos-outbox-operators' (the operators' "
            "commands): pip install cosmos-outbox-operators",
            file=sys.stderr,
        )
        return USAGE
    available = sorted(commands)
    missing = [c for c in OPERATOR_COMMANDS if c not in commands]
    lines = [f"usage: {prog} COMMAND [options]", ""]
    lines.append("commands: " + (", ".join(available) if available else "none installed"))
    if missing:
        lines.append(
            f"{', '.join(missing)}: pip install cosmos-outbox-operators (the operators' commands)"
        )
    stream = sys.stdout if any(a in ("-h", "--help") for a in args) else sys.stderr
    print("\n".join(lines), file=stream)
    return 0 if stream is sys.stdout else USAGE


def _settings_after(args: list[str], named: str) -> list[str]:
    """`args` with the global `--settings FILE` (given before the command's name) moved after
    it, where the command's own options are read (`relay`, `target-rules`): the global options
    are taken before the command's name too."""
    at = args.index(named)
    before = args[:at]
    moved: list[str] = []
    kept: list[str] = []
    index = 0
    while index < len(before):
        arg = before[index]
        if arg == "--settings" and index + 1 < len(before):
            moved += before[index : index + 2]
            index += 2
            continue
        (moved if arg.startswith("--settings=") else kept).append(arg)
        index += 1
    return [*kept, named, *moved, *args[at + 1 :]]


def _not_the_http_mode(args: list[str], prog: str) -> bool:
    """Whether the command may run: a script of 0.4's HTTP mode (its variables set) is told that
    the mode is gone, by name, and what to do now; it stops there when it gives no settings
    (the next line would have been "COSMOS_CONTAINER: Field required")."""
    legacy = [name for name in LEGACY_VARIABLES if os.environ.get(name)]
    if not legacy:
        return True
    settings = any(a == "--settings" or a.startswith("--settings=") for a in args)
    runs = settings or bool(os.environ.get(_REQUIRED_SETTING))
    print(
        f"{prog}: {' and '.join(legacy)} {'is' if len(legacy) == 1 else 'are'} set, for the "
        "command line's HTTP mode, removed in cosmos-outbox 0.5: the commands run on the app's "
        "stores now, with its settings (the environment's, or --settings local.settings.json); "
        f"unset {' and '.join(legacy)}"
        + ("" if runs else f" and give the settings ({_REQUIRED_SETTING}, ...)")
        + ' (docs/operating.md, "The operators\' command line")',
        file=sys.stderr,
    )
    return runs
