"""Service Bus's per-message quotas have one source, Azure's quotas page, and two readers: the
library refuses at publish (and quarantines at relay) what could never be sent
(`cosmos_outbox._message_limits`), and funcstack's endpoint refuses it at send as Azure does
(`funcstack.servicebus._limits`). The two modules are read here as text (neither package is
imported: the app never imports a private module), and their figures and their source agree."""

from __future__ import annotations

import ast
import operator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIBRARY = ROOT / "packages/cosmos-outbox/src/cosmos_outbox/_message_limits.py"
ENDPOINT = ROOT / "packages/funcstack/src/funcstack/servicebus/_limits.py"
SHARED = ("MAX_ID_LENGTH", "MAX_PROPERTY_VALUE_BYTES", "MAX_HEADER_BYTES")
_OPERATORS = {ast.Mult: operator.mul, ast.Add: operator.add, ast.Sub: operator.sub}


def _constants(path: Path) -> dict[str, int]:
    """The module's top-level integer constants (literals, `*`, `+`, `-` and earlier names)."""
    found: dict[str, int] = {}

    def value(node: ast.expr) -> int:
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.Name):
            return found[node.id]
        if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
            return int(_OPERATORS[type(node.op)](value(node.left), value(node.right)))
        raise ValueError(ast.dump(node))

    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign):
            target, expression = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, expression = node.target, node.value
        else:
            continue
        if isinstance(target, ast.Name):
            try:
                found[target.id] = value(expression)
            except (ValueError, KeyError):
                continue
    return found


def test_the_library_and_the_endpoint_hold_the_same_figures() -> None:
    library, endpoint = _constants(LIBRARY), _constants(ENDPOINT)
    assert {name: library[name] for name in SHARED} == {name: endpoint[name] for name in SHARED}
    assert endpoint["MAX_ID_LENGTH"] == 128
    assert endpoint["MAX_PROPERTY_VALUE_BYTES"] == 32 * 1024
    assert endpoint["MAX_HEADER_BYTES"] == 64 * 1024


def test_both_name_azures_quotas_page_as_their_source() -> None:
    for path in (LIBRARY, ENDPOINT):
        docstring = " ".join((ast.get_docstring(ast.parse(path.read_text())) or "").split())
        assert "Service Bus quotas page" in docstring, path
