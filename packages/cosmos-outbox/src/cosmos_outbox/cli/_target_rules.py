"""`cosmos-outbox target-rules`: which subscriptions of the topic lack the targeted-delivery rule
(docs/upgrading.md step 6: `cosmos_outbox.servicebus._target_rules`), and, with `--yes`, give
the ones holding only Azure's `$Default` the rule `outbox-target` (then delete `$Default`). A
subscription with a filter of its own is named with the expression to give it, never changed.
Settings as the relay reads them: ServiceBusConnection (Manage rights) or
ServiceBusConnection__fullyQualifiedNamespace, and SERVICEBUS_TOPIC, from the environment (and
`--settings`, the environment winning).

Exit: 0 every subscription carries the rule (after `--yes`: now does); 1 some lack it (a dry
run, or ones left to do by hand); 2 not checked (no settings, the management API unreachable
or refusing)."""

from __future__ import annotations

import argparse
import os
import sys

from cosmos_outbox.cli._parsers import command_parser

USAGE = 2
LACKING = 1
#: The app settings it reads (the relay's names).
CONNECTION, NAMESPACE = "ServiceBusConnection", "ServiceBusConnection__fullyQualifiedNamespace"


def parser(prog: str = "cosmos-outbox") -> argparse.ArgumentParser:
    p = command_parser(
        prog,
        "target-rules",
        (
            "List the topic's subscriptions lacking the targeted-delivery rule (NOT "
            "EXISTS(outboxTarget) OR outboxTarget = '<subscription>'); with --yes, give each one "
            "holding only $Default the rule outbox-target and delete $Default. Needs Manage "
            "rights (the management API)."
        ),
    )
    p.add_argument("--topic", help="the topic [SERVICEBUS_TOPIC]")
    p.add_argument("--yes", action="store_true", help="apply (without it: list only)")
    return p


def main(argv: list[str], *, prog: str = "cosmos-outbox") -> int:
    """Run the command line (`target-rules` and its options)."""
    from cosmos_outbox.servicebus._target_rules import (
        admin_client,
        apply_target_rules,
        by_hand,
        check_target_rules,
    )

    args_after = argv[argv.index("target-rules") + 1 :] if "target-rules" in argv else argv
    args = parser(prog).parse_args(args_after)
    name = f"{prog} target-rules"
    if args.settings:
        from cosmos_outbox._relay_process.local_settings import use_local_settings

        use_local_settings(args.settings)
    topic = args.topic or os.environ.get("SERVICEBUS_TOPIC", "").strip()
    connection = os.environ.get(CONNECTION, "").strip() or None
    namespace = os.environ.get(NAMESPACE, "").strip()
    if not topic or not (connection or namespace):
        print(
            f"{name}: set SERVICEBUS_TOPIC (or --topic) and ServiceBusConnection (or "
            "ServiceBusConnection__fullyQualifiedNamespace)",
            file=sys.stderr,
        )
        return USAGE
    with admin_client(connection_string=connection, namespace=namespace or None) as admin:
        check = check_target_rules(admin, topic)
        print(check.describe())
        if not check.checked:
            return USAGE
        for sub in check.lacking:
            if sub.fixable:
                verb = "applying" if args.yes else "would apply"
                print(f"  {sub.subscription}: {verb} rule outbox-target, then delete $Default")
            else:
                print(f"  by hand: {by_hand(sub)}")
        if not check.lacking:
            return 0
        if not args.yes:
            print(f"dry run: nothing changed; {name} --yes applies it")
            return LACKING
        for line in apply_target_rules(admin, topic, check):
            print(f"  {line}")
        after = check_target_rules(admin, topic)
        print(f"now: {after.describe()}")
        return 0 if after.ok else LACKING
