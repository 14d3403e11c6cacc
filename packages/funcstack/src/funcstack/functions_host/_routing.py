"""ASP.NET-style route templates as used by Functions HTTP triggers.

Supports literal segments (case-insensitive), ``{name}``, optional ``{name?}``, catch-all
``{*name}`` and the common inline constraints: ``int``, ``long``, ``bool``, ``guid``,
``alpha``, ``double``, ``float``, ``decimal``, ``datetime``, ``minlength(n)``,
``maxlength(n)``, ``length(n)``, ``min(n)``, ``max(n)``, ``range(a,b)`` and ``regex(...)``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TypeVar

T = TypeVar("T")

_PARAM = re.compile(r"\{(?P<body>[^{}]+(?:\([^)]*\))?[^{}]*)\}")

_CONSTRAINT_PATTERNS: dict[str, str] = {
    "int": r"-?\d+",
    "long": r"-?\d+",
    "bool": r"(?i:true|false)",
    "guid": r"[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}",
    "alpha": r"[A-Za-z]+",
    "double": r"-?\d+(?:\.\d+)?",
    "float": r"-?\d+(?:\.\d+)?",
    "decimal": r"-?\d+(?:\.\d+)?",
    "datetime": r"[^/]+",
}


class RouteTemplateError(ValueError):
    """The route template cannot be understood."""


def _param_regex(name: str, constraints: list[str], *, catch_all: bool) -> tuple[str, list[str]]:
    """Regex for one parameter plus the constraints checked after matching."""
    pattern = r".*" if catch_all else r"[^/]+"
    post: list[str] = []
    for constraint in constraints:
        base = constraint.split("(", 1)[0].lower()
        if base in _CONSTRAINT_PATTERNS:
            pattern = _CONSTRAINT_PATTERNS[base]
        elif base == "regex":
            inner = constraint[len("regex(") : -1]
            pattern = inner.removeprefix("^").removesuffix("$")
        elif base in {"minlength", "maxlength", "length", "min", "max", "range"}:
            post.append(constraint)
        else:
            raise RouteTemplateError(f"unsupported route constraint {constraint!r} on {name!r}")
    return f"(?P<{name}>{pattern})", post


def _check_post(value: str, constraint: str) -> bool:
    base, _, rest = constraint.partition("(")
    args = [a.strip() for a in rest.rstrip(")").split(",") if a.strip()]
    base = base.lower()
    try:
        if base == "minlength":
            return len(value) >= int(args[0])
        if base == "maxlength":
            return len(value) <= int(args[0])
        if base == "length":
            if len(args) == 2:
                return int(args[0]) <= len(value) <= int(args[1])
            return len(value) == int(args[0])
        number = int(value)
        if base == "min":
            return number >= int(args[0])
        if base == "max":
            return number <= int(args[0])
        return int(args[0]) <= number <= int(args[1])
    except (ValueError, IndexError):
        return False


@dataclass(frozen=True)
class CompiledRoute:
    """One route template compiled to a regex."""

    template: str
    regex: re.Pattern[str]
    params: tuple[str, ...]
    post_checks: tuple[tuple[str, str], ...]
    catch_all: bool

    def match(self, path: str) -> dict[str, str] | None:
        """Route values for `path` (no leading slash), as ASP.NET Core's template matcher
        reads it: one trailing slash is ignored, empty segments count (and match no
        parameter); a catch-all captures to the end of the path, trailing slash included."""
        trimmed = path[:-1] if path.endswith("/") else path
        m = self.regex.fullmatch(trimmed)
        if m is None:
            return None
        values = {k: v for k, v in m.groupdict().items() if v is not None}
        if self.catch_all and trimmed != path and values.get(self.params[-1]):
            values[self.params[-1]] += "/"
        for name, constraint in self.post_checks:
            if name in values and not _check_post(values[name], constraint):
                return None
        return values


def compile_route(template: str) -> CompiledRoute:
    """Compile a Functions route template (without the route prefix)."""
    template = template.strip().strip("/")
    parts: list[str] = []
    params: list[str] = []
    post: list[tuple[str, str]] = []
    catch_all = False
    segments = template.split("/") if template else []
    for index, segment in enumerate(segments):
        sep = "/" if index else ""
        pos = 0
        seg_regex = ""
        optional_segment = False
        has_param = False
        for m in _PARAM.finditer(segment):
            seg_regex += re.escape(segment[pos : m.start()])
            pos = m.end()
            has_param = True
            body = m.group("body").strip()
            is_catch_all = body.startswith("*")
            body = body.lstrip("*")
            default: str | None = None
            name_part, *constraint_parts = _split_constraints(body)
            if "=" in name_part:
                name_part, default = name_part.split("=", 1)
            optional = name_part.endswith("?") or default is not None
            name = name_part.rstrip("?")
            if not name.isidentifier():
                raise RouteTemplateError(f"bad parameter name {name!r} in {template!r}")
            regex, checks = _param_regex(name, constraint_parts, catch_all=is_catch_all)
            post.extend((name, c) for c in checks)
            params.append(name)
            if is_catch_all:
                catch_all = True
                optional = True
            seg_regex += regex
            optional_segment = optional_segment or (optional and m.group(0) == segment)
        seg_regex += re.escape(segment[pos:])
        if not has_param:
            seg_regex = "".join(
                f"[{c.lower()}{c.upper()}]" if c.isalpha() else re.escape(c) for c in segment
            )
        if optional_segment:
            parts.append(f"(?:{re.escape(sep)}{seg_regex})?")
        else:
            parts.append(re.escape(sep) + seg_regex)
    return CompiledRoute(
        template=template,
        regex=re.compile("".join(parts)),
        params=tuple(params),
        post_checks=tuple(post),
        catch_all=catch_all,
    )


def _split_constraints(body: str) -> list[str]:
    """Split ``name:c1:c2(x:y)`` on colons outside parentheses."""
    out: list[str] = []
    depth = 0
    current = ""
    for ch in body:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == ":" and depth == 0:
            out.append(current)
            current = ""
        else:
            current += ch
    out.append(current)
    return out


@dataclass
class RouteTable[T]:
    """Routes -> (methods, target), tried in the order they were added, as the Functions host
    tries its routes (an ASP.NET Core ``RouteCollection``: the first route whose template and
    method constraint match wins; no precedence between templates)."""

    _entries: list[tuple[CompiledRoute, frozenset[str] | None, T]] = field(default_factory=list)

    def add(self, template: str, methods: frozenset[str] | None, target: T) -> None:
        self._entries.append((compile_route(template), methods, target))

    def resolve(self, path: str, method: str) -> tuple[T, dict[str, str]] | None:
        """``(target, route_params)`` of the first route that takes ``path`` and ``method``, or
        ``None`` (the host's 404, also when only the method differs)."""
        for route, methods, target in self._entries:
            if methods is not None and method not in methods:
                continue
            values = route.match(path)
            if values is not None:
                return target, values
        return None

    def templates(self) -> list[str]:
        return [route.template for route, _, _ in self._entries]
