"""Run a Functions app locally.

``python -m funcstack.functions_host --app-dir . --settings local.settings.json``

Prints one JSON line on stdout when ready -- HTTP and every trigger listening (``_runner``):
``{"ready": true, "port": N, "url": "...", "groups": {"http": [...], "function:<name>": [...]},
"leases": {"<function>": {"container", "leases", "acquire", "renew", "expiration"}}}`` (the
app's function groups, and each Cosmos DB trigger's containers and lease intervals in seconds;
``"not_listening": {"<function>": "<why>"}`` for a trigger that could not start, which keeps
trying; with ``--enforce-keys`` also ``"keys": {"function": "...", "master": "..."}``), or when
it cannot start ``{"ready": false, "error": "..."}`` (the cause in one line, e.g. the worker's
indexing error verbatim) and exits with 1; logs go to stderr. SIGINT/SIGTERM stop it cleanly,
during its start too. A host whose language worker exited 3 times within 30 minutes of each
other stops itself to be recycled, as the Functions host does (``_language_worker``), and
exits with ``RECYCLE_EXIT`` (3).

``--console``: what ``func start`` shows in its terminal also goes to stdout, as JSON lines
``{"console": {"time", "level", "category", "message"}}`` (``_console.py``): a line per
invocation, the app's own logging, the host's warnings and errors.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import signal
import sys

from funcstack.functions_host._console import install_console, not_console_only
from funcstack.functions_host._cosmos_trigger.options import lease_intervals
from funcstack.functions_host._runner import Runner

#: The exit status of a host that stopped itself to be recycled (its worker's errors).
RECYCLE_EXIT = 3


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m funcstack.functions_host", description=__doc__)
    parser.add_argument("--app-dir", default=".")
    parser.add_argument(
        "--script",
        default="function_app.py",
        help="the app's script; default: the Python v2 model's file name",
    )
    parser.add_argument("--settings", default=None, help="local.settings.json (Values)")
    parser.add_argument(
        "--given",
        default="",
        metavar="NAME,...",
        help="the names of the environment variables given to this host as app settings: "
        "they win over local.settings.json; any other variable set and not empty wins over the "
        "file's value too, as with func start",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=7071, help="0 = a free port")
    parser.add_argument("--log-level", default="INFO")
    parser.add_argument(
        "--python", default=None, help="the language worker's interpreter (default: this one)"
    )
    parser.add_argument(
        "--enforce-keys",
        action="store_true",
        help="require function keys by auth level, as in Azure (the ready line "
        "gives the keys); default: no checks, as with func start",
    )
    parser.add_argument(
        "--console",
        action="store_true",
        help="also write the terminal's lines (a line per invocation, the app's "
        "logging, warnings) to stdout as JSON lines",
    )
    parser.add_argument(
        "--group",
        default=None,
        metavar="GROUP",
        help="serve one function group only, as a Flex Consumption instance "
        "does: 'http' or 'function:<name>' (default: every function)",
    )
    return parser.parse_args(argv)


logger = logging.getLogger("funcstack.functions_host")


def _say(line: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()


async def _main(args: argparse.Namespace) -> int:
    given = [name for name in str(args.given).split(",") if name]
    runner = Runner(
        args.app_dir,
        {name: os.environ[name] for name in given if name in os.environ},
        script=args.script,
        settings_file=args.settings,
        host=args.host,
        port=args.port,
        python=args.python,
        enforce_keys=args.enforce_keys,
        group=args.group,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    # A stop asked for during the start cancels it (the worker is stopped on the way out).
    starting = asyncio.create_task(runner.start_async(), name="host-start")
    stopped = asyncio.create_task(stop.wait(), name="host-stop")
    await asyncio.wait({starting, stopped}, return_when=asyncio.FIRST_COMPLETED)
    if not starting.done():
        starting.cancel()
        with contextlib.suppress(BaseException):
            await starting
        logger.info("host stopped while starting")
        return 0
    stopped.cancel()
    error = starting.exception()
    if error is not None:
        reason = str(error) or type(error).__name__
        logger.error("the host did not start: %s", reason)  # its cause, without a traceback
        _say({"ready": False, "error": reason})
        return 1
    try:
        ready: dict[str, object] = {
            "ready": True,
            "port": runner.port,
            "url": runner.url,
            "groups": runner.groups(),
            "leases": lease_intervals(runner.functions),
        }
        if runner.not_listening:
            ready["not_listening"] = runner.not_listening
        if runner.keys is not None:
            ready["keys"] = {"function": runner.keys.function_key, "master": runner.keys.master_key}
        _say(ready)
        recycled = asyncio.create_task(runner.recycle.wait(), name="host-recycle")
        stopped = asyncio.create_task(stop.wait(), name="host-stop")
        await asyncio.wait({recycled, stopped}, return_when=asyncio.FIRST_COMPLETED)
        recycled.cancel()
        stopped.cancel()
    finally:
        await runner.stop_async()
    return RECYCLE_EXIT if runner.recycle.is_set() and not stop.is_set() else 0


def main(argv: list[str] | None = None) -> None:
    args = _parse(argv)
    logging.basicConfig(
        stream=sys.stderr,
        level=getattr(logging, str(args.log_level).upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
    )
    logging.getLogger("azure").setLevel(logging.WARNING)
    if args.console:
        for handler in logging.getLogger().handlers:  # the log has the app's records already
            handler.addFilter(not_console_only)
        install_console(sys.stdout)
    sys.exit(asyncio.run(_main(args)))


if __name__ == "__main__":
    main()
