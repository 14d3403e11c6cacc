"""The targeted-delivery rule every subscription of the topic needs (0.4, docs/upgrading.md
step 6): a dead letter's resubmission, a targeted re-drive and a released version's notice carry
`outboxTarget` = the one subscription they are for; a subscription whose rules do not keep the
others' out receives them all. Its rule: `NOT EXISTS(outboxTarget) OR outboxTarget = '<sub>'`
(with a filter of its own: `(<its filter>) AND (NOT EXISTS(outboxTarget) OR ...)`).

`check_target_rules` reads the topic's subscriptions and their rules through the management API
(`ServiceBusAdministrationClient`, Manage rights) and names each subscription one of whose rules
lets another subscription's message in; `apply_target_rules` gives the ones holding only Azure's
`$Default` (a TrueFilter) the rule `outbox-target` and deletes `$Default`; the others (a filter
of their own) are named with the expression to give them. Where the management API does not
answer or refuses (a Listen/Send-only SAS; the official emulator before 2.0), the check says
"not checked" and why: it never fails the relay.

For a development emulator's connection string (`UseDevelopmentEmulator=true`: funcstack) the
admin client's requests go in plain HTTP to the connection string's host and port (azure-core's
public transport; azure-servicebus 7.15 speaks HTTPS there even for the emulator, where the .NET
SDK speaks HTTP)."""

from __future__ import annotations

import logging
import re
import threading
from typing import TYPE_CHECKING, Any

from azure.core.exceptions import (
    AzureError,
    ClientAuthenticationError,
    HttpResponseError,
    ResourceNotFoundError,
)
from azure.core.pipeline.transport import HttpRequest, RequestsTransport

from cosmos_outbox._subscription_rules import (
    CorrelationFilter,
    FalseFilter,
    Rule,
    RuleFilter,
    SqlFilter,
    TrueFilter,
    UnreadableFilter,
)
from cosmos_outbox.ports import (
    TARGET_RULES_COMMAND,
    AsyncTargetRules,
    SubscriptionLacking,
    TargetRuleCheck,
    TargetRules,
)

if TYPE_CHECKING:
    from azure.servicebus.management import RuleProperties, ServiceBusAdministrationClient

    from cosmos_outbox.settings import OutboxSettings

logger = logging.getLogger("cosmos_outbox.servicebus")

__all__ = [
    "TARGET_RULE",
    "AsyncServiceBusTargetRules",
    "ServiceBusTargetRules",
    "SubscriptionLacking",
    "TargetRuleCheck",
    "admin_client",
    "apply_target_rules",
    "check_target_rules",
    "check_target_rules_from_settings",
    "target_clause",
]

#: The name the command gives the rule (deploy/ gives it too).
TARGET_RULE = "outbox-target"
#: Azure's rule of a subscription created without one: every message.
DEFAULT_RULE = "$Default"
#: What the command to apply the rule is (named in the warnings).
COMMAND = TARGET_RULES_COMMAND


def target_clause(subscription: str) -> str:
    """The filter a subscription's rules need: messages for no one in particular, or for it."""
    return f"NOT EXISTS(outboxTarget) OR outboxTarget = '{subscription}'"


def _normal(expression: str) -> str:
    """Case and spacing aside (`NOT EXISTS ( outboxTarget )` is the same filter)."""
    collapsed = re.sub(r"\s+", " ", expression).strip().lower()
    return re.sub(r" ?([()=]) ?", r"\1", collapsed)


def keeps_others_out(rule: RuleProperties, subscription: str) -> bool:
    """Whether `rule` lets no message targeted at another subscription in: a FalseFilter, the
    clause itself, or `(<filter>) AND (<clause>)`."""
    from azure.servicebus.management import FalseRuleFilter, SqlRuleFilter, TrueRuleFilter

    f = rule.filter
    if isinstance(f, FalseRuleFilter):
        return True
    if not isinstance(f, SqlRuleFilter) or isinstance(f, TrueRuleFilter):
        return False
    expression = _normal(f.sql_expression or "")
    clause = _normal(target_clause(subscription))
    return expression in (clause, f"({clause})") or (
        expression.startswith("(") and expression.endswith(f")and({clause})")
    )


