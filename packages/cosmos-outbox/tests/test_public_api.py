"""The public API is what it says: the root re-exports what an app uses (one screen: at most 25
names), lazily (importing the package imports nothing else); every module is `_private` or
lists its public names in `__all__`, each of which exists; the async API mirrors the sync one's
names; nothing in the library imports in a cycle."""

from __future__ import annotations

import ast
import importlib
import pkgutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

import cosmos_outbox
import cosmos_outbox.aio

SOURCE = Path(cosmos_outbox.__file__).parent


def public_modules() -> list[str]:
    return sorted(m.name for m in pkgutil.walk_packages(cosmos_outbox.__path__,
                                                       "cosmos_outbox.")
                  if not any(part.startswith("_") for part in m.name.split(".")[1:]))


def test_the_root_holds_one_screen_of_names_each_of_which_is_there() -> None:
    assert len(cosmos_outbox.__all__) <= 25, cosmos_outbox.__all__
    for name in cosmos_outbox.__all__:
        assert getattr(cosmos_outbox, name) is not None, name
    assert sorted(dir(cosmos_outbox)) == sorted(cosmos_outbox.__all__)


def test_importing_the_package_imports_nothing_more_until_a_name_is_used() -> None:
    code = ("import sys, cosmos_outbox; "
            "print(sorted(m for m in sys.modules if m.startswith(('cosmos_outbox', 'azure', "
            "'pydantic'))))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True).stdout.strip()
    assert loaded == "['cosmos_outbox']"


@pytest.mark.parametrize("module", public_modules())
def test_every_public_module_lists_its_names_and_each_exists(module: str) -> None:
    imported = importlib.import_module(module)
    names = getattr(imported, "__all__", None)
    assert isinstance(names, list | tuple), f"{module} has no __all__"
    missing = [n for n in names if not hasattr(imported, n)]
    assert not missing, f"{module}.__all__ names {missing}, which it has not"


def test_the_async_api_has_the_sync_names_it_mirrors() -> None:
    for name in ("Outbox", "AggregateService", "UnitOfWork"):
        assert name in cosmos_outbox.aio.__all__ and name in cosmos_outbox.__all__
        assert getattr(cosmos_outbox.aio, name) is not getattr(cosmos_outbox, name)


def _imports(path: Path, module: str) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # imports inside functions and under TYPE_CHECKING are not cycles at import time
            found.add(node.module)
    return {m for m in found if m.startswith("cosmos_outbox") and m != module}


def _top_level_imports(path: Path, module: str) -> set[str]:
    """Modules imported when `module` is imported: top-level statements only (not inside
    functions, not under `if TYPE_CHECKING`)."""
    tree = ast.parse(path.read_text(), str(path))
    found: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found |= {f"{node.module}.{a.name}" for a in node.names}
    return {m for m in found if m.startswith("cosmos_outbox.") and m != module}


def test_no_module_of_the_library_imports_in_a_cycle() -> None:
    modules = {m.name: m for m in pkgutil.walk_packages(cosmos_outbox.__path__,
                                                        "cosmos_outbox.")}
    graph: dict[str, set[str]] = defaultdict(set)
    for name in modules:
        spec = importlib.util.find_spec(name)
        assert spec is not None and spec.origin is not None
        graph[name] = {m for m in _top_level_imports(Path(spec.origin), name) if m in modules}
    visiting: list[str] = []
    done: set[str] = set()

    def visit(node: str) -> None:
        if node in done:
            return
        assert node not in visiting, " -> ".join([*visiting[visiting.index(node):], node])
        visiting.append(node)
        for target in sorted(graph[node]):
            # a package imports its submodules' names; the submodule importing its package's
            # __init__ back is how Python loads it, not a cycle of the code
            if not node.startswith(f"{target}."):
                visit(target)
        visiting.pop()
        done.add(node)

    for name in sorted(graph):
        visit(name)
