"""``python -m tools.admin``: the operators' command line (``cosmos-outbox``'s operators'
commands, `cosmos_outbox_operators.cli`, of cosmos-outbox-operators) with this repository's
names: the app's URL from ``OUTBOX_API`` (or
``COSMOS_OUTBOX_API``; default the local stack of ``make run``, http://127.0.0.1:7071/api), the
admin key from ``OUTBOX_ADMIN_KEY`` (or ``COSMOS_OUTBOX_KEY``; not needed locally), the
timeout from ``OUTBOX_ADMIN_TIMEOUT`` (or ``COSMOS_OUTBOX_TIMEOUT``), and
``redrive --contact-id <id>`` for ``--aggregate-type contact --aggregate-id <id>``. Every
command and option is the package's (``python -m tools.admin --help``)::

    python -m tools.admin status
    python -m tools.admin journey --event-id <id>
    python -m tools.admin quarantine discard <eventId> --reason "why"
    python -m tools.admin deadletters resubmit contact-projection --all
    python -m tools.admin redrive --since 2026-11-22T08:00:00Z --contact-id <id>
"""

from __future__ import annotations

import os
import sys

from cosmos_outbox_operators.cli import DEFAULT_API, KEY_VARIABLE, OperatorsApi, OperatorsApiError
from cosmos_outbox_operators.cli import main as package_main

__all__ = ["DEFAULT_API", "OperatorsApi", "OperatorsApiError", "main"]

#: This repository's names of the package's variables.
ALIASES = {
    "OUTBOX_API": "COSMOS_OUTBOX_API",
    "OUTBOX_ADMIN_KEY": KEY_VARIABLE,
    "OUTBOX_ADMIN_TIMEOUT": "COSMOS_OUTBOX_TIMEOUT",
}


def main(argv: list[str] | None = None) -> int:
    for ours, theirs in ALIASES.items():
        if os.environ.get(ours) and not os.environ.get(theirs):
            os.environ[theirs] = os.environ[ours]
    args = list(argv) if argv is not None else sys.argv[1:]
    if "--contact-id" in args:
        at = args.index("--contact-id")
        contact = args[at + 1 : at + 2]
        args[at : at + 2] = ["--aggregate-type", "contact", "--aggregate-id", *contact]
    return package_main(args, prog="python -m tools.admin")


if __name__ == "__main__":
    raise SystemExit(main())
