"""The README's count of what adding the outbox took is the app's: its two diffs, applied
backwards to the app's files, match them line for line (a change to the app that the README does
not show fails here), and what they give back is the app without the outbox: valid Python that
imports nothing of cosmos-outbox. The lines the README counts are counted here."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import whatthepatch

APP = Path(__file__).resolve().parents[1]
README = (APP / "README.md").read_text(encoding="utf-8")
#: The README's prose, its line breaks as spaces.
PROSE = " ".join(README.split())


@dataclass(frozen=True)
class FileDiff:
    """One file's diff in a README block."""

    diff: whatthepatch.patch.diffobj
    path: str
    changes: list[whatthepatch.patch.Change]

    @property
    def created(self) -> bool:
        return all(change.old is None for change in self.changes)

    @property
    def deleted(self) -> bool:
        return all(change.new is None for change in self.changes)


def diffs() -> list[list[FileDiff]]:
    blocks = re.findall(r"```diff\n(.*?)```", README, flags=re.DOTALL)
    assert len(blocks) == 2, "the README shows two diffs: the outbox, then Idempotency-Key"
    steps = []
    for block in blocks:
        step = []
        for diff in whatthepatch.parse_patch(block):
            assert diff.header is not None and diff.changes is not None
            step.append(FileDiff(diff, diff.header.new_path.removeprefix("b/"), diff.changes))
        steps.append(step)
    return steps


def backwards(files: dict[str, str], steps: list[FileDiff]) -> dict[str, str]:
    """The files before `steps` (a file the step creates is gone, one it deletes is back)."""
    before = dict(files)
    for step in steps:
        lines = whatthepatch.apply_diff(step.diff, before.get(step.path, ""), reverse=True)
        if step.created:
            before.pop(step.path, None)
        else:
            before[step.path] = "\n".join(lines) + "\n"
    return before


def counted(steps: list[FileDiff]) -> tuple[int, int]:
    """(lines changed, lines written) in the files that exist before and after the step."""
    changed = written = 0
    for step in steps:
        if step.created or step.deleted:
            continue
        for change in step.changes:
            if not str(change.line or "").strip():
                continue
            if change.old is None:
                written += 1
            elif change.new is None:
                changed += 1
    return changed, written


def code_lines(source: str) -> int:
    """Lines of code of a module: not blank, not a comment, not its docstring, not
    `from __future__`."""
    module = ast.parse(source)
    skipped: set[int] = set()
    for node in module.body:
        docstring = (
            node is module.body[0]
            and isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant)
        )
        if docstring or (isinstance(node, ast.ImportFrom) and node.module == "__future__"):
            skipped.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    return sum(
        1
        for number, line in enumerate(source.splitlines(), start=1)
        if number not in skipped and line.strip() and not line.lstrip().startswith("#")
    )


def test_the_diffs_match_the_app_and_give_back_the_app_without_the_outbox() -> None:
    outbox_step, idempotency_step = diffs()
    names = {d.path for d in outbox_step + idempotency_step}
    now = {
        name: (APP / name).read_text(encoding="utf-8") for name in names if (APP / name).exists()
    }
    without_key = backwards(now, idempotency_step)
    without_outbox = backwards(without_key, outbox_step)
    assert set(without_outbox) == {
        "function_app.py",
        "loans/app.py",
        "loans/overdue.py",
        "loans/cosmos.py",
    }
    for name, source in without_outbox.items():
        ast.parse(source, filename=name)
        assert "cosmos_outbox" not in source and "loans.outbox" not in source, name


def test_the_apps_queries_are_the_same_before_and_after() -> None:
    """Its SQL is unchanged by the adoption: the same strings, given to the same function."""
    outbox_step, idempotency_step = diffs()
    names = {d.path for d in outbox_step + idempotency_step}
    now = {
        name: (APP / name).read_text(encoding="utf-8") for name in names if (APP / name).exists()
    }
    before = backwards(backwards(now, idempotency_step), outbox_step)
    for name in ("loans/app.py", "loans/overdue.py"):
        source = now[name]
        queries = re.findall(r'^[A-Z_]+ = "SELECT .*"$', source, flags=re.MULTILINE)
        assert queries and all(q in before[name] for q in queries), name
        assert source.count("await query(") == before[name].count("await query("), name


def test_the_readme_counts_what_the_diffs_change() -> None:
    outbox_step, idempotency_step = diffs()
    changed, written = counted(outbox_step)
    assert f"**{changed} of the app's lines changed**" in PROSE
    assert f"**{written} lines written**" in PROSE
    module = code_lines((APP / "loans" / "outbox.py").read_text(encoding="utf-8"))
    assert f"(`loans/outbox.py`: {module} lines of code)" in PROSE
    replaced = code_lines(backwards({}, [d for d in outbox_step if d.deleted])["loans/cosmos.py"])
    assert f"(`loans/cosmos.py`, {replaced} lines of code)" in PROSE
    changed, written = counted(idempotency_step)
    assert f"{written} more lines, {changed} changed" in PROSE
