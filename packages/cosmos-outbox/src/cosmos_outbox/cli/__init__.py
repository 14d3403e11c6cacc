"""`cosmos-outbox`, the package's command line (also `python -m cosmos_outbox`): its commands
are found by name in the entry-point group `cosmos_outbox.commands`, which the distributions
on top of the core fill (cosmos-outbox-operators: `status`, `health`, `journey`, `documents`,
`quarantine`, `deadletters`, `subscribers`, `redrive`, `groups`, on the stores with the app's
settings),
beside the core's own (`CORE_COMMANDS`: `relay`, the relay as a process of its own;
`target-rules`, the targeted-delivery rule of the topic's subscriptions). The command
named first on the line runs with the whole line (its options before it included); an
operators' command without cosmos-outbox-operators installed says which package to install.

`main(argv)` runs it. `parser`, here in 0.4, is `cosmos_outbox_operators.cli`'s, read here with a
DeprecationWarning until 0.6 (0.4's HTTP client, `OperatorsApi`, is gone: the command line runs
on the stores)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from importlib.metadata import entry_points

from cosmos_outbox._lazy import lazy_exports

__all__ = ["COMMANDS_GROUP", "CORE_COMMANDS", "OPERATOR_COMMANDS", "main"]

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
#: The commands cosmos-outbox-operators brings, named when it is not installed.
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
)
USAGE = 2

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
