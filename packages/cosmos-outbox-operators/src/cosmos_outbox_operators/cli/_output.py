"""What a command writes (`Output`: its result on stdout, as lines for a person or the answer's
JSON; progress on stderr) and its exit codes (`cosmos_outbox_operators.cli._commands` says what
each means)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any, TextIO, TypeAlias

__all__ = ["DONE", "FAILED", "PARTLY", "USAGE", "Lines", "Output", "will_see"]

DONE, FAILED, USAGE, PARTLY = 0, 1, 2, 3
#: What a command prints for a person, of the operations' answer.
Lines: TypeAlias = Callable[[Any], Iterable[str]]


class Output:
    """Where a command writes: its result on stdout, progress on stderr (unless quiet)."""

    def __init__(self, *, as_json: bool, quiet: bool, out: TextIO, err: TextIO) -> None:
        self.as_json, self.quiet, self.out, self.err = as_json, quiet, out, err

    def result(self, body: Any, lines: Lines, code: int = DONE) -> int:
        shown = [json.dumps(body, indent=2, ensure_ascii=False)] if self.as_json else lines(body)
        for line in shown:
            print(line, file=self.out)
        return code

    def progress(self, text: str) -> None:
        if not self.quiet:
            print(text, file=self.err, flush=True)


def will_see(body: Any) -> str:
    return f"subscribers will see: {body['subscribersWillSee']}"
