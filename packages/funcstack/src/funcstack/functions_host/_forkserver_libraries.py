"""What the fork server learns a worker's libraries with (``_forkserver_server.py`` forks
them): which modules a worker's report names that are libraries, not its app's; whether a
folder shadows one; their import, with the settings it read traced and what a preloaded
library must not do at import refused."""

from __future__ import annotations

import importlib
import importlib.machinery
import os
import sys
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any


def libraries(report: Mapping[str, Any], base_path: Sequence[str]) -> list[str]:
    """Of the modules a worker reports (``_forkserver.tell_imports``), in its order, those
    found in an entry of the server's import path that is not one of the worker's own (its
    folder, its ``PYTHONPATH``): never the app's modules, even where its folder is on the
    server's path too."""
    entries, specific = report["entries"], report["specific"]
    allowed = set(base_path) - {os.path.normpath(str(folder)) for folder in specific}
    return [str(name) for name, index in report["imported"] if entries[int(index)] in allowed]


def shadowing(cwd: str, env: Mapping[str, str], modules: frozenset[str]) -> str | None:
    """Which of ``modules`` the folder ``cwd`` or an entry of ``env``'s ``PYTHONPATH`` holds a
    module of the name of (a new interpreter would import that one), and where; None: none."""
    for folder in [cwd, *python_path(env, cwd)]:
        try:
            names = {module_name(entry) for entry in Path(folder).iterdir()}
        except OSError:
            continue
        shadowing = names & modules
        if shadowing:
            return f"{folder} holds {', '.join(sorted(shadowing))}"
    return None


def import_libraries(
    names: Sequence[str], env: Mapping[str, str]
) -> tuple[dict[str, str | None], list[str], str]:
    """Import ``names`` in order: the settings their imports read (by name, with this
    process's values); or the first one whose import listed the environment, read the working
    folder, started a thread, or read a setting ``env`` (the worker's that told of it) has
    otherwise, with the modules its import brought, and why (then no more are imported)."""
    read: dict[str, str | None] = {}
    for name in names:
        if name in sys.modules:
            continue
        before = set(sys.modules)
        with traced() as seen, suppress(Exception):  # not preloaded: imported by the worker
            importlib.import_module(name)
        threads = threads_running()
        differ = sorted(k for k in seen - {LISTED, CWD} if env.get(k) != os.environ.get(k))
        why = (
            "it listed the environment"
            if LISTED in seen
            else "it read the working folder"
            if CWD in seen
            else "it started a thread"
            if threads
            else f"it read {', '.join(differ)}, which the worker has otherwise"
            if differ
            else ""
        )
        if why:
            return read, [name, *sorted(sys.modules.keys() - before - {name})], why
        read.update({key: os.environ.get(key) for key in seen})
    return read, [], ""


def threads_running() -> bool:
    """Whether this process runs another thread (Python's or any other)."""
    return threading.active_count() != 1 or len(list(Path("/proc/self/task").iterdir())) != 1


LISTED = "(the environment listed)"
CWD = "(the working folder)"


@contextmanager
def traced() -> Iterator[set[str]]:
    """The settings read from ``os.environ`` (and ``os.getenv``) meanwhile, by name; ``LISTED``
    if it was listed, ``CWD`` if the working folder was read. C code's ``getenv`` is not
    seen: the fingerprint holds those settings (``_forkserver.read_at_import``)."""
    seen: set[str] = set()
    environ: Any = os._Environ  # os.environ's class (os.environb's too)
    getitem, listing, getcwd, getcwdb = environ.__getitem__, environ.__iter__, os.getcwd, os.getcwdb

    def traced_getitem(self: Any, key: Any) -> Any:
        seen.add(key.decode() if isinstance(key, bytes) else str(key))
        return getitem(self, key)

    def traced_listing(self: Any) -> Any:
        seen.add(LISTED)
        return listing(self)

    def traced_getcwd() -> str:
        seen.add(CWD)
        return getcwd()

    def traced_getcwdb() -> bytes:
        seen.add(CWD)
        return getcwdb()

    environ.__getitem__ = traced_getitem
    environ.__iter__ = traced_listing
    os.getcwd, os.getcwdb = traced_getcwd, traced_getcwdb
    try:
        yield seen
    finally:
        environ.__getitem__ = getitem
        environ.__iter__ = listing
        os.getcwd, os.getcwdb = getcwd, getcwdb


def module_name(entry: Path) -> str:
    """The name ``entry`` is imported by from its folder (a package, a namespace package's
    portion, a module or an extension module); "" for a file that is none (``azure.yaml``)."""
    if entry.is_dir():
        return entry.name
    for suffix in importlib.machinery.all_suffixes():
        if entry.name.endswith(suffix):
            return entry.name[: -len(suffix)]
    return ""


def python_path(env: Mapping[str, str], cwd: str) -> list[str]:
    """``PYTHONPATH``'s entries as a new interpreter in ``cwd`` puts them on ``sys.path``."""
    value = env.get("PYTHONPATH")
    if not value:
        return []
    return [os.path.normpath(Path(cwd, entry)) for entry in value.split(os.pathsep)]


def top_level_modules() -> frozenset[str]:
    """The names of the packages and modules imported from a folder (a new interpreter would
    take one of the same name from the host's folder or ``PYTHONPATH`` instead)."""
    return frozenset(
        name.split(".", 1)[0]
        for name, module in list(sys.modules.items())
        if getattr(module, "__file__", None) or getattr(module, "__path__", None)
    )
