"""pytest plugin loaded (``-p conformance.plugin``) into a run of an Azure SDK's own test
files against the local endpoints. Configuration only: it trusts the local CA, supplies the
``test_proxy`` fixture (no recordings), deselects the excluded tests listed in
``conformance/excluded.txt`` and writes per-test outcomes to ``$CONFORMANCE_REPORT``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from conformance.scope import Exclusions, load_exclusions

MARKERS = (
    "cosmosEmulator",
    "cosmosLong",
    "cosmosQuery",
    "cosmosSplit",
    "cosmosMultiRegion",
    "cosmosCircuitBreaker",
    "cosmosPerPartitionAutomaticFailover",
    "cosmosSearchQuery",
    "liveTest",
    "live_test_only",
    "playback_test_only",
)


class Recorder:
    def __init__(self, sdk: str, exclusions: Exclusions) -> None:
        self.sdk = sdk
        self.exclusions = exclusions
        self.outcomes: dict[str, str] = {}
        self.excluded: dict[str, str] = {}

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(
        self, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        keep: list[pytest.Item] = []
        dropped: list[pytest.Item] = []
        for item in items:
            reason = self.exclusions.reason(self.sdk, item.nodeid)
            if reason is None:
                keep.append(item)
            else:
                self.excluded[item.nodeid] = reason
                dropped.append(item)
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = keep

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call" or report.outcome != "passed":
            previous = self.outcomes.get(report.nodeid)
            if previous in ("failed", "error"):
                return
            outcome: str = report.outcome
            if report.when != "call" and report.outcome == "failed":
                outcome = "error"
            self.outcomes[report.nodeid] = outcome

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        target = os.environ.get("CONFORMANCE_REPORT")
        if target:
            Path(target).write_text(
                json.dumps({"outcomes": self.outcomes, "excluded": self.excluded}, indent=1)
            )


def pytest_configure(config: pytest.Config) -> None:
    for marker in MARKERS:
        config.addinivalue_line("markers", f"{marker}: marker of the SDK's own suite")
    bundle = os.environ.get("CONFORMANCE_CA_BUNDLE")
    if bundle:
        # The AMQP transport of azure-servicebus verifies against certifi.where() only:
        # point it at the bundle that also holds the local CA (a trust-store setting).
        import certifi

        certifi.where = lambda: bundle
    sdk = os.environ.get("CONFORMANCE_SDK", "")
    config.pluginmanager.register(Recorder(sdk, load_exclusions()), "conformance-recorder")


@pytest.fixture(scope="session")
def test_proxy() -> Iterator[None]:
    """The suites' recording proxy: nothing to record against the local endpoints."""
    yield None
