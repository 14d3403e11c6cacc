"""Service Bus trigger (queue or topic subscription), peek-lock, one message per invocation.

As the Functions host (Service Bus extension 5.x) does:

* Peek-lock. With ``autoCompleteMessages`` (binding property, else host.json
  ``extensions.serviceBus.autoCompleteMessages``, default true) a successful invocation
  completes the message and a failed one abandons it: the broker redelivers it with
  ``DeliveryCount`` + 1 (1 on the first delivery, as the host reports it) and dead-letters it
  once the entity's ``MaxDeliveryCount`` deliveries failed
  (that is the broker's job, not the host's). With ``autoCompleteMessages`` false the host does
  not settle: the message stays locked until its lock ends.
* Sessions (``isSessionsEnabled``): up to ``maxConcurrentSessions`` (default 8) sessions at a
  time, each held by one receiver that hands its messages to the function one after the other,
  in order; a session with no message for ``sessionIdleTimeout`` is released and the next
  available one taken (accepting waits up to the client's try timeout, 60 s, for one).
  Without sessions, ``maxConcurrentCalls`` (default 16 x cores) invocations at a time.
  At most ``min(slots, 2 x cores)`` slots wait on the broker at once (``_slot_gate``), as the
  extension's processor bounds concurrent session accepts.
* A retry policy on the function (``@app.retry`` or host.json ``retry``) is still applied by the
  host for Service Bus, in memory and under the same lock, before the message is abandoned;
  the host warns that such retries will not be supported (aka.ms/func-retry-policies), so the
  entity's MaxDeliveryCount is the mechanism to rely on.
* The message reaches the worker as the host sends it: the body as ``TypedData`` (``json``
  when it is JSON text, ``string`` for other UTF-8 text, ``bytes`` otherwise or with
  ``dataType: binary``), and the trigger metadata the library's ``ServiceBusMessage`` decoder
  reads (``MessageId``, ``SessionId``, ``DeliveryCount``, ``SequenceNumber``, ``LockToken``,
  ``ContentType``, ``Subject``/``Label``, ``CorrelationId``, ``EnqueuedTimeUtc``, ``ExpiresAtUtc``,
  ``ApplicationProperties``/``UserProperties``, ...).
* A function timeout is a failed invocation (the worker is restarted): abandoned.
* Locks, as the extension's ``ServiceBusProcessor`` keeps them (Azure.Messaging.ServiceBus,
  ``ReceiverManager.RenewMessageLock`` and ``SessionReceiverManager.RenewSessionLock``): while an
  invocation runs, the host renews its message's lock (``renew_message_lock``), and from the
  moment a session is accepted, the session's lock (``session.renew_lock()``), each time when
  what is left of the lock less min(half of it, 10 s) has passed (at once under 400 ms), up to
  host.json ``extensions.serviceBus.maxAutoLockRenewalDuration`` (a TimeSpan, 5 minutes by
  default; ``00:00:00`` renews nothing). Then the lock lapses at its end: the broker hands the
  message (or the session's messages) out again with ``DeliveryCount`` + 1 while the first
  invocation may still run, and settling it fails (lock lost). A renewal that fails with a lost
  lock ends the renewals; another failure is retried. For a session the limit counts from the
  accept, not per message, as in Azure (azure-sdk-for-net #35267): a session held longer loses
  its lock even while its messages keep coming.
* LOCAL DIFFERENCE: ``cardinality: many`` (batches) is not supported: an app with such a
  function is refused when it is indexed (``_bindings.plan``).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import functools
import json
import logging
import os
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import Any

from azure.servicebus import NEXT_AVAILABLE_SESSION, ServiceBusReceivedMessage
from azure.servicebus.aio import ServiceBusClient, ServiceBusReceiver
from azure.servicebus.exceptions import (
    MessageAlreadySettled,
    MessageLockLostError,
    OperationTimeoutError,
    ServiceBusError,
    SessionLockLostError,
)

from funcstack.functions_host._config import SettingError, is_truthy, resolve
from funcstack.functions_host._connections import servicebus_client_for
from funcstack.functions_host._functions import FunctionSpec
from funcstack.functions_host._listener import (
    HostServices,
    TriggerListener,
    close_quietly,
    first_line,
)
from funcstack.functions_host._metadata import json_times, utc
from funcstack.functions_host._retry import parse_timespan
from funcstack.functions_host._rpc import protos
from funcstack.functions_host._slot_gate import SlotGate

logger = logging.getLogger("funcstack.functions_host.servicebus")

DEFAULT_MAX_CONCURRENT_SESSIONS = 8
# The client's try timeout (ServiceBusRetryOptions.TryTimeout, 60 s): how long the extension
# waits to accept the next session, and on an idle session when sessionIdleTimeout is not set.
TRY_TIMEOUT = 60.0
DEFAULT_SESSION_IDLE_TIMEOUT = TRY_TIMEOUT
#: ServiceBusProcessorOptions.MaxAutoLockRenewalDuration's default.
DEFAULT_MAX_AUTO_LOCK_RENEWAL = 300.0
#: Constants.MaximumRenewBufferDuration: a lock is renewed at most this long before it ends.
MAX_RENEW_BUFFER = 10.0
_RECONNECT_SECONDS = 1.0


def renew_delay(locked_until: dt.datetime | None, now: dt.datetime) -> float:
    """How long to wait before renewing a lock held until ``locked_until``: the .NET
    processor's ``CalculateRenewDelay`` (what is left, less min(half of it, 10 s); none under
    400 ms)."""
    if locked_until is None:
        return 0.0
    if locked_until.tzinfo is None:
        locked_until = locked_until.replace(tzinfo=dt.UTC)
    remaining = (locked_until - now).total_seconds()
    if remaining < 0.4:
        return 0.0
    return remaining - min(remaining / 2, MAX_RENEW_BUFFER)


async def renew_until(
    renew: Callable[[], Awaitable[Any]],
    locked_until: Callable[[], dt.datetime | None],
    *,
    limit: float,
    stop: asyncio.Event,
    what: str,
) -> None:
    """Renew a lock as the processor does, for ``limit`` seconds from now (then let it lapse),
    until ``stop`` is set (never in the middle of a renewal). Ends at once with a lost lock;
    retries another failure."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit
    while not stop.is_set():
        delay = renew_delay(locked_until(), dt.datetime.now(dt.UTC))
        if loop.time() + delay >= deadline:
            return  # maxAutoLockRenewalDuration reached: the lock lapses at its end
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), delay)
        if stop.is_set():
            return
        try:
            await renew()
        except (MessageLockLostError, SessionLockLostError, MessageAlreadySettled) as exc:
            logger.warning("%s: renewing the lock failed, not retried: %s", what, exc)
            return
        except ServiceBusError as exc:
            logger.warning("%s: renewing the lock failed, retried: %s", what, exc)
            await asyncio.sleep(_RECONNECT_SECONDS)


