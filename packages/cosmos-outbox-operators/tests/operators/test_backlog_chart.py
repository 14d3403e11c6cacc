"""The backlog chart's time labels never overlap (issue 66 item 3: "the backlog chart's time
labels overlap"): at any number of readings, a minute's or an hour's worth, the labels drawn are
distinct times, each farther from the next than its text is wide."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import pairwise
from xml.etree import ElementTree

import pytest

from cosmos_outbox_operators._console.chart import backlog_chart

#: A digit's width at the chart's 12 px label font, at most (system-ui's are about 0.6 em).
DIGIT = 7.2


def drawn_labels(count: int, every_seconds: int) -> list[tuple[float, str]]:
    start = datetime(2026, 11, 26, 8, 0, tzinfo=UTC)
    readings = [
        {
            "at": (start + timedelta(seconds=i * every_seconds)).isoformat(),
            "pending": i % 7,
            "oldestPendingAgeSeconds": float(i),
        }
        for i in range(count)
    ]
    root = ElementTree.fromstring(backlog_chart(readings))  # noqa: S314  # our own chart's SVG
    return [
        (float(text.get("x") or 0), text.text or "")
        for axis in root.iter()
        if "axis x" in (axis.get("class") or "")
        for text in axis.iter()
        if text.tag.endswith("text") and text.text
    ]


@pytest.mark.parametrize(
    ("count", "every_seconds"),
    [(3, 5), (11, 5), (12, 5), (30, 5), (61, 60), (100, 30), (720, 5)],
)
def test_the_time_labels_are_distinct_and_apart(count: int, every_seconds: int) -> None:
    labels = drawn_labels(count, every_seconds)
    texts = [text for _, text in labels]
    assert len(labels) >= 2 and len(set(texts)) == len(texts), texts
    for (x, text), (after, _) in pairwise(labels):
        assert after - x >= len(text) * DIGIT + 4, (text, x, after, texts)
