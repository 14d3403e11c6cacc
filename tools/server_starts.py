"""The servers a `make test` started, by kind, job and test module, held to a budget.

`make test` gives each job a file of its own (`FUNCSTACK_STARTS=<dir>/<job>.jsonl`: funcstack
appends a line to it for every server it starts, `funcstack.starts`), then runs
`python -m tools.server_starts <dir> --budget N --restart-budget M`: it prints a table of the
starts by job and kind, the test modules that started the most stand-ins, and exits 1 when the
service stand-ins (Cosmos DB, Service Bus and Azurite endpoints) started number more than N, or
when those started again on their own state or port (the restarts a test's fault or a
persistence check makes: `funcstack.starts`) number more than M. Functions hosts, their
language workers and process instances are counted and shown, not budgeted.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from funcstack.starts import ENDPOINT_KINDS, KINDS, read_starts

__all__ = ["RESTARTS", "Tally", "main", "report", "tally"]

#: How many modules the report lists, the most stand-ins first.
TOP_MODULES = 15
#: The column of the stand-ins' restarts (the kinds' columns count first starts).
RESTARTS = "restarts"
COLUMNS = (*ENDPOINT_KINDS, RESTARTS, *(k for k in KINDS if k not in ENDPOINT_KINDS))


@dataclass(frozen=True)
class Tally:
    """The starts of a run: each job's by kind (first starts) and restarts of stand-ins, and
    each (job, module)'s stand-ins (first starts, restarts)."""

    by_job: dict[str, Counter[str]]
    by_module: dict[tuple[str, str], Counter[str]]

    @property
    def total(self) -> Counter[str]:
        return sum(self.by_job.values(), Counter[str]())

    @property
    def servers(self) -> int:
        """The service stand-ins started (not again): the budgeted count."""
        return sum(self.total[kind] for kind in ENDPOINT_KINDS)

    @property
    def restarts(self) -> int:
        """The stand-ins started again on their state or port."""
        return self.total[RESTARTS]


def tally(folder: Path) -> Tally:
    """The starts recorded in every `<job>.jsonl` of ``folder``."""
    by_job: dict[str, Counter[str]] = {}
    by_module: dict[tuple[str, str], Counter[str]] = {}
    for path in sorted(folder.glob("*.jsonl")):
        counts = by_job[path.stem] = Counter()
        for start in read_starts(path):
            stand_in = start.kind in ENDPOINT_KINDS
            column = RESTARTS if stand_in and start.restart else start.kind
            counts[column] += 1
            if stand_in:
                key = (path.stem, start.module or "(outside a test)")
                by_module.setdefault(key, Counter())[column] += 1
    return Tally(by_job, by_module)


def report(run: Tally, budget: int | None, restart_budget: int | None = None) -> list[str]:
    """The lines `make test` prints: the budgets' verdict first, then the tables."""
    total = run.total
    stand_ins = ", ".join(f"{kind} {total[kind]}" for kind in ENDPOINT_KINDS)
    lines = [
        f"servers started: {run.servers} ({stand_ins})" + _against(run.servers, budget),
        f"and started again (a test's restart): {run.restarts}"
        + _against(run.restarts, restart_budget),
    ]
    width = max([len("job"), len("total"), *(len(job) for job in run.by_job)])
    lines.append("  ".join(["job".ljust(width), *(c.rjust(10) for c in COLUMNS)]))
    for job, counts in [*sorted(run.by_job.items()), ("total", total)]:
        lines.append("  ".join([job.ljust(width), *(str(counts[c]).rjust(10) for c in COLUMNS)]))
    if run.by_module:
        lines.append("the test modules that started the most stand-ins (and restarts):")
        ranked = sorted(run.by_module.items(), key=lambda item: -item[1].total())
        for (job, module), counts in ranked[:TOP_MODULES]:
            first = counts.total() - counts[RESTARTS]
            lines.append(f"  {first:4d} {'+' + str(counts[RESTARTS]):>4}  {job}: {module}")
    return lines


def _against(count: int, budget: int | None) -> str:
    if budget is None:
        return ""
    return f"; budget {budget}" + (f": OVER BY {count - budget}" if count > budget else "")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.server_starts", description=__doc__)
    parser.add_argument("folder", type=Path, help="the folder of the jobs' <job>.jsonl files")
    parser.add_argument(
        "--budget", type=int, default=None, help="fail when more stand-ins than this started"
    )
    parser.add_argument(
        "--restart-budget", type=int, default=None, help="fail when more restarts than this"
    )
    args = parser.parse_args(argv)
    run = tally(args.folder)
    for line in report(run, args.budget, args.restart_budget):
        print(line)
    over = [
        f"{count} {what}, over its budget of {budget}"
        for count, what, budget in (
            (run.servers, "servers started", args.budget),
            (run.restarts, "restarts", args.restart_budget),
        )
        if budget is not None and count > budget
    ]
    if over:
        print(
            f"make test: {'; '.join(over)} (SERVER_BUDGET, RESTART_BUDGET in the Makefile; "
            "docs/testing.md, 'Servers started', says how to start fewer)",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
