"""The direction of dependencies: entrypoints -> application -> domain; infra -> domain."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def imported_roots(package: str) -> set[str]:
    roots: set[str] = set()
    for path in (ROOT / package).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                roots |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                roots.add(node.module.split(".")[0])
    return roots


def test_domain_imports_only_the_standard_library_and_pydantic() -> None:
    foreign = {
        name for name in imported_roots("domain")
        if name not in sys.stdlib_module_names and name not in {"pydantic", "domain"}
    }
    assert foreign == set()


@pytest.mark.parametrize(
    ("package", "forbidden"),
    [
        ("domain", {"application", "infra", "entrypoints", "function_app", "azure"}),
        ("application", {"infra", "entrypoints", "function_app", "azure"}),
        ("infra", {"entrypoints", "function_app"}),
    ],
)
def test_inner_layers_never_import_outer_ones(package: str, forbidden: set[str]) -> None:
    assert imported_roots(package) & forbidden == set()


def test_importing_the_app_opens_no_connection_and_builds_nothing() -> None:
    """Imported with no settings at all: no socket is touched, no dependency is built."""
    import os
    import subprocess

    probe = (
        "import sys\n"
        "events = []\n"
        "sys.addaudithook(lambda e, a: events.append(e) if e.startswith('socket.') else None)\n"
        "import function_app\n"
        "from entrypoints import bootstrap\n"
        "assert bootstrap._current is None, 'dependencies built at import'\n"
        "assert not events, events\n"
        "print('clean')\n"
    )
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("Cosmos", "COSMOS", "ServiceBus", "SERVICEBUS"))}
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "clean"
