"""What each subscription of the topic receives of the messages an action sends, as Service Bus
decides it: each subscription's rules (as the targeted-delivery check last read them, kept by
the status) evaluated on each message (`cosmos_outbox._subscription_rules`). Never a count of
subscriptions assumed to take everything: a rule it cannot evaluate, or rules it could not
read, is said ("unknown", and why), never counted as received (issue 72)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from cosmos_outbox._model import Model
from cosmos_outbox._subscription_rules import Facts, delivery
from cosmos_outbox.ports import TargetRuleCheck

__all__ = ["Received", "received", "verdicts"]


class Received(Model):
    """What one subscription receives of an action's messages: `receives` of them, and
    `unknown` whose fate its rules do not settle (`why`)."""

    subscription: str
    receives: int = 0
    unknown: int = 0
    why: str | None = None

    def text(self) -> str:
        unsure = f", {self.unknown} unknown ({self.why})" if self.unknown else ""
        return f"{self.subscription} receives {self.receives}{unsure}"


def verdicts(
    check: TargetRuleCheck, messages: Sequence[Facts], names: Iterable[str] = ()
) -> dict[str, list[tuple[str, str]]]:
    """Per subscription (the topic's, and `names`), each message's verdict and why:
    receives, drops or unknown."""
    found: dict[str, list[tuple[str, str]]] = {}
    for name in sorted({*check.subscriptions, *names}):
        rules = check.rules.get(name)
        if not check.checked or rules is None:
            why = (
                f"its rules were not read: {check.reason}"
                if not check.checked
                else f"the topic {check.topic} has no subscription {name}"
            )
            found[name] = [("unknown", why)] * len(messages)
            continue
        found[name] = [(d.verdict, d.why) for d in (delivery(rules, m) for m in messages)]
    return found


def received(
    check: TargetRuleCheck, messages: Sequence[Facts], names: Iterable[str] = ()
) -> list[Received]:
    """Per subscription, how many of `messages` it receives and how many are unknown."""
    return [
        Received(
            subscription=name,
            receives=sum(1 for v, _ in seen if v == "receives"),
            unknown=sum(1 for v, _ in seen if v == "unknown"),
            why=next((why for v, why in seen if v == "unknown"), None),
        )
        for name, seen in verdicts(check, messages, names).items()
    ]