class _EmulatorHttp(RequestsTransport):  # type: ignore[misc]  # azure-core exports it lazily
    """A development emulator's management API is plain HTTP on its endpoint's port."""

    def send(self, request: HttpRequest, **kwargs: Any) -> Any:
        if request.url.startswith("https://"):
            request.url = "http://" + request.url[len("https://") :]
        return super().send(request, **kwargs)


def _is_emulator(connection_string: str) -> bool:
    return any(
        part.strip().lower() == "usedevelopmentemulator=true"
        for part in connection_string.split(";")
    )


#: Bounds on one management request: the check runs once at start, in the background.
_TIMEOUTS: dict[str, Any] = {"connection_timeout": 5, "read_timeout": 15, "retry_total": 1}


def admin_client(
    *, connection_string: str | None = None, namespace: str | None = None
) -> ServiceBusAdministrationClient:
    """The management API's client for a connection string (Manage rights) or a namespace
    (managed identity, DefaultAzureCredential: Azure Service Bus Data Owner)."""
    from azure.servicebus.management import ServiceBusAdministrationClient

    if connection_string is not None:
        options = dict(_TIMEOUTS)
        if _is_emulator(connection_string):
            options["transport"] = _EmulatorHttp(connection_timeout=5, read_timeout=15)
        return ServiceBusAdministrationClient.from_connection_string(connection_string, **options)
    if namespace:
        from azure.identity import DefaultAzureCredential

        return ServiceBusAdministrationClient(namespace, DefaultAzureCredential(), **_TIMEOUTS)
    raise ValueError("a connection string or a namespace")


#: The correlation filter's fields as the SDK names them, each the system property it compares.
_CORRELATION_ATTRIBUTES = (
    "correlation_id",
    "message_id",
    "to",
    "reply_to",
    "label",
    "session_id",
    "reply_to_session_id",
    "content_type",
)


def rule_of(rule: RuleProperties) -> Rule:
    """The management API's rule as `cosmos_outbox._subscription_rules` evaluates it: its filter
    and its action's text (a `SqlRuleAction`'s; None: no action)."""
    from azure.servicebus.management import (
        CorrelationRuleFilter,
        FalseRuleFilter,
        SqlRuleFilter,
        TrueRuleFilter,
    )

    f = rule.filter
    found: RuleFilter
    if isinstance(f, TrueRuleFilter):
        found = TrueFilter()
    elif isinstance(f, FalseRuleFilter):
        found = FalseFilter()
    elif isinstance(f, SqlRuleFilter):
        parameters = sorted((f.parameters or {}).items(), key=lambda item: item[0])
        found = SqlFilter(f.sql_expression or "", tuple(parameters))
    elif isinstance(f, CorrelationRuleFilter):
        system = tuple(
            (name.replace("_", ""), str(value))
            for name in _CORRELATION_ATTRIBUTES
            if (value := getattr(f, name, None)) not in (None, "")
        )
        found = CorrelationFilter(system, tuple((f.properties or {}).items()))
    else:
        found = UnreadableFilter(f"a filter of type {type(f).__name__}")
    action = getattr(rule.action, "sql_expression", None)
    text = action.strip() if isinstance(action, str) else ""
    return Rule(rule.name, found, text or None)


def _filter_text(rule: RuleProperties) -> str:
    f = rule.filter
    expression = getattr(f, "sql_expression", None)
    kind = type(f).__name__.replace("RuleFilter", "Filter") if f is not None else "no filter"
    return f"{rule.name}: {kind}" + (f" {expression}" if expression and kind == "SqlFilter" else "")


