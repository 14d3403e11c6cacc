"""What funcstack installs on first use, in a cache it names: the Node packages of the Cosmos DB
endpoint and Azurite (``npm ci`` from the lock file shipped in the package) and the wheel holding
the Functions RPC messages (downloaded by pip, pinned by hash, never installed).

The cache is ``$FUNCSTACK_CACHE_DIR``, else ``$XDG_CACHE_HOME/funcstack``, else
``~/.cache/funcstack``. Each entry is named by a hash of what it was made from
(``node-<hash of package-lock.json>``, ``rpc-<hash of rpc-protos.txt>``), so a new funcstack
version with other pins installs beside the old ones. An entry is made in a temporary folder
and renamed into place, under a file lock: processes starting at once (test workers) install it
once. Each install says so in one line on stderr.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

CACHE_ENV = "FUNCSTACK_CACHE_DIR"
#: A wheel to use instead of the cached download (a path; what the host passes its worker).
RPC_WHEEL_ENV = "FUNCTIONS_RPC_WHEEL"
MIN_NODE = 20
_PACKAGE = Path(__file__).resolve().parent
NODE_PROJECT = _PACKAGE / "node"
RPC_REQUIREMENTS = _PACKAGE / "functions_host" / "rpc-protos.txt"
_WHEEL_GLOB = "azure_functions_runtime_v1-*.whl"
_STAMP = ".installed"


class SetupError(RuntimeError):
    """Something funcstack needs is missing or could not be installed (one line, the cause)."""


def cache_root() -> Path:
    configured = os.environ.get(CACHE_ENV)
    if configured:
        return Path(configured).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "funcstack"


def _digest(*files: Path) -> str:
    sha = hashlib.sha256()
    for file in files:
        sha.update(file.read_bytes())
    return sha.hexdigest()[:16]


def _say(line: str) -> None:
    print(f"funcstack: {line}", file=sys.stderr, flush=True)


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


# -- Node ---------------------------------------------------------------------------------------


def node_executable() -> str:
    """The ``node`` on PATH, checked to be Node.js >= 20 (SetupError otherwise)."""
    node = shutil.which("node")
    if node is None:
        raise SetupError(
            f"node was not found on PATH: funcstack needs Node.js >= {MIN_NODE} "
            "(with npm) for the Cosmos DB endpoint and Azurite"
        )
    try:
        version = subprocess.run(
            [node, "--version"], capture_output=True, text=True, timeout=30, check=False
        ).stdout.strip()
    except OSError as exc:
        raise SetupError(f"{node} could not be run: {exc}") from None
    match = re.match(r"v(\d+)\.", version)
    if match is None or int(match.group(1)) < MIN_NODE:
        raise SetupError(
            f"{node} is Node.js {version or '(unknown version)'}: funcstack needs "
            f"Node.js >= {MIN_NODE}"
        )
    return node


def node_dir() -> Path:
    """The folder holding ``node_modules`` for this funcstack version (not checked)."""
    return cache_root() / f"node-{_digest(NODE_PROJECT / 'package-lock.json')}"


def node_modules() -> Path:
    """``node_modules`` of the Cosmos DB endpoint and Azurite, installed by ``npm ci`` on first
    use (one line on stderr says so). SetupError when Node.js or npm is missing or npm fails."""
    node_executable()
    target = node_dir()
    if (target / _STAMP).exists():
        return target / "node_modules"
    npm = shutil.which("npm")
    if npm is None:
        raise SetupError(
            "npm was not found on PATH: funcstack installs its Node packages "
            "with npm (it comes with Node.js)"
        )
    with _locked(target.with_name(target.name + ".lock")):
        if (target / _STAMP).exists():
            return target / "node_modules"
        _say(
            f"first use: installing the Node packages (Cosmos DB endpoint, Azurite) into "
            f"{target} with npm ci"
        )
        work = Path(tempfile.mkdtemp(prefix=target.name + ".", dir=target.parent))
        try:
            for name in ("package.json", "package-lock.json"):
                shutil.copyfile(NODE_PROJECT / name, work / name)
            _run(
                [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"],
                f"npm ci failed in {work}",
                cwd=work,
            )
            (work / _STAMP).write_text("")
            shutil.rmtree(target, ignore_errors=True)
            work.rename(target)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return target / "node_modules"


def _run(command: list[str], failed: str, *, cwd: Path | None = None) -> None:
    """Run a set-up step; ``SetupError`` with ``failed``, its exit code and its last line of
    output when it fails."""
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        lines = [line for line in (done.stderr or done.stdout).splitlines() if line.strip()]
        raise SetupError(
            f"{failed} (exit code {done.returncode}): " + (lines[-1] if lines else "no output")
        )


# -- the Functions RPC messages -------------------------------------------------------------------


def rpc_dir() -> Path:
    return cache_root() / f"rpc-{_digest(RPC_REQUIREMENTS)}"


def rpc_wheel() -> Path:
    """The wheel with the compiled ``FunctionRpc.proto`` (``$FUNCTIONS_RPC_WHEEL``, or the
    cached download; downloaded by pip on first use, hash-pinned by ``rpc-protos.txt``)."""
    configured = os.environ.get(RPC_WHEEL_ENV)
    if configured:
        return Path(configured)
    target = rpc_dir()
    found = sorted(target.glob(_WHEEL_GLOB))
    if found and (target / _STAMP).exists():
        return found[-1]
    with _locked(target.with_name(target.name + ".lock")):
        found = sorted(target.glob(_WHEEL_GLOB))
        if found and (target / _STAMP).exists():
            return found[-1]
        _say(
            f"first use: downloading the Functions RPC messages (a pinned wheel, not "
            f"installed) into {target}"
        )
        work = Path(tempfile.mkdtemp(prefix=target.name + ".", dir=target.parent))
        try:
            download = [sys.executable, "-m", "pip", "download", "--quiet", "-d", str(work)]
            pinned = ["--no-deps", "--only-binary", ":all:", "--require-hashes"]
            _run(
                [*download, "--disable-pip-version-check", *pinned, "-r", str(RPC_REQUIREMENTS)],
                "pip download of the Functions RPC messages failed",
            )
            (work / _STAMP).write_text("")
            shutil.rmtree(target, ignore_errors=True)
            work.rename(target)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    found = sorted(target.glob(_WHEEL_GLOB))
    if not found:
        raise SetupError(f"no {_WHEEL_GLOB} in {target} after the download")
    return found[-1]


def setup() -> tuple[Path, Path]:
    """Install both on first use (what ``funcstack setup`` does): (node_modules, rpc wheel)."""
    return node_modules(), rpc_wheel()
