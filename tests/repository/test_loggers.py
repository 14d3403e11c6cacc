"""One logger style: every logger of the core and of the operators' distribution is
`logging.getLogger("<name>")` with a name of `cosmos_outbox.telemetry.LOGGERS` (the public
namespace whose work it logs), never `__name__` (a private module's path an app cannot know)."""

from __future__ import annotations

import ast
from pathlib import Path

from cosmos_outbox.telemetry import LOGGERS
from tests.repository import syntax

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [
    ROOT / "packages/cosmos-outbox/src/cosmos_outbox",
    ROOT / "packages/cosmos-outbox-operators/src/cosmos_outbox_operators",
]


def loggers(path: Path) -> list[str]:
    """Each `getLogger(...)` call's argument in `path`, as written: a name (a string) or a
    module's (`__name__`). A call without either -- the root logger, or another library's
    named by a variable, as `cosmos-outbox relay` quiets the SDKs' -- configures loggers that
    are not the package's, and is not counted."""
    found = []
    for node in syntax.nodes(path):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute | ast.Name)
            and (node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id)
            == "getLogger"
        ):
            found += [
                ast.unparse(arg)
                for arg in node.args
                if isinstance(arg, ast.Constant)
                or (isinstance(arg, ast.Name) and arg.id == "__name__")
            ]
    return found


def test_every_logger_is_named_for_a_public_namespace_of_the_list() -> None:
    named = [
        (str(path.relative_to(ROOT)), name)
        for folder in SOURCES
        for path in sorted(folder.rglob("*.py"))
        for name in loggers(path)
    ]
    assert len(named) > 15
    assert [(f, n) for f, n in named if n.strip("'\"") not in LOGGERS] == []


def test_every_listed_logger_is_used() -> None:
    used = {
        name.strip("'\"")
        for folder in SOURCES
        for path in folder.rglob("*.py")
        for name in loggers(path)
    }
    assert set(LOGGERS) - used == set()


def test_a_logger_named_by_module_is_found(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        'import logging\nlog = logging.getLogger(__name__)\nx = getLogger("a")\n'
        "logging.getLogger().setLevel(10)\nfor n in ('azure',): logging.getLogger(n)\n"
    )
    assert loggers(module) == ["__name__", "'a'"]
