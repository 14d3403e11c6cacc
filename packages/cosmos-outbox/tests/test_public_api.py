"""The public API is what it says: the root holds the outbox's names (at most 10: the other
parts have namespaces of their own), lazily (importing the package imports nothing else); every
module is `_private` or lists its public names in `__all__`, each of which exists; the async API
mirrors the sync one's names; nothing in the library imports in a cycle, at import time or at
all (type-only and deferred imports included: a circle of those still ties its modules into one
room)."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

import cosmos_outbox
import cosmos_outbox.aio
from cosmos_outbox_testing import in_memory

SOURCE = Path(cosmos_outbox.__file__).parent


def public_modules() -> list[str]:
    return sorted(
        m.name
        for m in pkgutil.walk_packages(cosmos_outbox.__path__, "cosmos_outbox.")
        if not any(part.startswith("_") for part in m.name.split(".")[1:])
    )


def test_the_root_holds_the_outboxs_names_each_of_which_is_there() -> None:
    """A team that writes its documents and relays their events learns `cosmos_outbox` alone
    (README "The package's shape"): 10 names, 25 in 0.3."""
    assert len(cosmos_outbox.__all__) <= 10, cosmos_outbox.__all__
    for name in cosmos_outbox.__all__:
        assert getattr(cosmos_outbox, name) is not None, name
    assert sorted(dir(cosmos_outbox)) == sorted(cosmos_outbox.__all__)


def test_importing_the_package_imports_nothing_more_until_a_name_is_used() -> None:
    code = (
        "import sys, cosmos_outbox; "
        "print(sorted(m for m in sys.modules if m.startswith(('cosmos_outbox', 'azure', "
        "'pydantic'))))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert loaded == "['cosmos_outbox', 'cosmos_outbox._lazy']"  # and the lazy names' helper


@pytest.mark.parametrize("module", public_modules())
def test_every_public_module_lists_its_names_and_each_exists(module: str) -> None:
    imported = importlib.import_module(module)
    names = getattr(imported, "__all__", None)
    assert isinstance(names, list | tuple), f"{module} has no __all__"
    missing = [n for n in names if not hasattr(imported, n)]
    assert not missing, f"{module}.__all__ names {missing}, which it has not"


README = Path(__file__).resolve().parents[1] / "README.md"


@pytest.mark.parametrize("module", public_modules())
def test_the_readme_names_every_public_name(module: str) -> None:
    """The README's "The public API" names each name of each public module's `__all__` (a name
    added without a word there is not public in all but name)."""
    text = README.read_text("utf-8")
    names = importlib.import_module(module).__all__
    unnamed = [
        n
        for n in names
        if f"`{n}" not in text
        and f" {n}`" not in text
        and f"({n}" not in text
        and f", {n}" not in text
    ]
    assert not unnamed, f"README.md does not name {module}'s {unnamed}"


#: Each `aio` module and the sync module whose names it mirrors (as `azure.cosmos.aio` mirrors
#: `azure.cosmos`).
MIRRORS = {
    "cosmos_outbox.aio": "cosmos_outbox",
    "cosmos_outbox.cosmos.aio": "cosmos_outbox.cosmos",
    "cosmos_outbox.servicebus.aio": "cosmos_outbox.servicebus",
    "cosmos_outbox.blob.aio": "cosmos_outbox.blob",
    "cosmos_outbox.subscriber.aio": "cosmos_outbox.subscriber",
}
#: An `aio` name whose sync twin an app never names (it gets it from `uow.repository(...)`).
AIO_ONLY = {"Repository"}


@pytest.mark.parametrize(("aio", "sync"), MIRRORS.items())
def test_each_aio_module_has_its_sync_modules_names_for_what_exists_in_both(
    aio: str, sync: str
) -> None:
    asynchronous, synchronous = importlib.import_module(aio), importlib.import_module(sync)
    assert set(asynchronous.__all__) - AIO_ONLY <= set(synchronous.__all__), aio
    for name in asynchronous.__all__:
        if name in synchronous.__all__:
            assert getattr(asynchronous, name) is not getattr(synchronous, name), name


def test_every_public_class_and_function_has_one_public_name() -> None:
    """One name per idea: an object exported by several public modules is exported under one
    name (the root re-exports names of other modules under the same name)."""
    names: dict[int, set[str]] = defaultdict(set)
    for module in ["cosmos_outbox", *public_modules()]:
        imported = importlib.import_module(module)
        for name in imported.__all__:
            value = getattr(imported, name)
            if isinstance(value, type) or inspect.isfunction(value):
                names[id(value)].add(name)
    assert [sorted(found) for found in names.values() if len(found) > 1] == []


def test_a_renamed_name_still_works_for_a_release_and_warns_naming_its_replacement() -> None:
    """0.4's renames ("session" is Service Bus's word; the Idempotency-Key is remembered, the
    claim check keeps "claim"): the old names work until 0.5 and warn, naming the new one. The
    names 0.3 renamed are gone, as its CHANGELOG said."""
    import cosmos_outbox.aio
    import cosmos_outbox.cosmos
    import cosmos_outbox_testing.contracts

    with pytest.warns(DeprecationWarning, match=r"use cosmos_outbox\.Transaction"):
        assert cosmos_outbox.Session is cosmos_outbox.Transaction
    with pytest.warns(DeprecationWarning, match=r"use cosmos_outbox\.aio\.Transaction"):
        assert cosmos_outbox.aio.Session is cosmos_outbox.aio.Transaction
    with pytest.warns(DeprecationWarning, match="TransactionContract"):
        assert (
            cosmos_outbox_testing.contracts.SessionContract
            is cosmos_outbox_testing.contracts.TransactionContract
        )
    outbox = cosmos_outbox.Outbox()
    with in_memory(outbox), pytest.warns(DeprecationWarning, match="Outbox.transaction"):
        tx = outbox.session("c-1", entity="customer")
    with pytest.warns(DeprecationWarning, match="Transaction.remember"):
        tx.claim("k", request={"a": 1})
    for gone in ("AsyncCosmosDocumentStore", "NoSuchName"):
        with pytest.raises(AttributeError):
            getattr(cosmos_outbox.cosmos, gone)


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
    modules = {m.name: m for m in pkgutil.walk_packages(cosmos_outbox.__path__, "cosmos_outbox.")}
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
        assert node not in visiting, " -> ".join([*visiting[visiting.index(node) :], node])
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


def _every_import(path: Path, package: str, modules: set[str]) -> dict[str, str]:
    """Every library module `path` imports anywhere (top level, in functions, under
    `TYPE_CHECKING`), each with how: "type-only", "deferred" (in a function) or "import". A
    relative import is resolved; `from package import name` is the submodule when it is one."""
    tree = ast.parse(path.read_text(), str(path))
    found: dict[str, str] = {}
    how_of: dict[ast.AST, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for inner in ast.walk(node):
                how_of.setdefault(inner, "type-only")
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for inner in ast.walk(node):
                how_of.setdefault(inner, "deferred")
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, *([base] if base else [])])
            for alias in node.names:
                child = f"{base}.{alias.name}"
                targets.append(child if child in modules else base)
        elif isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        for target in targets:
            if target in modules:
                found.setdefault(target, how_of.get(node, "import"))
    return found


def library_import_graph() -> dict[str, dict[str, str]]:
    """module -> {module it imports: how}, over every module of the library; a submodule's
    import of its own package (how Python loads it) left out."""
    modules = {m.name: m for m in pkgutil.walk_packages(cosmos_outbox.__path__, "cosmos_outbox.")}
    modules["cosmos_outbox"] = None  # type: ignore[assignment]
    graph: dict[str, dict[str, str]] = {}
    for name in modules:
        spec = importlib.util.find_spec(name)
        assert spec is not None and spec.origin is not None
        is_package = spec.submodule_search_locations is not None
        package = name if is_package else name.rpartition(".")[0]
        edges = _every_import(Path(spec.origin), package, set(modules))
        graph[name] = {
            target: how
            for target, how in edges.items()
            if target != name and not name.startswith(f"{target}.")
        }
    return graph


def import_circles(graph: dict[str, dict[str, str]]) -> list[list[str]]:
    """The circles of the graph: its strongly connected components of more than one module
    (Tarjan's algorithm), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in graph[node]:
            if target not in index:
                connect(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return circles


def test_no_import_circle_even_through_type_only_or_deferred_imports() -> None:
    graph = library_import_graph()
    assert sum(len(targets) for targets in graph.values()) > 100  # the graph was read
    circles = import_circles(graph)
    described = [
        "; ".join(f"{a} -> {b} ({graph[a][b]})" for a in circle for b in circle if b in graph[a])
        for circle in circles
    ]
    assert len(circles) == 0, described


def test_the_circle_finder_sees_a_type_only_import_closing_a_loop() -> None:
    """The check above, on a graph with one type-only back edge: it is a circle."""
    graph = library_import_graph()
    assert "cosmos_outbox._wiring" in graph["cosmos_outbox._outbox"]
    graph["cosmos_outbox._wiring"] = {
        **graph["cosmos_outbox._wiring"],
        "cosmos_outbox._outbox": "type-only",
    }
    assert any(
        {"cosmos_outbox._outbox", "cosmos_outbox._wiring"} <= set(circle)
        for circle in import_circles(graph)
    )


#: What `cosmos_outbox.operations` exports: what a way in (the operators' routes, console and
#: command line) or an app uses, nothing more (issue 74: 56 names, 29 of them used nowhere
#: outside it); the results' parts are their fields' types, reached through them. 31 since
#: issue 97: the bulk kinds' table (`BULK_KINDS`), which the console and command line read; 33
#: since the failures' routes (a record of either kind listed, `FailureSummary`, and acted on
#: by its id, `FailureActed`), which the routes and the MCP server answer.
OPERATIONS_EXPORTS = {
    "Operations",
    "Actor",
    "ADMIN_KEY",
    "NO_KEY",
    "acting_as",
    "OutboxStatus",
    "Reading",
    "QuarantinedEvent",
    "Discarded",
    "DeadLetterCounts",
    "LetterSummary",
    "DeadLetterMessage",
    "ActionReport",
    "LetterPreview",
    "EventJourney",
    "AggregateJourney",
    "Subscribers",
    "Released",
    "RedrivePage",
    "RedrivePreview",
    "FailureGroups",
    "GroupOutcome",
    "Unarchived",
    "FailureSummary",
    "FailureActed",
    "Operation",
    "OperationList",
    "BULK_KINDS",
    "LetterFilter",
    "Selection",
    "MAX_PER_CALL",
    "trace_id",
    "stored_events",
}


def test_the_operators_api_exports_what_a_way_in_or_an_app_uses() -> None:
    import cosmos_outbox.operations

    assert set(cosmos_outbox.operations.__all__) == OPERATIONS_EXPORTS
    assert len(OPERATIONS_EXPORTS) <= 33