def check_target_rules(admin: ServiceBusAdministrationClient, topic: str) -> TargetRuleCheck:
    """List the topic's subscriptions and name each lacking the rule (see the module); an
    unreachable or refusing management API: not checked, and why."""
    from azure.servicebus.management import TrueRuleFilter

    try:
        names = tuple(s.name for s in admin.list_subscriptions(topic))
        lacking = []
        read: dict[str, tuple[Rule, ...]] = {}
        for name in names:
            rules = list(admin.list_rules(topic, name))
            read[name] = tuple(rule_of(r) for r in rules)
            letting_in = [r for r in rules if not keeps_others_out(r, name)]
            if letting_in:
                lacking.append(
                    SubscriptionLacking(
                        name,
                        tuple(_filter_text(r) for r in letting_in),
                        fixable=all(
                            r.name == DEFAULT_RULE and isinstance(r.filter, TrueRuleFilter)
                            for r in letting_in
                        ),
                        names=tuple(r.name for r in rules),
                    )
                )
    except ClientAuthenticationError as exc:
        return TargetRuleCheck(topic, False, reason=_refused(exc))
    except ResourceNotFoundError:
        return TargetRuleCheck(topic, False, reason="the management API has no such topic")
    except HttpResponseError as exc:
        if exc.status_code in (401, 403):
            return TargetRuleCheck(topic, False, reason=_refused(exc))
        return TargetRuleCheck(
            topic,
            False,
            reason=f"the management API answered HTTP {exc.status_code}: {_first_line(exc)}",
        )
    except AzureError as exc:
        return TargetRuleCheck(
            topic,
            False,
            reason=f"the management API did not answer ({type(exc).__name__}: {_first_line(exc)};"
            " the official emulator serves it from 2.0 only, on another port)",
        )
    return TargetRuleCheck(topic, True, names, tuple(lacking), rules=read)


def _refused(exc: Exception) -> str:
    return (
        "the management API refused the credentials (reading rules needs Manage rights, not a "
        f"Listen or Send SAS, or the role Azure Service Bus Data Owner): {_first_line(exc)}"
    )


def _first_line(exc: Exception) -> str:
    return (str(exc).strip().splitlines() or [""])[0][:200]


def apply_target_rules(
    admin: ServiceBusAdministrationClient, topic: str, check: TargetRuleCheck
) -> list[str]:
    """Give each fixable subscription of `check` the rule `outbox-target` (created first), then
    delete its `$Default`; returns one line per change made. The others are left as they are."""
    from azure.servicebus.management import SqlRuleFilter

    done = []
    for sub in check.lacking:
        if not sub.fixable:
            continue
        if TARGET_RULE not in sub.names:
            admin.create_rule(
                topic,
                sub.subscription,
                TARGET_RULE,
                filter=SqlRuleFilter(target_clause(sub.subscription)),
            )
            clause = target_clause(sub.subscription)
            done.append(f"{sub.subscription}: rule {TARGET_RULE} created ({clause})")
        admin.delete_rule(topic, sub.subscription, DEFAULT_RULE)
        done.append(f"{sub.subscription}: rule {DEFAULT_RULE} (TrueFilter) deleted")
    return done


def by_hand(sub: SubscriptionLacking) -> str:
    """What to do for a subscription the command leaves alone (a filter of its own)."""
    return (
        f"{sub.subscription}: give each of its rules the clause: (<its filter>) AND "
        f"({target_clause(sub.subscription)}) -- now {'; '.join(sub.rules)}"
    )