def _as_bool(value: Any, default: bool) -> bool:
    if value is None:
        return default
    return value if isinstance(value, bool) else is_truthy(str(value))


@dataclass(frozen=True)
class ServiceBusTriggerOptions:
    """A ``serviceBusTrigger`` binding with app settings resolved, and the host.json options."""

    connection: str
    queue: str | None
    topic: str | None
    subscription: str | None
    sessions: bool
    auto_complete: bool
    cardinality: str
    data_type: str
    max_concurrent_calls: int
    max_concurrent_sessions: int
    session_idle_timeout: float
    #: host.json maxAutoLockRenewalDuration, in seconds (0: no renewal).
    max_auto_lock_renewal: float = DEFAULT_MAX_AUTO_LOCK_RENEWAL

    @classmethod
    def from_binding(
        cls, binding: Mapping[str, Any], host: Mapping[str, Any] | None = None
    ) -> ServiceBusTriggerOptions:
        def opt(key: str) -> Any:
            return resolve(binding.get(key))

        extension = dict(host or {})
        connection = str(opt("connection") or "")
        if not connection:
            raise SettingError("serviceBusTrigger needs 'connection'")
        queue = opt("queueName")
        topic = opt("topicName")
        subscription = opt("subscriptionName")
        if not queue and not (topic and subscription):
            raise SettingError(
                "serviceBusTrigger needs queueName, or topicName and subscriptionName"
            )
        idle = extension.get("sessionIdleTimeout")
        renewal = extension.get("maxAutoLockRenewalDuration")
        return cls(
            connection=connection,
            queue=str(queue) if queue else None,
            topic=str(topic) if topic else None,
            subscription=str(subscription) if subscription else None,
            sessions=_as_bool(opt("isSessionsEnabled"), False),
            auto_complete=_as_bool(
                opt("autoCompleteMessages"),
                _as_bool(extension.get("autoCompleteMessages"), True),
            ),
            cardinality=str(opt("cardinality") or "one").lower(),
            data_type=str(opt("dataType") or "").lower(),
            max_concurrent_calls=int(
                extension.get("maxConcurrentCalls") or 16 * (os.cpu_count() or 1)
            ),
            max_concurrent_sessions=int(
                extension.get("maxConcurrentSessions") or DEFAULT_MAX_CONCURRENT_SESSIONS
            ),
            session_idle_timeout=(
                parse_timespan(idle) if idle is not None else DEFAULT_SESSION_IDLE_TIMEOUT
            ),
            max_auto_lock_renewal=(
                parse_timespan(renewal) if renewal is not None else DEFAULT_MAX_AUTO_LOCK_RENEWAL
            ),
        )

    @property
    def entity(self) -> str:
        return self.queue or f"{self.topic}/Subscriptions/{self.subscription}"


