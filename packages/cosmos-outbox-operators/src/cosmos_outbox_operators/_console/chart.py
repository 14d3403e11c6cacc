"""The backlog chart, drawn by pygal as SVG on the server (no script in the browser: pygal's
own configuration script is taken out, its tooltips need a script from a CDN the page never
loads). Only numbers and times reach it, never text from an event."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from xml.etree.ElementTree import Element, SubElement

import pygal  # type: ignore[import-untyped]  # pygal ships no type information
from pygal.style import Style  # type: ignore[import-untyped]

__all__ = ["backlog_chart"]

#: Colours of the page's palette, with a contrast of at least 3:1 to the white background (the
#: WCAG minimum for graphics).
_STYLE = Style(
    background="white",
    plot_background="white",
    foreground="#1f2328",
    foreground_strong="#1f2328",
    foreground_subtle="#57606a",
    colors=("#0550ae", "#bc4c00"),
    font_family="system-ui, sans-serif",
    label_font_size=12,
    major_label_font_size=12,
    legend_font_size=13,
    title_font_size=14,
)
DESCRIPTION = (
    "Line chart of the outbox's backlog over the last hour: pending events on the left axis, "
    "the oldest pending event's age in seconds on the right axis. The same readings are in the "
    "table below it."
)


def _accessible(root: Element) -> Element:
    """No scripts; an image with a title and a description for assistive technology."""
    for parent in list(root.iter()):
        for child in list(parent):
            if str(child.tag).rpartition("}")[2] == "script":
                parent.remove(child)
    root.set("role", "img")
    root.set("aria-labelledby", "backlog-chart-title backlog-chart-desc")
    title = SubElement(root, "title", id="backlog-chart-title")
    title.text = "Backlog and lag, last hour"
    desc = SubElement(root, "desc", id="backlog-chart-desc")
    desc.text = DESCRIPTION
    root.remove(title)
    root.remove(desc)
    root.insert(0, desc)
    root.insert(0, title)
    return root


def backlog_chart(readings: list[dict[str, Any]]) -> str:
    """The chart of `readings` (the backlog route's answer's); "" when there are none."""
    if not readings:
        return ""
    chart = pygal.Line(
        style=_STYLE,
        width=720,
        height=240,
        explicit_size=False,
        disable_xml_declaration=True,
        js=[],
        show_dots=len(readings) < 20,
        dots_size=3,
        stroke_style={"width": 2},
        legend_at_bottom=True,
        legend_at_bottom_columns=2,
        show_minor_x_labels=False,
        truncate_label=-1,
        min_scale=2,
        max_scale=6,
        include_x_axis=True,
        margin=8,
    )
    chart.add_xml_filter(_accessible)
    times = [_instant(r.get("at")) for r in readings]
    chart.x_labels, chart.x_labels_major = x_labels(times)
    pending = [int(r.get("pending") or 0) for r in readings]
    ages = [float(r.get("oldestPendingAgeSeconds") or 0) for r in readings]
    # whole numbers of events; an empty backlog drawn on a scale of 0-5, not of 0-1
    chart.range = (0, max(5, *pending))
    chart.secondary_range = (0, max(5.0, *ages))
    chart.value_formatter = lambda v: f"{v:g}"
    chart.add("Pending events", pending)
    chart.add("Oldest pending (s)", ages, secondary=True)
    svg: str = chart.render(is_unicode=True)
    return svg


#: The plot's width in pixels (the chart's, less its margins and the two value axes), and a
#: time label's width at the chart's 12 px font (about 0.6 em a digit) with a gap after it.
PLOT_WIDTH = 620
LABEL_WIDTH = {"%H:%M:%S": 8 * 7.2 + 14, "%H:%M": 5 * 7.2 + 14}


def x_labels(times: list[datetime | None]) -> tuple[list[str], list[str]]:
    """The time axis's labels, one per reading ("" where none is drawn), and those drawn: as
    many as fit side by side, evenly spaced. pygal's own spacing (`x_labels_major_every`) takes
    a label for major by its text, so every reading of a minute drew its "08:00" at the same
    place, and a minute of readings every 5 s drew twelve labels of 8 characters 60 px apart:
    they overlapped."""
    known = [t for t in times if t is not None]
    # minutes on the axis; seconds too over less than ten minutes (else labels a minute apart
    # or less would repeat the same minute)
    span = (known[-1] - known[0]).total_seconds() if known else 0.0
    shown = "%H:%M:%S" if span < 600 else "%H:%M"
    fit = max(2, int(PLOT_WIDTH // LABEL_WIDTH[shown]))
    every = max(1, -(-len(times) // fit))
    labels = [
        t.strftime(shown) if t is not None and i % every == 0 else "" for i, t in enumerate(times)
    ]
    return labels, [label for label in labels if label]


def _instant(instant: object) -> datetime | None:
    try:
        return datetime.fromisoformat(str(instant).replace("Z", "+00:00"))
    except ValueError:
        return None
