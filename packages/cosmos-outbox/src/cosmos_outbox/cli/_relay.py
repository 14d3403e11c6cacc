"""`cosmos-outbox relay`: the outbox's relay as a process of its own, on the change feed
processor (`cosmos_outbox.relay.RelayProcessor`, run by `run_relay`), with the settings the
Functions app reads, from the environment -- and from a local.settings.json when asked
(`--settings`), the environment winning. Until SIGTERM or SIGINT, which release its leases."""

from __future__ import annotations

import argparse
import logging
import sys

from cosmos_outbox.cli._parsers import command_parser
from cosmos_outbox.settings import SettingsError

USAGE = 2


def parser(prog: str = "cosmos-outbox") -> argparse.ArgumentParser:
    p = command_parser(
        prog,
        "relay",
        (
            "Run the outbox's relay (change feed -> Service Bus) as a process, on the change feed "
            "processor, sharing the Functions trigger's leases (OUTBOX_PROCESSOR_NAME). Settings: "
            "the Functions app's, from the environment (and --settings). Stops on SIGTERM/SIGINT, "
            "releasing its leases."
        ),
    )
    p.add_argument(
        "--instance-name",
        help="this process's name among the relay's instances (a lease's Owner); default: "
        "CONTAINER_APP_REPLICA_NAME, else <host name>-<pid>",
    )
    p.add_argument("--host", default="127.0.0.1", help="where the probes listen [127.0.0.1]")
    p.add_argument(
        "--port",
        type=int,
        default=8080,
        help="the probes' port (/live, /ready, /health); 0: any free one [8080]",
    )
    from cosmos_outbox._relay_process.runner import lease_intervals

    names = ("lease_acquire_interval", "lease_renew_interval", "lease_expiration_interval")
    for name, default in lease_intervals(**dict.fromkeys(names)).items():
        flag = f"--{name.replace('_', '-')}"
        p.add_argument(flag, type=float, metavar="S", help=f"[the processor's, {default:g}]")
    p.add_argument(
        "--stall-after",
        type=float,
        default=300.0,
        metavar="S",
        help="a held lease with pending changes that has not moved for this long makes /health "
        "answer 503 [300]",
    )
    p.add_argument(
        "--legacy-aggregate-type",
        metavar="TYPE",
        help="read event documents written before they named their aggregate type as events "
        "of TYPE (Outbox(legacy_events=...)); with --legacy-source",
    )
    p.add_argument("--legacy-source", metavar="PATH", help="their CloudEvents source (/contacts)")
    p.add_argument("--log-level", default="INFO", help="[INFO]")
    return p


def main(argv: list[str], *, prog: str = "cosmos-outbox") -> int:
    """Run the command line (`relay` and its options; anything before `relay` is ignored)."""
    args_after = argv[argv.index("relay") + 1 :] if "relay" in argv else argv
    args = parser(prog).parse_args(args_after)
    logging.basicConfig(
        level=args.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    if logging.getLogger().level > logging.DEBUG:
        # the SDKs' INFO is a line per HTTP request and AMQP state change: kept for DEBUG
        for noisy in ("azure", "uamqp"):
            logging.getLogger(noisy).setLevel(logging.WARNING)
    try:
        return _run(args)
    except SettingsError as exc:
        print(f"{prog} relay: {exc}", file=sys.stderr)
        return USAGE


def _run(args: argparse.Namespace) -> int:
    missing = [m for m in ("aiohttp", "croniter") if not _importable(m)]
    if missing:
        print(
            f"cosmos-outbox relay needs {' and '.join(missing)}: "
            'pip install "cosmos-outbox[relay]"',
            file=sys.stderr,
        )
        return USAGE
    from cosmos_outbox._records import LegacyEvents
    from cosmos_outbox.relay import RelayProcessor, run_relay, use_local_settings
    from cosmos_outbox.settings import load_settings

    if args.settings:
        use_local_settings(args.settings)
    if bool(args.legacy_aggregate_type) != bool(args.legacy_source):
        raise SettingsError("--legacy-aggregate-type and --legacy-source go together")
    import os

    from cosmos_outbox._relay_process.exporters import configure_exporters

    settings = load_settings()
    shutdown = configure_exporters(os.environ, service_name="cosmos-outbox-relay")
    relay = RelayProcessor(
        settings,
        instance_name=args.instance_name,
        legacy_events=(
            LegacyEvents(args.legacy_aggregate_type, args.legacy_source)
            if args.legacy_aggregate_type
            else None
        ),
        lease_acquire_interval=args.lease_acquire_interval,
        lease_renew_interval=args.lease_renew_interval,
        lease_expiration_interval=args.lease_expiration_interval,
        stall_after=args.stall_after,
    )
    try:
        run_relay(relay, host=args.host, port=args.port)
    finally:
        if shutdown is not None:
            shutdown()
    return 0


def _importable(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None
