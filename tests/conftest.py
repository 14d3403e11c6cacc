"""Settings and fixtures of every test under tests/ (the Contacts app's, the subscriber's, the
deploy templates', the tooling's, the repository's). `stack`: the Contacts app's whole local
stack (tools/stack.py on funcstack), started once per test session on free ports, with the
app's default settings, always stopped; `target`: the app the HTTP contract and relay suites
test (tools/target.py): that stack, or with `--deployed` an app already running (deployed, or
`make run`'s) named by the environment; `client`: an HTTP client of the target's API.

`--deployed` runs only the tests that use `target` (through `client` or `relay_target` or
directly), minus those marked `local_stack` (they need the local stack itself: they kill or
stop its parts, freeze its broker, start apps with settings of their own, read its logs):
docs/testing.md, The deployed smoke test."""

from __future__ import annotations

import gc
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pytest
from hypothesis import settings

from funcstack.cosmos import local_tls
from funcstack.deadlines import scaled

if TYPE_CHECKING:
    from funcstack.cosmos import CosmosEndpoint
    from funcstack.servicebus import ServiceBusEndpoint
    from funcstack.services import LocalServices
    from tools.httpclient import Client
    from tools.stack import Stack
    from tools.target import Target

# funcstack's local authority trusted here as its hosts trust it (SSL_CERT_FILE,
# REQUESTS_CA_BUNDLE; funcstack's docs/cosmos.md, Certificate), before a test module imports an
# SDK: the app's code composed in a test verifies the local Cosmos DB endpoint unchanged.
os.environ.update(local_tls().environment())

# No deadline on generated examples: a per-example time limit is a timed assertion, and under
# `make test`'s parallel jobs an example may wait for a core (speed lives in `make bench`).
settings.register_profile("suite", deadline=None)
settings.load_profile("suite")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--deployed",
        action="store_true",
        help="run the HTTP contract and relay suites against the app the environment names "
        "(AZURE_FUNCTION_APP_URL, COSMOS_*, SERVICEBUS_*: tools/target.py), not a local stack",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """In an xdist worker: the tests in the order their units are handed out, the longest first
    (tools/schedule.py). With --deployed: the tests that use the target and are not marked
    local_stack (tools/target.py, `deployed_selection`); a test that starts servers and is
    neither is refused, naming it."""
    if hasattr(config, "workerinput"):
        from tools.schedule import longest_first

        items[:] = longest_first(items, lambda item: item.nodeid)
    if not config.getoption("deployed"):
        return
    from tools.target import deployed_selection

    kept, deselected, unsorted = deployed_selection(items)
    if unsorted:
        raise pytest.UsageError(
            "--deployed: these tests start servers but neither use the target nor are marked "
            "local_stack (mark them, saying why): " + "; ".join(unsorted)
        )
    config.hook.pytest_deselected(items=deselected)
    items[:] = kept


