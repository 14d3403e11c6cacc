"""What each subscription of the topic receives of the messages an action sends, as its rules
decide (the rules the targeted-delivery check last read, evaluated by
`cosmos_outbox._subscription_rules`): what they leave unsettled is "unknown", and why, never
counted as received."""

from __future__ import annotations

from collections.abc import Sequence

from cosmos_outbox._model import Model
from cosmos_outbox._subscription_rules import Delivery, Facts, fates
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
    check: TargetRuleCheck, messages: Sequence[Facts], names: Sequence[str] = ()
) -> dict[str, list[Delivery]]:
    """Per subscription (the topic's, and `names`), each message's fate."""
    rules = check.rules if check.checked else None
    return fates(rules, messages, names, unread=check.reason)


def received(
    check: TargetRuleCheck, messages: Sequence[Facts], names: Sequence[str] = ()
) -> list[Received]:
    """Per subscription, how many of `messages` it receives and how many are unknown."""
    return [
        Received(
            subscription=name,
            receives=sum(1 for d in seen if d.verdict == "receives"),
            unknown=sum(1 for d in seen if d.verdict == "unknown"),
            why=next((d.why for d in seen if d.verdict == "unknown"), None),
        )
        for name, seen in verdicts(check, messages, names).items()
    ]