class ServiceBusTargetRules(TargetRules):
    """The `TargetRules` port on the management API (`ServiceBusAdministrationClient`): a
    client made per check (a check is rare: at a relay's start, and the operators' status keeps
    its answer for minutes), over a connection string (Manage rights) or a namespace (managed
    identity)."""

    def __init__(
        self, topic: str, *, connection_string: str | None = None, namespace: str | None = None
    ) -> None:
        self.topic = topic
        self._connection_string = connection_string
        self._namespace = namespace

    def check(self) -> TargetRuleCheck:
        if not self.topic:
            return TargetRuleCheck(self.topic, False, reason="no SERVICEBUS_TOPIC")
        if self._connection_string is None and not self._namespace:
            return TargetRuleCheck(
                self.topic, False, reason="no Service Bus connection in the settings"
            )
        try:
            admin = admin_client(
                connection_string=self._connection_string, namespace=self._namespace
            )
        except (ValueError, ImportError) as exc:
            return TargetRuleCheck(self.topic, False, reason=f"{type(exc).__name__}: {exc}")
        try:
            with admin:
                return check_target_rules(admin, self.topic)
        except Exception as exc:  # never raises: says why it could not look
            return TargetRuleCheck(
                self.topic, False, reason=f"{type(exc).__name__}: {_first_line(exc)}"
            )


class AsyncServiceBusTargetRules(AsyncTargetRules):
    """`ServiceBusTargetRules` for the async outbox: the SDK's management client is sync (HTTP,
    a few round trips), so each check runs in a worker thread, never on the event loop."""

    def __init__(
        self, topic: str, *, connection_string: str | None = None, namespace: str | None = None
    ) -> None:
        self._rules = ServiceBusTargetRules(
            topic, connection_string=connection_string, namespace=namespace
        )
        self.topic = topic

    async def check(self) -> TargetRuleCheck:
        import asyncio

        return await asyncio.to_thread(self._rules.check)


def target_rules_of(settings: OutboxSettings) -> ServiceBusTargetRules:
    """The port on the relay's settings (its topic and Service Bus connection)."""
    connection = settings.servicebus_connection
    return ServiceBusTargetRules(
        settings.servicebus_topic or "",
        connection_string=connection.get_secret_value() if connection is not None else None,
        namespace=settings.servicebus_namespace,
    )


def check_target_rules_from_settings(settings: OutboxSettings) -> TargetRuleCheck:
    """The check with the relay's settings (its topic and Service Bus connection)."""
    return target_rules_of(settings).check()


def log_target_rules(settings: OutboxSettings | None = None) -> TargetRuleCheck:
    """Run the check (the settings from the environment when not given) and log it: a warning
    naming the subscriptions lacking the rule, or why it was not checked."""
    try:
        if settings is None:
            from cosmos_outbox.settings import load_settings

            settings = load_settings()
        check = check_target_rules_from_settings(settings)
    except Exception as exc:  # the check never stops the relay: it says why it could not look
        check = TargetRuleCheck("", False, reason=f"{type(exc).__name__}: {_first_line(exc)}")
    return log_check(check)


def log_check(check: TargetRuleCheck) -> TargetRuleCheck:
    """Log a check's result: a warning naming the subscriptions lacking the rule, or why it
    was not checked; one line at INFO when every subscription carries it."""
    extra = {
        "outbox.target_rules.checked": check.checked,
        "outbox.target_rules.lacking": ",".join(s.subscription for s in check.lacking),
    }
    if check.checked and not check.lacking:
        logger.info(check.describe(), extra=extra)
    else:
        logger.warning(check.describe(), extra=extra)
    return check


_started = threading.Event()


def log_target_rules_once_in_background(rules: AsyncTargetRules | None) -> None:
    """At the Functions relay's first run: the check through the outbox's own port (the
    wiring's: Service Bus's management API, or the test kit's fake), in a thread of its own,
    once per process (the management API is HTTP, a few round trips; the relay does not wait
    for it). None: nothing to check."""
    if rules is None or _started.is_set():
        return
    _started.set()

    def run() -> None:
        import asyncio

        try:
            check = asyncio.run(rules.check())
        except Exception as exc:  # the port's check never raises; its absence is said so
            check = TargetRuleCheck("", False, reason=f"{type(exc).__name__}: {_first_line(exc)}")
        log_check(check)

    threading.Thread(target=run, name="outbox-target-rules", daemon=True).start()
