"""The terminal's records (``_console.py``): host.json ``logging.logLevel`` read as .NET's
``LoggerFilterOptions`` picks a rule (the longest category prefix, ignoring case, else
``default``, else Information), which records the terminal takes, and how a record reads there.
The real thing, through ``funcstack run``, is in tests/test_cli.py."""

from __future__ import annotations

import io
import json
import logging

from funcstack.functions_host._console import (
    APP_RECORD,
    ConsoleHandler,
    LogLevels,
    render,
)


def test_the_longest_matching_category_wins_ignoring_case_else_default() -> None:
    levels = LogLevels(
        {
            "default": "Warning",
            "Function": "Information",
            "function.relay": "Error",
            "Function.relay.User": "Debug",
            "Host.Results": "None",
        }
    )
    assert levels.minimum("Function.relay.User") == logging.DEBUG
    assert levels.minimum("Function.relay") == logging.ERROR
    assert levels.minimum("Function.other.User") == logging.INFO
    assert levels.minimum("Worker.shop") == logging.WARNING
    assert levels.minimum("Host.Results") > logging.CRITICAL
    assert LogLevels().minimum("Function.x") == logging.INFO  # no logLevel: Information


def record(name: str, level: int, message: str, **extra: object) -> logging.LogRecord:
    made = logging.LogRecord(name, level, __file__, 1, message, None, None)
    made.__dict__.update(extra)
    return made


def test_the_terminal_takes_invocations_and_the_apps_records_by_level_and_the_hosts_warnings() -> (
    None
):
    stream = io.StringIO()
    handler = ConsoleHandler(stream)
    handler.levels = LogLevels({"Function.hush": "Warning"})
    for made in (
        record("Function.greet", logging.INFO, "Executed 'Functions.greet' (...)"),
        record("Function.hush", logging.INFO, "Executed 'Functions.hush' (...)"),
        record("Function.hush.User", logging.WARNING, "loud", **{APP_RECORD: True}),
        record("Worker.stdout", logging.INFO, "printed", **{APP_RECORD: True}),
        record("funcstack.functions_host", logging.INFO, "host listening"),
        record("funcstack.functions_host", logging.WARNING, "host.json: ..."),
    ):
        handler.handle(made)
    shown = [json.loads(line)["console"] for line in stream.getvalue().splitlines()]
    assert [(entry["category"], entry["message"]) for entry in shown] == [
        ("Function.greet", "Executed 'Functions.greet' (...)"),
        ("Function.hush.User", "loud"),
        ("Worker.stdout", "printed"),
        ("funcstack.functions_host", "host.json: ..."),
    ]
    assert shown[0]["time"].endswith("Z") and shown[0]["level"] == "INFO"


def test_a_record_reads_as_one_line_with_its_continuation_indented() -> None:
    entry = {
        "time": "2026-01-02T03:04:05.678Z",
        "level": "ERROR",
        "message": "Executed 'Functions.f' (Failed, Duration=1ms)\nValueError: x\nTrace",
    }
    lines = render(entry, "shop").splitlines()
    assert lines[0].endswith("] shop: ERROR Executed 'Functions.f' (Failed, Duration=1ms)")
    assert lines[0].startswith("[") and lines[0][13] == "]"  # [HH:MM:SS.mmm], local time
    assert lines[1:] == ["    ValueError: x", "    Trace"]
    assert render({"level": "INFO", "message": "hello"}, "a") == "[] a: hello"
