"""The servers a `make test` started, by kind, job and test module, held to a budget.

`make test` gives each job a file of its own (`FUNCSTACK_STARTS=<dir>/<job>.jsonl`: funcstack
appends a line to it for every server it starts, `funcstack.starts`), then runs
`python -m tools.server_starts <dir> --budget N`: it prints a table of the starts by job and
kind, the test modules that started the most servers, and exits 1 when the service stand-ins
(Cosmos DB, Service Bus, Azurite endpoints) started number more than N. Functions hosts, their
language workers and process instances are counted and shown, not budgeted.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from funcstack.starts import ENDPOINT_KINDS, KINDS, Start, read_starts

__all__ = ["Tally", "main", "report", "tally"]

#: How many modules the report lists, the most servers first.
TOP_MODULES = 12


@dataclass(frozen=True)
class Tally:
    """The starts of a run: each job's, by kind, and each (job, module)'s stand-ins."""

    by_job: dict[str, Counter[str]]
    by_module: Counter[tuple[str, str]]

    @property
    def total(self) -> Counter[str]:
        return sum(self.by_job.values(), Counter[str]())

    @property
    def servers(self) -> int:
        """The service stand-ins started (the budgeted count)."""
        return sum(self.total[kind] for kind in ENDPOINT_KINDS)


def tally(folder: Path) -> Tally:
    """The starts recorded in every `<job>.jsonl` of ``folder``."""
    by_job: dict[str, Counter[str]] = {}
    by_module: Counter[tuple[str, str]] = Counter()
    for path in sorted(folder.glob("*.jsonl")):
        starts: list[Start] = read_starts(path)
        by_job[path.stem] = Counter(start.kind for start in starts)
        for start in starts:
            if start.kind in ENDPOINT_KINDS:
                by_module[(path.stem, start.module or "(outside a test)")] += 1
    return Tally(by_job, by_module)


def report(run: Tally, budget: int | None) -> list[str]:
    """The lines `make test` prints: the budget's verdict first, then the tables."""
    total = run.total
    stand_ins = ", ".join(f"{kind} {total[kind]}" for kind in ENDPOINT_KINDS)
    verdict = f"servers started: {run.servers} ({stand_ins})"
    if budget is not None:
        over = run.servers - budget
        verdict += f"; budget {budget}" + (f": OVER BY {over}" if over > 0 else "")
    width = max([len("job"), len("total"), *(len(job) for job in run.by_job)])
    lines = [verdict, "  ".join(["job".ljust(width), *(kind.rjust(10) for kind in KINDS)])]
    for job, counts in [*sorted(run.by_job.items()), ("total", total)]:
        lines.append("  ".join([job.ljust(width), *(str(counts[k]).rjust(10) for k in KINDS)]))
    if run.by_module:
        lines.append(f"the test modules that started the most ({', '.join(ENDPOINT_KINDS)}):")
        for (job, module), count in run.by_module.most_common(TOP_MODULES):
            lines.append(f"  {count:4d}  {job}: {module}")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.server_starts", description=__doc__)
    parser.add_argument("folder", type=Path, help="the folder of the jobs' <job>.jsonl files")
    parser.add_argument(
        "--budget", type=int, default=None, help="fail when more stand-ins than this started"
    )
    args = parser.parse_args(argv)
    run = tally(args.folder)
    for line in report(run, args.budget):
        print(line)
    if args.budget is not None and run.servers > args.budget:
        print(
            f"make test started {run.servers} servers, over its budget of {args.budget} "
            "(SERVER_BUDGET in the Makefile; docs/testing.md says how to start fewer)",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