def _text(value: Any) -> Any:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def _json_default(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        return _timestamp(value)
    return str(value)


def _timestamp(value: dt.datetime) -> str:
    return utc(value).isoformat().replace("+00:00", "Z")


def body_data(message: ServiceBusReceivedMessage, data_type: str) -> Any:
    """The message body as the host passes it to an out-of-process worker."""
    pb = protos()
    body = b"".join(bytes(part) for part in message.body)
    if data_type == "binary":
        return pb.TypedData(bytes=body)
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return pb.TypedData(bytes=body)
    if data_type != "string":
        try:
            json.loads(text)
        except ValueError:
            pass
        else:
            return pb.TypedData(json=text)
    return pb.TypedData(string=text)


def trigger_metadata(message: ServiceBusReceivedMessage) -> dict[str, Any]:
    """The host's binding data for one message, as ``TypedData``."""
    pb = protos()
    properties = {_text(k): _text(v) for k, v in (message.application_properties or {}).items()}
    properties_json = json.dumps(properties, default=_json_default)
    values: dict[str, Any] = {
        "MessageId": message.message_id,
        "SessionId": message.session_id,
        "ContentType": message.content_type,
        "CorrelationId": message.correlation_id,
        "Subject": message.subject,
        "Label": message.subject,
        "To": message.to,
        "ReplyTo": message.reply_to,
        "ReplyToSessionId": message.reply_to_session_id,
        "PartitionKey": message.partition_key,
        "LockToken": str(message.lock_token) if message.lock_token else None,
        "DeadLetterSource": message.dead_letter_source,
        "DeadLetterReason": message.dead_letter_reason,
        "DeadLetterErrorDescription": message.dead_letter_error_description,
    }
    out: dict[str, Any] = {
        name: pb.TypedData(string=str(value)) for name, value in values.items() if value
    }
    # numbers and dates go as JSON, as the host serialises them (the worker has no 'int' kind).
    # DeliveryCount counts this delivery, as the host's .NET client reports it (1 the first
    # time); the AMQP header, which the Python SDK shows, counts the earlier ones.
    out["DeliveryCount"] = pb.TypedData(json=json.dumps(int(message.delivery_count or 0) + 1))
    if message.sequence_number is not None:
        out["SequenceNumber"] = pb.TypedData(json=json.dumps(int(message.sequence_number)))
    moments = {
        "EnqueuedTimeUtc": message.enqueued_time_utc,
        "ExpiresAtUtc": message.expires_at_utc,
        "LockedUntil": message.locked_until_utc,
    }
    out.update(json_times(moments, _timestamp))
    out["ApplicationProperties"] = pb.TypedData(json=properties_json)
    out["UserProperties"] = pb.TypedData(json=properties_json)
    return out


class ServiceBusTriggerListener(TriggerListener):
    """Feeds one function from its queue or subscription; listening once a receiver link is
    open (with sessions: once its session receivers wait for a session, the broker keeping
    every message until one accepts its session)."""

    kind = "servicebus trigger"

    def __init__(self, spec: FunctionSpec, host: HostServices) -> None:
        super().__init__(spec, host)
        self.options = ServiceBusTriggerOptions.from_binding(
            spec.trigger, host.host_json.service_bus
        )
        self._client: ServiceBusClient | None = None
        #: how many of the slots wait on the broker at once (``_slot_gate``: Azure's bound)
        self._gate = SlotGate(
            self.options.max_concurrent_sessions
            if self.options.sessions
            else self.options.max_concurrent_calls
        )
        #: work in the background: receivers of released sessions closing, lock renewals
        self._closing: set[asyncio.Task[None]] = set()

    def start(self) -> None:
        opts = self.options
        if self.spec.retry is not None:
            logger.warning(
                "Soon retries will not be supported for function 'Functions.%s'. For more "
                "information, please visit http://aka.ms/func-retry-policies.",
                self.spec.name,
            )
        self._client = servicebus_client_for(opts.connection)
        count = opts.max_concurrent_sessions if opts.sessions else opts.max_concurrent_calls
        run = self._run_sessions if opts.sessions else self._run_messages
        for i in range(count):
            self.spawn(run(), name=f"servicebus-{self.spec.name}-{i}")
        logger.info(
            "servicebus trigger %s: %s (sessions %s, autoComplete %s, concurrency %d)",
            self.spec.name,
            opts.entity,
            opts.sessions,
            opts.auto_complete,
            count,
        )
        if opts.sessions:
            self.listening()

    async def stop(self) -> None:
        await super().stop()
        if self._closing:
            await asyncio.wait(self._closing, timeout=5.0)
        await close_quietly(self._client)
        self._client = None

    def _receiver(self, **kwargs: Any) -> ServiceBusReceiver:
        client, opts = self._client, self.options
        assert client is not None
        if opts.queue:
            return client.get_queue_receiver(opts.queue, **kwargs)
        assert opts.topic and opts.subscription
        return client.get_subscription_receiver(opts.topic, opts.subscription, **kwargs)

    async def _run_sessions(self) -> None:
        """One of the maxConcurrentSessions slots: accept the next session with messages
        (waiting up to the try timeout, as the extension's AcceptNextSession does) when its
        turn comes (``_slot_gate``), hand its messages over one by one, release it once none
        came for sessionIdleTimeout, and accept the next. The idle session's receiver closes
        in the background: the slot's next accept does not wait for it (with the SDK's
        polling, a close takes ~0.3 s locally)."""
        idle = self.options.session_idle_timeout
        while True:
            receiver = await self._accept()
            if receiver is None:
                continue
            try:
                done_with_session = asyncio.Event()
                self._renew_session(receiver, done_with_session)
                try:
                    while True:
                        batch = await receiver.receive_messages(
                            max_message_count=1, max_wait_time=idle
                        )
                        if not batch:
                            break  # idle session: release it, take the next one
                        await self._process(receiver, batch[0])
                finally:
                    done_with_session.set()
                    self._release(receiver)
            except asyncio.CancelledError:
                raise
            except ServiceBusError as exc:
                logger.warning("servicebus trigger %s: %s", self.spec.name, exc)
                await asyncio.sleep(_RECONNECT_SECONDS)
            except Exception:
                logger.exception("servicebus trigger %s: receive failed", self.spec.name)
                await asyncio.sleep(_RECONNECT_SECONDS)

    async def _accept(self) -> ServiceBusReceiver | None:
        """At the slot's turn, a receiver on the next session with messages; None when none
        came within the try timeout, or accepting failed (said, after a pause)."""
        await self._gate.enter()
        try:
            receiver = self._receiver(session_id=NEXT_AVAILABLE_SESSION, max_wait_time=TRY_TIMEOUT)
            await receiver.__aenter__()
            return receiver
        except OperationTimeoutError:
            return None  # no session with messages right now
        except ServiceBusError as exc:
            logger.warning("servicebus trigger %s: %s", self.spec.name, exc)
        except Exception:
            logger.exception("servicebus trigger %s: accepting a session failed", self.spec.name)
        finally:
            self._gate.leave()
        await asyncio.sleep(_RECONNECT_SECONDS)
        return None

    def _renew_session(self, receiver: ServiceBusReceiver, done: asyncio.Event) -> None:
        """Renew the accepted session's lock up to maxAutoLockRenewalDuration from now, until
        ``done``."""
        limit = self.options.max_auto_lock_renewal
        if limit > 0:
            session = receiver.session
            self._background(
                renew_until(
                    session.renew_lock,
                    lambda: session.locked_until_utc,
                    limit=limit,
                    stop=done,
                    what=f"servicebus trigger {self.spec.name}: session {session.session_id}",
                )
            )

    def _background(self, work: Coroutine[Any, Any, None]) -> None:
        """Run ``work`` beside the loops; stop() waits a moment for what is left of it."""
        task = asyncio.create_task(work)
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    def _release(self, receiver: ServiceBusReceiver) -> None:
        self._background(self._close_quietly(receiver))

    async def _close_quietly(self, receiver: ServiceBusReceiver) -> None:
        try:
            await receiver.close()
        except Exception as exc:  # the broker is going away: its locks go with it
            logger.debug("servicebus trigger %s: closing a receiver: %s", self.spec.name, exc)

    async def _run_messages(self) -> None:
        """One of the maxConcurrentCalls slots: at its turn (``_slot_gate``), receive on its
        receiver until a message comes (a receive that ends empty keeps the turn), hand the
        turn on, invoke the function with the message, and wait for a turn again. The receiver
        opens at the slot's first turn and stays open; it has no credit out while the slot
        waits for a turn (the message it got took the one it gave)."""
        receiver: ServiceBusReceiver | None = None
        await self._gate.enter()
        holding = True  # a turn
        try:
            while True:
                try:
                    if receiver is None:
                        receiver = self._receiver(max_wait_time=None)
                        await receiver.__aenter__()
                        self.listening()  # the link is open: a message sent now comes to it
                    batch = await receiver.receive_messages(
                        max_message_count=1, max_wait_time=DEFAULT_SESSION_IDLE_TIMEOUT
                    )
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    logger.warning("servicebus trigger %s: %s", self.spec.name, exc)
                    self.unable_to_start(f"{type(exc).__name__}: {first_line(exc)}")
                    if receiver is not None:
                        await self._close_quietly(receiver)
                        receiver = None
                    await asyncio.sleep(_RECONNECT_SECONDS)
                    continue
                if not batch:
                    continue  # nothing came: the slot keeps its turn and waits again
                self._gate.leave()
                holding = False
                try:
                    await self._process(receiver, batch[0])
                except asyncio.CancelledError:
                    raise
                except Exception:
                    logger.exception("servicebus trigger %s: processing failed", self.spec.name)
                await self._gate.enter()
                holding = True
        finally:
            if holding:
                self._gate.leave()
            if receiver is not None:
                await self._close_quietly(receiver)

    async def _process(
        self, receiver: ServiceBusReceiver, message: ServiceBusReceivedMessage
    ) -> None:
        invoked = asyncio.Event()
        limit = self.options.max_auto_lock_renewal
        if not self.options.sessions and limit > 0:
            # the message's lock, renewed while the invocation runs (a session's is renewed
            # with the session)
            self._background(
                renew_until(
                    functools.partial(receiver.renew_message_lock, message),
                    lambda: message.locked_until_utc,
                    limit=limit,
                    stop=invoked,
                    what=f"servicebus trigger {self.spec.name}: message {message.message_id}",
                )
            )
        try:
            ok = await self._invoke(message)
        finally:
            invoked.set()
        if not self.options.auto_complete:
            return
        try:
            if ok:
                await receiver.complete_message(message)
            else:
                await receiver.abandon_message(message)
        except ServiceBusError as exc:
            # the lock was lost meanwhile: the broker redelivers the message
            logger.warning(
                "servicebus trigger %s: settling message %s failed: %s",
                self.spec.name,
                message.message_id,
                exc,
            )

    async def _invoke(self, message: ServiceBusReceivedMessage) -> bool:
        """Invoke the function with ``message``; retry per policy; whether it succeeded."""
        ok, _ = await self.invoke(
            body_data(message, self.options.data_type),
            trigger_metadata=trigger_metadata(message),
            what=(
                f"servicebus trigger {self.spec.name}: message {message.message_id} "
                f"(delivery {(message.delivery_count or 0) + 1})"
            ),
        )
        return ok
