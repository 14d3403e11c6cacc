"""Run a Functions app locally.

``python -m emulators.functions_host --app-dir . --settings local.settings.json``

Prints one JSON line on stdout when ready: ``{"ready": true, "port": N, "url": "..."}``;
logs go to stderr. SIGINT/SIGTERM stop it cleanly.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import signal
import sys

from emulators.functions_host.runner import Runner


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m emulators.functions_host", description=__doc__)
    parser.add_argument("--app-dir", default=".")
    parser.add_argument("--script", default="function_app.py",
                        help="the app's script; default: the Python v2 model's file name")
    parser.add_argument("--settings", default=None, help="local.settings.json (Values)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=7071, help="0 = a free port")
    parser.add_argument("--log-level", default="INFO")
    return parser.parse_args(argv)


async def _main(args: argparse.Namespace) -> None:
    runner = Runner(
        args.app_dir,
        script=args.script,
        settings_file=args.settings,
        host=args.host,
        port=args.port,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await runner.start_async()
    try:
        sys.stdout.write(json.dumps({"ready": True, "port": runner.port, "url": runner.url}) + "\n")
        sys.stdout.flush()
        await stop.wait()
    finally:
        await runner.stop_async()


def main(argv: list[str] | None = None) -> None:
    args = _parse(argv)
    logging.basicConfig(
        stream=sys.stderr,
        level=getattr(logging, str(args.log_level).upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
    )
    logging.getLogger("azure").setLevel(logging.WARNING)
    asyncio.run(_main(args))


if __name__ == "__main__":
    main()
