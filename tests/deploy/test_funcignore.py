"""The deployment package: the files `func azure functionapp publish` would upload.

Core Tools zips the project directory minus `.git`/`.vscode` directories, minus a few files
(`.funcignore`, `.gitignore`, `local.settings.json`, ...) and minus what `.funcignore` matches
(gitignore syntax). This recomputes that set with `pathspec` and checks what is in it.
"""

from __future__ import annotations

import ast
import functools
import os
from pathlib import Path

import pathspec

from funcstack.deadlines import LONG
from tests.deploy.templates import ROOT

FUNCIGNORE = ROOT / ".funcignore"
# Always left out by Core Tools (FileSystemHelpers.GetLocalFiles).
CORE_TOOLS_IGNORED_DIRS = {".git", ".vscode"}
CORE_TOOLS_IGNORED_FILES = {
    ".funcignore",
    ".gitignore",
    "appsettings.json",
    "local.settings.json",
    "project.lock.json",
}

REQUIRED = [
    "function_app.py",
    "host.json",
    "requirements.txt",
    "packages/cosmos-outbox/pyproject.toml",
    "packages/cosmos-outbox/README.md",
    "packages/cosmos-outbox/src/cosmos_outbox/__init__.py",
    "packages/cosmos-outbox-operators/pyproject.toml",
    "packages/cosmos-outbox-operators/hatch_build.py",
    "packages/cosmos-outbox-operators/src/cosmos_outbox_operators/__init__.py",
]
REQUIRED_PACKAGES = ["domain", "infra"]
# Must never ship: tests, the local stack, node_modules, templates, local settings, tooling.
FORBIDDEN_PREFIXES = [
    "tests/",
    "packages/funcstack/",
    ".funcstack/",
    "tools/",
    "node_modules/",
    "deploy/",
    "docs/",
    "bench/",
    ".ci/",
    ".venv/",
    ".venv-checkov/",
    ".stack/",
    ".azure/",
    "subscriber/",
    "examples/",
    "packages/cosmos-outbox/tests/",
    "packages/cosmos-outbox/scripts/",
    "packages/cosmos-outbox-operators/tests/",
    "packages/cosmos-outbox-testing/",
    "packages/funcstack/",
]
FORBIDDEN_FILES = {
    "local.settings.json",
    "local.settings.sample.json",
    "docker-compose.yml",
    "azure.yaml",
    "requirements-dev.txt",
    "Makefile",
}


@functools.cache
def package() -> frozenset[str]:
    """Relative POSIX paths of every file the package would contain."""
    spec = pathspec.GitIgnoreSpec.from_lines(FUNCIGNORE.read_text("utf-8").splitlines())
    files = set()
    for directory, dirnames, filenames in os.walk(ROOT):
        rel_dir = Path(directory).relative_to(ROOT)
        # Prune ignored directories (gitignore: nothing under an ignored directory comes back).
        dirnames[:] = [
            d
            for d in dirnames
            if d not in CORE_TOOLS_IGNORED_DIRS
            and not spec.match_file(f"{(rel_dir / d).as_posix()}/")
        ]
        for name in filenames:
            rel = (rel_dir / name).as_posix()
            if name not in CORE_TOOLS_IGNORED_FILES and not spec.match_file(rel):
                files.add(rel)
    return frozenset(files)


def test_package_has_the_app_its_host_config_and_requirements() -> None:
    files = package()
    for required in REQUIRED:
        assert required in files
    for name in REQUIRED_PACKAGES:
        assert f"{name}/__init__.py" in files, f"{name}/ is not in the package"


def test_package_has_no_tests_local_stack_templates_or_local_settings() -> None:
    files = package()
    leaked = sorted(
        f
        for f in files
        if f.startswith(tuple(FORBIDDEN_PREFIXES)) or Path(f).name in FORBIDDEN_FILES
    )
    assert not leaked
    assert not any("/node_modules/" in f"/{f}" or "__pycache__" in f for f in files)


def test_package_has_every_first_party_module_the_app_imports() -> None:
    """Follow imports from function_app.py through the packaged code: all must be packaged."""
    files = package()
    top_level = {p.stem if p.suffix == ".py" else p.name for p in ROOT.iterdir()}
    seen: set[str] = set()
    todo = ["function_app.py"]
    while todo:
        rel = todo.pop()
        if rel in seen:
            continue
        seen.add(rel)
        tree = ast.parse((ROOT / rel).read_text("utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                modules = [node.module]
            else:
                continue
            for module in modules:
                if module.split(".")[0] not in top_level:
                    continue  # third party or standard library
                parts = module.split(".")
                candidates = [f"{'/'.join(parts)}.py", f"{'/'.join(parts)}/__init__.py"]
                present = [c for c in candidates if (ROOT / c).exists()]
                assert present, f"{rel} imports {module}, which does not exist"
                assert present[0] in files, f"{rel} imports {module}, left out by .funcignore"
                todo.append(present[0])
    assert len(seen) > 1


def test_funcignore_never_re_includes_files() -> None:
    """No pattern un-ignores the product code by accident (a `!` re-include)."""
    lines = [line.strip() for line in FUNCIGNORE.read_text("utf-8").splitlines()]
    assert not [line for line in lines if line.startswith("!")]


def test_the_library_builds_from_what_is_uploaded(tmp_path: Path) -> None:
    """The remote build installs requirements.txt, whose `./packages/cosmos-outbox` (and
    `./packages/cosmos-outbox-operators`) are built from the uploaded files: built here from
    exactly those, the core is one wheel with one top-level package and its typing marker, and
    the operators' carries the console's script library."""
    import subprocess
    import sys
    import zipfile

    for rel in package():
        if rel.startswith("packages/"):
            target = tmp_path / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes((ROOT / rel).read_bytes())
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--disable-pip-version-check",
            "-w",
            str(tmp_path / "dist"),
            str(tmp_path / "packages" / "cosmos-outbox"),
        ],
        capture_output=True,
        text=True,
        timeout=LONG,  # a build
        check=False,
    )
    assert out.returncode == 0, out.stderr
    [wheel] = (tmp_path / "dist").glob("cosmos_outbox-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")} == {
        "cosmos_outbox"
    }
    assert "cosmos_outbox/py.typed" in names
    # cosmos-outbox-operators, the app's operators' routes and console, is built from the upload
    # too; the console's script library travels with it (fetched once from npm by that
    # package's build hook; a remote build without npm needs it there)
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--disable-pip-version-check",
            "-w",
            str(tmp_path / "dist"),
            str(tmp_path / "packages" / "cosmos-outbox-operators"),
        ],
        capture_output=True,
        text=True,
        timeout=LONG,  # a build
        check=False,
    )
    assert out.returncode == 0, out.stderr
    [operators] = (tmp_path / "dist").glob("cosmos_outbox_operators-*.whl")
    names = zipfile.ZipFile(operators).namelist()
    assert "cosmos_outbox_operators/_console/static/vendor/htmx.min.js" in names
