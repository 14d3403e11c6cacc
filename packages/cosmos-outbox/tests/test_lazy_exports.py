"""One way to declare names imported on first use (`cosmos_outbox._lazy`), held here: every
module of the package that has a module `__getattr__` has it from `lazy_exports`, and its two
declarations of one list agree (the `TYPE_CHECKING` imports, which type checkers read, and
`_EXPORTS`, which the interpreter reads): the same names, from the same modules, each one there
when it is read, none of them imported before."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import cosmos_outbox

SOURCE = Path(cosmos_outbox.__file__).parent


def _module(path: Path) -> str:
    parts = path.relative_to(SOURCE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def lazy_modules() -> list[str]:
    """The modules that call `lazy_exports`."""
    return sorted(
        _module(path)
        for path in SOURCE.rglob("*.py")
        if path.name != "_lazy.py" and "lazy_exports(" in path.read_text()
    )


def declared(module: str) -> tuple[dict[str, str], dict[str, str]]:
    """(what the `TYPE_CHECKING` block binds, what `_EXPORTS` says): each name and where it is
    from (`module` or `module:attribute` when the name is another)."""
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin is not None
    tree = ast.parse(Path(spec.origin).read_text())
    checked: dict[str, str] = {}
    exports: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            imported: dict[str, str] = {}
            for statement in node.body:
                if isinstance(statement, ast.ImportFrom) and statement.module:
                    for alias in statement.names:
                        where = f"{statement.module}:{alias.name}"
                        imported[alias.asname or alias.name] = where
                        if alias.asname == alias.name:  # `X as X`: re-exported
                            checked[alias.name] = statement.module
                elif isinstance(statement, ast.Assign) and isinstance(statement.value, ast.Name):
                    [target] = statement.targets
                    assert isinstance(target, ast.Name)
                    checked[target.id] = imported[statement.value.id]
        elif (
            isinstance(node, ast.Assign)
            and [ast.unparse(t) for t in node.targets] == ["_EXPORTS"]
            and isinstance(node.value, ast.Dict)
        ):
            exports = {
                ast.literal_eval(key): ast.literal_eval(value)
                for key, value in zip(node.value.keys, node.value.values, strict=True)
                if key is not None
            }
    return checked, exports


def test_every_module_getattr_of_the_package_is_lazy_exports() -> None:
    defined = sorted(
        _module(path)
        for path in SOURCE.rglob("*.py")
        for node in ast.parse(path.read_text()).body
        if isinstance(node, ast.FunctionDef) and node.name in ("__getattr__", "__dir__")
    )
    assert defined == []
    assert lazy_modules() == [
        "cosmos_outbox",
        "cosmos_outbox.aggregates",
        "cosmos_outbox.aggregates.aio",
        "cosmos_outbox.aio",
        "cosmos_outbox.cli",
        "cosmos_outbox.operations",
        "cosmos_outbox.operators",
        "cosmos_outbox.relay",
        "cosmos_outbox.settings",
        "cosmos_outbox.testing",
        "cosmos_outbox.testing.contracts",
    ]


@pytest.mark.parametrize("module", lazy_modules())
def test_the_names_type_checkers_read_are_the_names_imported_at_run_time(module: str) -> None:
    checked, exports = declared(module)
    assert checked == exports
    imported = importlib.import_module(module)
    for name, where in exports.items():
        path, _, attribute = where.partition(":")
        assert getattr(imported, name) is getattr(importlib.import_module(path), attribute or name)
        assert name in imported.__all__ or name in ("PayloadConnection", "load_payload_settings")


@pytest.mark.parametrize("module", lazy_modules())
def test_a_lazy_name_is_not_imported_before_it_is_read(module: str) -> None:
    _, exports = declared(module)
    lazy = sorted({where.partition(":")[0] for where in exports.values()} - {module})
    code = f"import sys, {module}; print([m for m in {lazy!r} if m in sys.modules])"
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert loaded == "[]"


def test_a_name_that_is_neither_declared_nor_renamed_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Nothing'"):
        cosmos_outbox.Nothing  # noqa: B018
