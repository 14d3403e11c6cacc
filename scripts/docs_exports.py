"""A griffe extension (mkdocs.yml, mkdocstrings' `extensions:`): a module whose names are
imported on first use (`cosmos_outbox._lazy`: `_EXPORTS = {name: module}`, `__all__ =
[*_EXPORTS]`) exports the dictionary's keys, as it does at run time, so the API reference lists
them (griffe reads `__all__` from the source, where a dictionary's keys are not spelled out).
A name the type checkers read as another (`Outbox = AsyncOutbox`) is documented as that one."""

from __future__ import annotations

import ast
from typing import Any

import griffe


class LazyExports(griffe.Extension):
    def on_module_members(self, *, node: Any, mod: griffe.Module, **kwargs: Any) -> None:
        if not isinstance(node, ast.Module):
            return
        keys: list[str] = []
        extra: list[str] = []
        for statement in node.body:
            if not isinstance(statement, ast.Assign) or len(statement.targets) != 1:
                continue
            target, value = statement.targets[0], statement.value
            if not isinstance(target, ast.Name):
                continue
            if target.id == "_EXPORTS" and isinstance(value, ast.Dict):
                keys = _strings(value.keys)
            elif target.id == "__all__" and isinstance(value, ast.List):
                extra = _strings(value.elts)
        if not keys:
            return
        mod.exports = [*keys, *extra]
        for name in keys:
            member = mod.members.get(name)
            # an alias's attributes are its target's: read none before its target is loaded
            if member is None or member.is_alias or not isinstance(member, griffe.Attribute):
                continue
            if isinstance(member.value, griffe.ExprName):
                other = mod.members.get(member.value.name)
                if isinstance(other, griffe.Alias):
                    mod.set_member(name, griffe.Alias(name, other.target_path, parent=mod))


def _strings(nodes: list[ast.expr | None] | list[ast.expr]) -> list[str]:
    return [n.value for n in nodes if isinstance(n, ast.Constant) and isinstance(n.value, str)]
