"""Read the deployment templates: Bicep parsed with pycep-parser (the Bicep CLI is not needed).

pycep gives JSON where string literals and identifiers are both plain strings, negative numbers
are a `minus` operator and property access (`a.b.c`) is a nested `property_accessor` operator;
the helpers below turn those into values the tests can compare.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from pycep import BicepParser

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
MAIN = DEPLOY / "main.bicep"


@dataclass(frozen=True)
class Resource:
    file: Path
    symbol: str
    type: str
    config: dict[str, Any]

    @property
    def properties(self) -> dict[str, Any]:
        return cast(dict[str, Any], self.config.get("properties", {}))


def bicep_files() -> list[Path]:
    return sorted(DEPLOY.rglob("*.bicep"))


@functools.cache
def parse(path: Path) -> dict[str, Any]:
    return cast(dict[str, Any], BicepParser().parse(text=path.read_text(encoding="utf-8")))


def resources(type_: str | None = None) -> list[Resource]:
    """Every resource declared in every template (loops unwrapped), optionally of one type."""
    found = []
    for path in bicep_files():
        for symbol, res in parse(path).get("resources", {}).items():
            config = res["config"]
            if "loop_type" in config:  # resource x '...' = [for item in items: {...}]
                config = config["config"]
            if "condition" in config and "config" in config:  # = if (cond) {...}
                config = config["config"]
            if type_ is None or res["type"] == type_:
                found.append(Resource(path, symbol, res["type"], config))
    return found


def one(type_: str, symbol: str | None = None) -> Resource:
    matches = [r for r in resources(type_) if symbol is None or r.symbol == symbol]
    assert len(matches) == 1, f"expected one {type_} {symbol or ''}, found {len(matches)}"
    return matches[0]


def value(node: Any) -> Any:
    """A literal as Python: `-1` (a `minus` operator) -> -1; anything else unchanged."""
    if isinstance(node, dict) and "operator" in node:
        op = node["operator"]
        if op["type"] == "minus" and set(op["operands"]) == {"integer_value"}:
            return -int(op["operands"]["integer_value"])
    return node


def reference(node: Any) -> str | None:
    """`a.b.c` (nested property accessors) -> "a.b.c"; a bare identifier -> itself."""
    if isinstance(node, str):
        return node
    if isinstance(node, dict) and "operator" in node:
        op = node["operator"]
        if op["type"] == "property_accessor":
            left = reference(op["operands"]["operand_1"])
            right = reference(op["operands"]["operand_2"])
            if left is not None and right is not None:
                return f"{left}.{right}"
    return None


def walk(node: Any) -> Iterator[Any]:
    """Every node below `node`, depth first."""
    yield node
    if isinstance(node, dict):
        for child in node.values():
            yield from walk(child)
    elif isinstance(node, list):
        for child in node:
            yield from walk(child)


def references(node: Any) -> set[str]:
    return {ref for n in walk(node) if (ref := reference(n)) is not None}


def parameter(path: Path, name: str) -> dict[str, Any]:
    params = parse(path).get("parameters", {})
    assert name in params, f"{path.name} has no parameter {name}"
    return cast(dict[str, Any], params[name])


def default(path: Path, name: str) -> Any:
    return value(parameter(path, name).get("default"))


def allowed(path: Path, name: str) -> list[Any]:
    for decorator in parameter(path, name)["decorators"]:
        if decorator["type"] == "allowed":
            return cast(list[Any], decorator["argument"])
    raise AssertionError(f"{path.name} parameter {name} has no @allowed")


def variable(path: Path, name: str) -> Any:
    variables = parse(path).get("variables", {})
    assert name in variables, f"{path.name} has no variable {name}"
    return variables[name]["value"]


def modules(path: Path) -> dict[str, dict[str, Any]]:
    """symbol -> {"path": Path, "params": {...}, "condition": node | None}."""
    found = {}
    for symbol, module in parse(path).get("modules", {}).items():
        config = module["config"]
        condition = config.get("condition") if "config" in config else None
        body = config.get("config", config)
        found[symbol] = {
            "path": (path.parent / module["detail"]["path"]).resolve(),
            "params": body.get("params", {}),
            "condition": condition,
        }
    return found


FUNCTION_APP_MODULE = DEPLOY / "modules" / "functionapp.bicep"


def app_settings() -> dict[str, Any]:
    """The Function App's fixed app settings: name -> value node (from `var appSettings`)."""
    entries = variable(FUNCTION_APP_MODULE, "appSettings")
    return {entry["name"]: entry["value"] for entry in entries}


def string_list(path: Path, name: str) -> list[str]:
    """A variable's list of strings: a literal, or made of others (`concat`, `union`, a loop
    `[for x in list: '...${x}...']`, another variable's name), as Bicep evaluates it."""
    return _strings(path, variable(path, name))


def _strings(path: Path, node: Any) -> list[str]:
    if isinstance(node, list):
        assert all(isinstance(i, str) for i in node), node
        return cast(list[str], node)
    if isinstance(node, str):  # another variable, by its name
        return string_list(path, node)
    if isinstance(node, dict) and "loop_type" in node:  # [for name in list: '...${name}...']
        loop = node["loop_type"]["detail"]
        assert node.get("condition") is None and isinstance(node["config"], str), node
        items = string_list(path, loop["array_name"])
        return [node["config"].replace("${" + loop["item_name"] + "}", i) for i in items]
    function = node.get("function") if isinstance(node, dict) else None
    assert function is not None, f"not a list of strings: {node}"
    arguments = list(function["parameters"].values())
    if function["type"] in ("concat", "union"):
        joined = [item for argument in arguments for item in _strings(path, argument)]
        return joined if function["type"] == "concat" else list(dict.fromkeys(joined))
    raise AssertionError(f"{function['type']}(): not read as a list of strings here")


def iso_duration_seconds(text: str) -> float:
    """ISO 8601 duration (the subset Service Bus uses: PnDTnHnMnS) in seconds."""
    match = re.fullmatch(
        r"P(?:(?P<d>\d+)D)?(?:T(?:(?P<h>\d+)H)?(?:(?P<m>\d+)M)?(?:(?P<s>\d+(?:\.\d+)?)S)?)?", text
    )
    assert match and text not in {"P", "PT"}, f"not an ISO 8601 duration: {text}"
    parts = {k: float(v) if v else 0.0 for k, v in match.groupdict().items()}
    return parts["d"] * 86400 + parts["h"] * 3600 + parts["m"] * 60 + parts["s"]


def json_file(path: Path) -> dict[str, Any]:
    return cast(dict[str, Any], json.loads(path.read_text(encoding="utf-8")))


def resolved_text(path: Path, node: Any) -> str:
    """All strings under `node`, with variables of `path` (bare or `${name}`) replaced by values.

    Enough to find a role definition id that a template keeps in a variable.
    """
    variables = parse(path).get("variables", {})

    def resolve(text: str) -> str:
        if text in variables and isinstance(variables[text]["value"], str):
            return cast(str, variables[text]["value"])
        return re.sub(
            r"\$\{(\w+)\}",
            lambda m: (
                str(variables[m.group(1)]["value"]) if m.group(1) in variables else m.group(0)
            ),
            text,
        )

    return " ".join(resolve(n) for n in walk(node) if isinstance(n, str))


def role_definition(resource: Resource) -> str:
    return resolved_text(resource.file, resource.properties["roleDefinitionId"])