def pytest_collection_finish(session: pytest.Session) -> None:
    """What the collection made (every module imported, its objects) set aside from the cyclic
    garbage collector's full passes (`gc.freeze`): never garbage while the tests run, it is
    scanned at every full collection otherwise."""
    gc.freeze()


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadfile` (`make test-suite`): a module's tests on one worker, and cosmos-outbox's
    modules on its session's services in two units (tools/schedule.py): two workers start
    those services, not three."""
    if config.getvalue("dist") != "loadfile":
        return None
    from tools.schedule import FilesAndGroups

    return FilesAndGroups(config, log)


#: The key of the endpoints the xdist controller hands its workers (`pytest_configure_node`).
HANDED = "shared_endpoints"
#: The key of the shared Service Bus endpoint's log, handed with it (`shared_servicebus_log`).
HANDED_SERVICEBUS_LOG = "shared_servicebus_log"
_STARTED = pytest.StashKey[dict[str, Any]]()
_SERVICEBUS_LOG = pytest.StashKey[Path]()


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """Under xdist (`make test-suite`'s workers), in the controller: the shared Cosmos DB and
    Service Bus endpoints (`shared_cosmos`, `shared_servicebus`) started once, when the first
    worker starts, and handed to each worker (funcstack.handoff): one of each for the run, not
    one per worker, with the Service Bus endpoint's log (`shared_servicebus_log`). The
    controller stops them when the run ends (`pytest_unconfigure`)."""
    config: pytest.Config = node.config
    if config.getoption("deployed"):  # no local stack
        return
    started = config.stash.get(_STARTED, None)
    if started is None:
        started = config.stash[_STARTED] = {}
        factory = getattr(config, "_tmp_path_factory", None)  # the workers' base folder's
        folder = factory.mktemp("shared-endpoints") if factory is not None else None
        started["cosmos"] = _start_cosmos(folder)
        started["servicebus"] = _start_servicebus(folder)
        if folder is not None:
            config.stash[_SERVICEBUS_LOG] = folder / "servicebus.log"
    from funcstack.handoff import hand_over

    hand_over(node.workerinput, HANDED, started)
    if _SERVICEBUS_LOG in config.stash:
        node.workerinput[HANDED_SERVICEBUS_LOG] = str(config.stash[_SERVICEBUS_LOG])


def pytest_unconfigure(config: pytest.Config) -> None:
    """The endpoints the controller handed its workers, stopped (`pytest_configure_node`)."""
    for endpoint in config.stash.get(_STARTED, {}).values():
        endpoint.stop()


def _handed(config: pytest.Config, kind: str) -> dict[str, Any] | None:
    """The endpoint of `kind` the xdist controller handed this worker, if it did."""
    from funcstack.handoff import handed

    return handed(getattr(config, "workerinput", None), HANDED, kind)


def _start_cosmos(folder: Path | None) -> CosmosEndpoint:
    from funcstack.cosmos import start_cosmos
    from funcstack.services import free_port

    log = folder / "cosmos.log" if folder is not None else None
    return start_cosmos(port=free_port(), log_path=log)


def _start_servicebus(folder: Path | None) -> ServiceBusEndpoint:
    from funcstack.servicebus import start_servicebus
    from funcstack.services import free_port

    log = folder / "servicebus.log" if folder is not None else None
    return start_servicebus(port=free_port(), log_path=log, control=True)


@pytest.fixture(scope="session")
def shared_cosmos(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[CosmosEndpoint]:
    """One Cosmos DB endpoint for the run's Contacts stacks that neither stop, freeze nor fault
    it (the sessions' and most modules'): each makes a database of its own on it and drops it
    when it stops (tools/stack.py, funcstack's `LocalStack(shared_cosmos=...)`). Under xdist the
    controller's, shared by its workers (`pytest_configure_node`); else the test process's."""
    handed = _handed(request.config, "cosmos")
    if handed is not None:
        from funcstack.handoff import cosmos_from

        yield cosmos_from(handed)
        return
    with _start_cosmos(Path(tmp_path_factory.mktemp("shared-cosmos"))) as endpoint:
        yield endpoint


class UnitEndpoints:
    """The endpoints the modules of one xdist unit take turns on (`faulted_cosmos`,
    `claim_check_azurite`, `late_servicebus`; tools/schedule.py's `GROUPS`): each started when
    a module first asks for it, and stopped once the worker's next test is in another unit
    (`pytest_runtest_teardown`), not left idle until the worker ends. Where those modules do not
    run one after another (a run without the units' order), a module that asks after the stop
    gets a new one."""

    def __init__(self) -> None:
        self._open: dict[str, tuple[object, Callable[[], None]]] = {}

    def get[T](self, name: str, start: Callable[[], tuple[T, Callable[[], None]]]) -> T:
        """`name`'s endpoint: the open one, or `start()`'s (the endpoint and how to stop it)."""
        if name not in self._open:
            self._open[name] = start()
        return cast(T, self._open[name][0])

    def close(self) -> None:
        opened, self._open = self._open, {}
        for _, stop in opened.values():
            stop()


_UNIT_ENDPOINTS = pytest.StashKey[UnitEndpoints]()


def _unit_endpoints(config: pytest.Config) -> UnitEndpoints:
    if _UNIT_ENDPOINTS not in config.stash:
        config.stash[_UNIT_ENDPOINTS] = UnitEndpoints()
    return config.stash[_UNIT_ENDPOINTS]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """After a test's teardown (its module's stacks stopped when its module ends): the unit's
    endpoints stopped if the next test is in another unit, or there is none."""
    yield
    endpoints = item.config.stash.get(_UNIT_ENDPOINTS, None)
    if endpoints is None:
        return
    from tools.schedule import unit

    if nextitem is None or unit(nextitem.nodeid) != unit(item.nodeid):
        endpoints.close()


@pytest.fixture(scope="module")
def faulted_cosmos(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> CosmosEndpoint:
    """One Cosmos DB endpoint for the test process's modules that fault or freeze theirs (the
    store's faults, the Idempotency-Key under faults), one module after another: each stack on
    a database of its own (`Stack(shared_cosmos=...)`), each test clearing its faults and
    thawing it before it ends. Not `shared_cosmos`: a fault or a pause is the endpoint's, and
    that one serves the other workers' stacks at the same time. tools/schedule.py makes those
    modules one unit, so that one worker starts it, not one per module (`UnitEndpoints`)."""

    def start() -> tuple[CosmosEndpoint, Callable[[], None]]:
        endpoint = _start_cosmos(Path(tmp_path_factory.mktemp("faulted-cosmos")))
        return endpoint, endpoint.stop

    return _unit_endpoints(request.config).get("faulted_cosmos", start)


@pytest.fixture(scope="module")
def claim_check_azurite(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> LocalServices:
    """One Azurite for the test process's claim-check modules (the outbox's, the subscriber's),
    one module after the other, started at its first connection: each stack's payload container
    is one of its own (`Stack(shared_azurite=...)`), deleted when it stops. The outbox's outage
    test stops it and starts it again on its ports, with its data (`stop_part("azurite")`,
    `run_azurite()` of these services, which own it): tools/schedule.py makes the two modules
    one unit, so that one worker starts it, not one per module, and none sees another's outage
    (`UnitEndpoints`)."""
    from funcstack.services import LocalServices

    def start() -> tuple[LocalServices, Callable[[], None]]:
        services = LocalServices(workdir=Path(tmp_path_factory.mktemp("claim-check-azurite")))
        services.run_azurite()
        return services, services.stop

    return _unit_endpoints(request.config).get("claim_check_azurite", start)


#: How late `late_servicebus` acknowledges each send (the message is on the topic at once).
LATE_SETTLE_MS = 1500


@pytest.fixture(scope="module")
def late_servicebus(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> ServiceBusEndpoint:
    """One Service Bus endpoint for the test process's modules whose relay is killed or paused
    between a send and its acknowledgement (the claim check's killed relay, the scale-out
    chaos): it acknowledges each send `LATE_SETTLE_MS` late, a setting of the endpoint's, so
    not `shared_servicebus`; no test stops it. One module after the other, each stack on a
    topic of its own (`Stack(shared_servicebus=...)`), each reading its own messages' lines in
    its log (`late_servicebus_log`): tools/schedule.py makes those modules one unit, so that
    one worker starts it, not one per module (`UnitEndpoints`)."""
    return _late_servicebus(request, tmp_path_factory)[0]


@pytest.fixture(scope="module")
def late_servicebus_log(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """The log of `late_servicebus` (every stack's lines on it: a test reads its own messages'
    lines, by their ids)."""
    return _late_servicebus(request, tmp_path_factory)[1]


def _late_servicebus(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[ServiceBusEndpoint, Path]:
    def start() -> tuple[tuple[ServiceBusEndpoint, Path], Callable[[], None]]:
        from funcstack.servicebus import start_servicebus
        from funcstack.services import free_port

        log = Path(tmp_path_factory.mktemp("late-servicebus")) / "servicebus.log"
        endpoint = start_servicebus(
            port=free_port(), log_path=log, control=True, settle_delay_ms=LATE_SETTLE_MS
        )
        return (endpoint, log), endpoint.stop

    return _unit_endpoints(request.config).get("late_servicebus", start)


@pytest.fixture(scope="session")
def shared_servicebus(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServiceBusEndpoint]:
    """One Service Bus endpoint for the run's Contacts stacks that neither stop, freeze nor slow
    it nor change its message size (the sessions' and some modules'): each makes its topic on it
    under a name of its own, through the endpoint's control channel, and deletes it when it
    stops (tools/stack.py, `Stack(shared_servicebus=...)`). Under xdist the controller's, shared
    by its workers (`pytest_configure_node`); else the test process's."""
    handed = _handed(request.config, "servicebus")
    if handed is not None:
        from funcstack.handoff import servicebus_from

        yield servicebus_from(handed)
        return
    folder = Path(tmp_path_factory.mktemp("shared-servicebus"))
    endpoint = _start_servicebus(folder)
    request.config.stash[_SERVICEBUS_LOG] = folder / "servicebus.log"
    try:
        yield endpoint
    finally:
        endpoint.stop()


@pytest.fixture(scope="session")
def shared_servicebus_log(
    request: pytest.FixtureRequest, shared_servicebus: ServiceBusEndpoint
) -> Path:
    """The log of `shared_servicebus` (every stack's lines on it: a test reads those of its
    own messages, by their ids): the xdist controller's file, or the test process's."""
    workerinput = getattr(request.config, "workerinput", None)
    if workerinput is not None and HANDED_SERVICEBUS_LOG in workerinput:
        return Path(workerinput[HANDED_SERVICEBUS_LOG])
    if _SERVICEBUS_LOG not in request.config.stash:
        pytest.fail("the shared Service Bus endpoint was started without a log")
    return request.config.stash[_SERVICEBUS_LOG]


#: The bound of the hosted app's bounded routes (/health, the operators' routes: the app setting
#: `HTTP_BOUND_SECONDS`, entrypoints/bootstrap.py) in the stacks of tests that do not test the
#: bound: the app's 4 s is what on call is promised, and on a busy machine a route past it
#: answers 503 as it should (issue 89: GET /outbox/deadletters under `make test`'s load), which
#: is not what those tests check. Under the clients' 30 s; the tests of the bound keep 4 s.
GENEROUS_BOUND = {"HTTP_BOUND_SECONDS": f"{scaled(20):g}"}
#: The session stack's settings over the app's (`stack`).
SESSION_STACK_SETTINGS = {
    "FEED_POLL_DELAY_MS": "5000",
    "BACKLOG_ESTIMATE_SCHEDULE": "0 0 0 1 1 *",
    **GENEROUS_BOUND,
}


@pytest.fixture(scope="session")
def stack(
    tmp_path_factory: pytest.TempPathFactory,
    shared_cosmos: CosmosEndpoint,
    shared_servicebus: ServiceBusEndpoint,
) -> Iterator[Stack]:
    from tools.stack import Ports, Stack

    # No test of this stack waits for the relay or reads the backlog timer's figures (they
    # have their module's stack or one of their own; the status route and the CLI read the
    # backlog when asked), and it lives through a worker's whole run: its feed is polled every
    # 5 s, not the app's 1 s, and its backlog timer (every 15 s) runs once a year. Idle, such a
    # stack (with endpoints of its own) took 1.07 s of CPU a minute with the app's settings,
    # 0.19 s with these (measured once; history in git); at 100 ms it was 4.4 % of a core.
    with Stack(
        workdir=Path(tmp_path_factory.mktemp("stack")),
        ports=Ports.free(),
        shared_cosmos=shared_cosmos,
        shared_servicebus=shared_servicebus,
        settings_overrides=SESSION_STACK_SETTINGS,
    ) as s:
        yield s


@pytest.fixture(scope="session")
def target(request: pytest.FixtureRequest) -> Target:
    """The app under test: the session's local stack, or the deployed app (--deployed)."""
    from tools.target import Deployed, DeployedError, LocalTarget

    if request.config.getoption("deployed"):
        try:
            return Deployed.from_environment()
        except DeployedError as exc:
            raise pytest.UsageError(str(exc)) from None
    return LocalTarget(request.getfixturevalue("stack"))


@pytest.fixture
def client(target: Target) -> Iterator[Client]:
    c = target.client()
    try:
        yield c
    finally:
        c.close()


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """The docs' shell lines this run ran, each with what it showed (tests/repository/
    test_docs_run.py records them; those it did not run are its skips, with where they run)."""
    ran = sorted(
        value
        for report in terminalreporter.stats.get("passed", [])
        for key, value in getattr(report, "user_properties", [])
        if key == "docs-line"
    )
    if ran:
        terminalreporter.section(f"the docs' shell lines run here: {len(ran)}")
        for line in ran:
            terminalreporter.line(line)
