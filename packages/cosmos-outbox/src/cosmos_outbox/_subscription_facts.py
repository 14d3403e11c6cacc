"""What a subscription's rules look at (`Facts`: a message's system and application properties),
and what they cannot know (`UnknowableError`): shared by the rules (`_subscription_rules`) and
their SQL filter (`_subscription_sql`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

__all__ = ["CORRELATION_FIELDS", "INT64", "Facts", "UnknowableError", "kind_of"]

#: The system properties a correlation filter compares (lower-case: names are case-insensitive).
CORRELATION_FIELDS = (
    "correlationid",
    "messageid",
    "to",
    "replyto",
    "label",
    "sessionid",
    "replytosessionid",
    "contenttype",
)
#: System properties the broker sets when the message arrives (or the sender may leave to the
#: entity's defaults): not known before it is sent.
_BROKER_SET = frozenset(
    {
        "sequencenumber",
        "enqueuedsequencenumber",
        "enqueuedtimeutc",
        "deliverycount",
        "size",
        "expiresatutc",
        "locktoken",
        "lockeduntilutc",
        "deadlettersource",
        "state",
        "timetolive",
        "scheduledenqueuetimeutc",
        "partitionkey",
        "viapartitionkey",
        "transactionpartitionkey",
        "forcepersistence",
        "isbodyconsumed",
    }
)
INT64 = (-(2**63), 2**63 - 1)


class UnknowableError(Exception):
    """What a rule needs that Service Bus's documentation does not settle, or that is not known
    before the message is sent: the rule's answer is unknown, and this says why."""


@dataclass(frozen=True)
class Facts:
    """What rules look at: the system properties (lower-case names: `messageid`, `label`, ...;
    None: not set) and the application properties of one message."""

    system: Mapping[str, Any]
    user: Mapping[str, Any]
    _folded: dict[str, list[str]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        system = dict.fromkeys(CORRELATION_FIELDS)
        for name, value in self.system.items():
            system["label" if name.lower() == "subject" else name.lower()] = value
        object.__setattr__(self, "system", system)
        folded: dict[str, list[str]] = {}
        for name in self.user:
            folded.setdefault(name.lower(), []).append(name)
        object.__setattr__(self, "_folded", folded)

    @classmethod
    def sent(
        cls,
        *,
        message_id: str,
        properties: Mapping[str, Any],
        subject: str | None = None,
        session_id: str | None = None,
        content_type: str | None = None,
        correlation_id: str | None = None,
    ) -> Facts:
        """The facts of a message as a sender sets it (the rest of the system properties
        unset)."""
        system = {
            "messageid": message_id,
            "label": subject,
            "sessionid": session_id,
            "contenttype": content_type,
            "correlationid": correlation_id,
        }
        return cls(system=system, user=dict(properties))

    def user_value(self, name: str) -> tuple[bool, Any]:
        """(present, value) of application property `name`, its case aside."""
        names = self._folded.get(name.lower(), [])
        if len(names) > 1:
            raise UnknowableError(
                f"the message has properties {sorted(names)}: their case alone differs"
            )
        return (True, self.user[names[0]]) if names else (False, None)

    def system_value(self, name: str) -> Any:
        key = name.lower()
        key = "label" if key == "subject" else key
        if key in self.system:
            return self.system[key]
        if key in _BROKER_SET:
            raise UnknowableError(
                f"sys.{name} is set by the broker, not known before the message is sent"
            )
        raise UnknowableError(f"sys.{name} is not a Service Bus system property")


def kind_of(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "text"
    if isinstance(value, datetime):
        return "time"
    if isinstance(value, timedelta):
        return "duration"
    return type(value).__name__
