"""tests/README.md names the test that proves each statement of the package's README: every
test it names exists (a renamed or moved test fails here, not in a reader's search)."""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import cosmos_outbox_testing.contracts

HERE = Path(__file__).parent
CONTRACTS = Path(cosmos_outbox_testing.contracts.__file__).parent

#: `folder/test_x.py` or `folder/test_x.py::name`; `SomeContract` or `SomeContract.test_x`.
FILE_REF = re.compile(r"^(?P<path>[\w/]+\.py)(?:::(?P<name>\w+))?$")
CONTRACT_REF = re.compile(r"^(?P<suite>\w+Contract)(?:\.(?P<name>test_\w+))?$")
BARE_TEST = re.compile(r"^test_\w+$")


@cache
def _defined(path: Path) -> frozenset[str]:
    return frozenset(
        node.name
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
    )


def _suites() -> dict[str, tuple[set[str], list[str]]]:
    suites: dict[str, tuple[set[str], list[str]]] = {}
    for module in CONTRACTS.glob("*.py"):
        for node in ast.parse(module.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef):
                methods = {
                    m.name
                    for m in node.body
                    if isinstance(m, ast.FunctionDef | ast.AsyncFunctionDef)
                }
                bases = [b.id for b in node.bases if isinstance(b, ast.Name)]
                suites[node.name] = (methods, bases)
    return suites


def _methods(suites: dict[str, tuple[set[str], list[str]]], suite: str) -> set[str]:
    methods, bases = suites[suite]
    return methods.union(*(_methods(suites, b) for b in bases if b in suites))


def _unknown(code: str, suites: dict[str, tuple[set[str], list[str]]]) -> str | None:
    """Why `code` names nothing, or None when it names a test (or is no test's name)."""
    if found := FILE_REF.match(code):
        path = HERE / found["path"]
        if not path.is_file():
            return "no such file"
        return None if found["name"] in (None, *_defined(path)) else "no such test"
    if found := CONTRACT_REF.match(code):
        if found["suite"] not in suites:
            return "no such suite"
        methods = _methods(suites, found["suite"])
        return None if found["name"] in (None, *methods) else "no such test in the suite"
    if BARE_TEST.match(code):
        everywhere = set().union(
            *(_defined(p) for p in HERE.rglob("test_*.py")),
            *(_defined(p) for p in CONTRACTS.glob("*.py")),
        )
        return None if code in everywhere else "no such test anywhere"
    return None


def test_every_test_the_readme_names_exists() -> None:
    readme = (HERE / "README.md").read_text(encoding="utf-8")
    suites = _suites()
    named = re.findall(r"`([^`]+)`", readme)
    wrong = {code: why for code in named if (why := _unknown(code, suites)) is not None}
    assert wrong == {}
    assert sum(1 for code in named if FILE_REF.match(code) or CONTRACT_REF.match(code)) > 50
