"""``python -m emulators.servicebus``: run the local Service Bus endpoint until SIGTERM/SIGINT."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import signal
import ssl
import sys
from pathlib import Path

from emulators.servicebus.broker import Broker
from emulators.servicebus.config import DEFAULT_CONFIG, connection_string, load_config
from emulators.servicebus.control import serve_control
from emulators.servicebus.server import Server


async def _serve(args: argparse.Namespace) -> None:
    config = load_config(Path(args.config), duplicate_window_seconds=args.duplicate_window_seconds)
    broker = Broker(config)
    server = Server(broker, settle_delay=args.settle_delay_ms / 1000)
    port = await server.start(args.host, args.port)
    ready: dict[str, object] = {
        "ready": True, "port": port, "connection_string": connection_string(args.host, port)
    }
    if args.tls_port is not None:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(args.tls_cert, args.tls_key)
        ready["tls_port"] = await server.start_tls(args.host, args.tls_port, context)
    control = None
    if args.control_port is not None:
        control, ready["control_port"] = await serve_control(broker, args.host, args.control_port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print(json.dumps(ready), flush=True)
    await stop.wait()
    if control is not None:
        control.close()
    await server.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m emulators.servicebus")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=5672)
    parser.add_argument("--config", default=str(DEFAULT_CONFIG))
    parser.add_argument(
        "--duplicate-window-seconds",
        type=float,
        default=None,
        help="override DuplicateDetectionHistoryTimeWindow of every entity",
    )
    parser.add_argument(
        "--settle-delay-ms",
        type=float,
        default=0.0,
        help="fault injection: answer each send's disposition this late (messages are "
        "accepted at once)",
    )
    parser.add_argument("--log-level", default="WARNING")
    parser.add_argument("--tls-port", type=int, default=None, help="also listen with amqps")
    parser.add_argument("--tls-cert", default=None)
    parser.add_argument("--tls-key", default=None)
    parser.add_argument(
        "--control-port", type=int, default=None,
        help="local-only entity control channel (see emulators/servicebus/control.py)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=args.log_level,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
    )
    asyncio.run(_serve(args))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
