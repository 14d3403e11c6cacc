"""Which of the SDKs' own test files are in scope (the areas an outbox app depends on), the
fast subset that `make test` runs, and the exclusions (``excluded.txt``)."""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
EXCLUDED = HERE / "excluded.txt"
KNOWN_FAILURES = HERE / "known-failures.txt"

#: SDK distribution -> its test files (relative to the sdist's tests/) in scope.
SCOPE: dict[str, list[str]] = {
    "azure-cosmos": [
        "test_transactional_batch.py",
        "test_transactional_batch_async.py",
        "test_change_feed.py",
        "test_change_feed_async.py",
        "test_change_feed_all_versions.py",
        "test_change_feed_all_versions_async.py",
        "test_changefeed_partition_key_variation.py",
        "test_changefeed_partition_key_variation_async.py",
        "test_feed_range.py",
        "test_query_feed_range.py",
        "test_ttl.py",
        "test_crud.py",
        "test_crud_async.py",
        "test_query.py",
        "test_query_cross_partition.py",
        "test_read_items.py",
        "test_read_items_async.py",
        "test_session.py",
        "test_latest_session_token.py",
    ],
    "azure-servicebus": [
        "test_topic.py",
        "test_subscriptions.py",
        "test_sessions.py",
        "test_queues.py",
        "test_list_sessions.py",
        "async_tests/test_topic_async.py",
        "async_tests/test_subscriptions_async.py",
        "async_tests/test_sessions_async.py",
        "async_tests/test_queues_async.py",
    ],
}

#: About a minute and a half: what `make test` runs (test_topic.py sleeps for two minutes and
#: runs in the full suite only).
FAST: dict[str, list[str]] = {
    "azure-cosmos": ["test_transactional_batch.py", "test_ttl.py"],
    "azure-servicebus": ["test_subscriptions.py"],
}


@dataclass
class Exclusions:
    """``[sdk]`` sections of ``pattern | reason`` lines; patterns are fnmatch globs over
    pytest node ids (``test_file.py::Class::test_name[param]``)."""

    rules: dict[str, list[tuple[str, str]]] = field(default_factory=dict)

    def reason(self, sdk: str, nodeid: str) -> str | None:
        for pattern, why in self.rules.get(sdk, []):
            if fnmatch.fnmatchcase(nodeid, pattern):
                return why
        return None


def load_exclusions(path: Path = EXCLUDED) -> Exclusions:
    rules: dict[str, list[tuple[str, str]]] = {}
    section = ""
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        header = re.fullmatch(r"\[(.+)\]", line)
        if header:
            section = header.group(1)
            continue
        pattern, sep, why = line.partition("|")
        if not sep or not why.strip():
            raise ValueError(f"{path}: exclusion without a reason: {raw!r}")
        rules.setdefault(section, []).append((pattern.strip(), why.strip()))
    return Exclusions(rules)
