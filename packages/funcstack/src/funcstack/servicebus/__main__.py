"""``python -m funcstack.servicebus``: run the local Service Bus endpoint until SIGTERM/SIGINT."""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import logging
import signal
import ssl
import sys
from pathlib import Path

from funcstack._processes import owner_watch
from funcstack.servicebus._broker import Broker
from funcstack.servicebus._config import NamespaceConfig, connection_string, load_config
from funcstack.servicebus._control import serve_control
from funcstack.servicebus._server import Server
from funcstack.servicebus._state import Store

logger = logging.getLogger("funcstack.servicebus")


async def _serve(args: argparse.Namespace, config: NamespaceConfig) -> None:
    broker = Broker(config)
    store = Store(Path(args.state_file)) if args.state_file else None
    if store is not None:
        store.restore(broker)
        # what was restored lives as long as the endpoint: out of the garbage collector's
        # full collections, whose cost would grow with what is kept
        gc.freeze()
    server = Server(
        broker,
        settle_delay=args.settle_delay_ms / 1000,
        max_message_size=args.max_message_size,
        store=store,
    )
    port = await server.start(args.host, args.port, listening=args.listen_fd)
    ready: dict[str, object] = {
        "ready": True,
        "port": port,
        "connection_string": connection_string(args.host, port),
        "warnings": config.warnings,
    }
    for line in config.warnings:
        logger.warning("%s", line)
    if args.tls_port is not None:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(args.tls_cert, args.tls_key)
        ready["tls_port"] = await server.start_tls(args.host, args.tls_port, context)
    control = None
    if args.control_port is not None:
        control, ready["control_port"] = await serve_control(
            broker, args.host, args.control_port, listening=args.control_listen_fd
        )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    owner_watch(lambda: loop.call_soon_threadsafe(stop.set))  # ends with its starter
    print(json.dumps(ready), flush=True)
    await stop.wait()
    if control is not None:
        control.close()
    await server.stop()
    if store is not None:
        store.flush(broker)
        store.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m funcstack.servicebus")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=5672)
    parser.add_argument(
        "--config",
        default=None,
        help="entities (and subscription rules) in the official emulator's Config.json shape; "
        "without it the namespace starts empty",
    )
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
    parser.add_argument(
        "--max-message-size",
        type=int,
        default=None,
        help="largest message or batch a sender may send to any entity, in bytes, overriding "
        "the tier's (the namespace's Sku in --config: Standard 256 KB; Premium 1 MB, or an "
        "entity's MaxMessageSizeInKilobytes, and 1 MB batches)",
    )
    parser.add_argument("--log-level", default="WARNING")
    parser.add_argument(
        "--state-file",
        default=None,
        help="keep messages, locks, session state and duplicate-detection history across "
        "restarts (a SQLite database; written before each acknowledgement)",
    )
    parser.add_argument("--tls-port", type=int, default=None, help="also listen with amqps")
    parser.add_argument("--tls-cert", default=None)
    parser.add_argument("--tls-key", default=None)
    parser.add_argument(
        "--listen-fd",
        type=int,
        default=None,
        help="serve on this inherited listening socket (its port: --port) instead of binding "
        "one (started at its first connection: funcstack/_activation.py)",
    )
    parser.add_argument(
        "--control-port",
        type=int,
        default=None,
        help="local-only entity control channel (see funcstack/servicebus/_control.py)",
    )
    parser.add_argument(
        "--control-listen-fd",
        type=int,
        default=None,
        help="serve the control channel on this inherited listening socket (its port: "
        "--control-port), as --listen-fd",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=args.log_level,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
    )
    try:
        config = load_config(
            Path(args.config) if args.config else None,
            duplicate_window_seconds=args.duplicate_window_seconds,
        )
    except (ValueError, TypeError) as error:  # RuleError, ConfigError: the file and the cause
        parser.exit(2, f"{error}\n")
    except KeyError as error:
        parser.exit(2, f"{args.config}: a required key is missing: {error}\n")
    asyncio.run(_serve(args, config))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
