"""The trigger listeners' base (``_listener.TriggerListener``), in process: a listener says when
it listens, or, when its first attempt fails, why it could not start -- the host is ready then
too, naming it -- and says so again once it listens; ``stop`` ends its loops."""

from __future__ import annotations

import asyncio
import logging
from typing import Any, cast

import pytest

from funcstack.deadlines import LOOPBACK
from funcstack.functions_host import _runner as runner_module
from funcstack.functions_host._config import HostJson
from funcstack.functions_host._functions import FunctionSpec
from funcstack.functions_host._language_worker import LanguageWorker
from funcstack.functions_host._listener import HostServices, TriggerListener, first_line

SPEC = FunctionSpec("jobs", "id-1", {"type": "queueTrigger", "name": "msg"}, (), None)
HOST = HostServices(cast(LanguageWorker, None), lambda: None, HostJson(), "host")


class Polling(TriggerListener):
    """Fails its first ``failures`` polls, then listens."""

    kind = "test trigger"

    def __init__(self, failures: int) -> None:
        super().__init__(
            SPEC, HostServices(cast(LanguageWorker, None), lambda: None, HostJson(), "h")
        )
        self.failures = failures
        self.polls = 0

    def start(self) -> None:
        self.spawn(self._poll(), name="poll")

    async def _poll(self) -> None:
        while True:
            self.polls += 1
            if self.polls <= self.failures:
                self.unable_to_start(f"refused (poll {self.polls})")
            else:
                self.listening()
            await asyncio.sleep(0.01)


def test_a_listener_is_settled_once_it_listens() -> None:
    async def scenario() -> Any:
        listener = Polling(failures=0)
        listener.start()
        reason = await asyncio.wait_for(listener.wait_listening(), LOOPBACK)
        await listener.stop()
        return reason, listener.is_listening

    assert asyncio.run(scenario()) == (None, True)


def test_one_that_cannot_start_says_why_once_and_listens_later(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def scenario() -> Any:
        listener = Polling(failures=3)
        listener.start()
        reason = await asyncio.wait_for(listener.wait_listening(), LOOPBACK)
        listening_then = listener.is_listening
        while not listener.is_listening:  # noqa: ASYNC110 - the listener's own flag
            await asyncio.sleep(0.01)
        later = await listener.wait_listening()
        await listener.stop()
        polls = listener.polls
        await asyncio.sleep(0.05)  # a non-event: five of its polls' intervals, none polled
        return reason, listening_then, later, polls == listener.polls

    with caplog.at_level(logging.INFO, logger="funcstack.functions_host"):
        reason, listening_then, later, stopped = asyncio.run(scenario())
    assert reason == "refused (poll 1)"  # the first failure's, said once
    assert not listening_then
    assert later is None
    assert stopped, "the loop went on after stop()"
    assert [r.getMessage() for r in caplog.records] == [
        "The listener for function 'Functions.jobs' was unable to start: refused (poll 1). "
        "It keeps trying.",
        "test trigger jobs: listening (it could not start: refused (poll 1))",
    ]


def test_an_errors_first_line() -> None:
    assert first_line(RuntimeError("one\ntwo")) == "one"
    assert first_line(RuntimeError("")) == ""


class Hung:
    """A listener that neither listens nor fails (a connection that never answers)."""

    spec = FunctionSpec("hung", "id-2", {"type": "queueTrigger", "name": "msg"}, (), None)

    def start(self) -> None:
        pass

    async def wait_listening(self) -> str | None:
        await asyncio.Event().wait()
        return None

    async def stop(self) -> None:
        pass


def test_the_host_waits_for_a_listener_a_bounded_time_then_names_it(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A listener that hangs does not hold the host's start past ``LISTEN_TIMEOUT_SECONDS``:
    the host is ready without it, naming it (its ready line's ``not_listening``), as Azure's
    host goes on with a listener that could not start; the others listen."""
    monkeypatch.setattr(runner_module, "LISTEN_NOTICE_SECONDS", 0.05)
    monkeypatch.setattr(runner_module, "LISTEN_TIMEOUT_SECONDS", 0.2)
    host = runner_module.Runner(".")

    async def scenario() -> dict[str, str]:
        listening = Polling(failures=0)
        host._listeners = [listening, Hung()]
        listening.start()
        # listening before the host's 0.2 s wait starts: only the hung one can run it out
        while not listening.is_listening:  # noqa: ASYNC110 - the listener's own flag
            await asyncio.sleep(0)
        try:
            return await asyncio.wait_for(host._wait_listening(), LOOPBACK)
        finally:
            await listening.stop()

    with caplog.at_level(logging.WARNING, logger="funcstack.functions_host"):
        assert asyncio.run(scenario()) == {
            "hung": "not listening after 0.2 s (the lines above say why)"
        }
    assert "waiting for the trigger(s) of hung to listen" in caplog.text
