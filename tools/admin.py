"""``python -m tools.admin``: the operators' command line (``cosmos-outbox``'s operators'
commands, `cosmos_outbox_operators.cli`) on this repository's Contacts app: its outbox (its
aggregate and legacy events, `entrypoints.bootstrap`) on the stores of the settings in
``local.settings.json`` (``make run`` writes it; ``--settings`` names another), funcstack's
certificate trusted as the app's host trusts it, the timeout from ``OUTBOX_ADMIN_TIMEOUT`` (or
``COSMOS_OUTBOX_TIMEOUT``), and ``redrive --contact-id <id>`` for ``--aggregate-type contact
--aggregate-id <id>``. Every command and option is the package's (``python -m tools.admin
--help``)::

    python -m tools.admin status
    python -m tools.admin journey --event-id <id>
    python -m tools.admin quarantine discard <eventId> --reason "why"
    python -m tools.admin deadletters resubmit contact-projection --all
    python -m tools.admin redrive --since 2026-11-22T08:00:00Z --contact-id <id>
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

__all__ = ["SETTINGS", "main"]

#: The settings of ``make run``'s stack.
SETTINGS = Path(__file__).resolve().parents[1] / "local.settings.json"


def main(argv: list[str] | None = None) -> int:
    if os.environ.get("OUTBOX_ADMIN_TIMEOUT") and not os.environ.get("COSMOS_OUTBOX_TIMEOUT"):
        os.environ["COSMOS_OUTBOX_TIMEOUT"] = os.environ["OUTBOX_ADMIN_TIMEOUT"]
    args = list(argv) if argv is not None else sys.argv[1:]
    if "--contact-id" in args:
        at = args.index("--contact-id")
        contact = args[at + 1 : at + 2]
        args[at : at + 2] = ["--aggregate-type", "contact", "--aggregate-id", *contact]
    if "--settings" not in args and SETTINGS.exists():
        args = ["--settings", str(SETTINGS), *args]
    try:  # funcstack's Cosmos DB certificate, trusted before the SDKs are imported
        from funcstack.cosmos import local_tls

        os.environ.update(local_tls().environment())
    except ImportError:
        pass
    from cosmos_outbox import Outbox
    from cosmos_outbox_operators.cli import main as package_main
    from domain.contact import Contact
    from entrypoints.bootstrap import LEGACY_EVENTS

    outbox = Outbox((Contact,), legacy_events=LEGACY_EVENTS)
    return package_main(args, prog="python -m tools.admin", outbox=outbox)


if __name__ == "__main__":
    raise SystemExit(main())
