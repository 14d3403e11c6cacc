"""cosmos-outbox-operators' hooks (hatchling).

The metadata hook makes the package's entry points in the group `cosmos_outbox.commands` (where
the core's `cosmos-outbox` finds the operators' commands) from the one list of the commands,
`src/cosmos_outbox_operators/cli/_names.py` (`COMMANDS`: name -> `module:function`), read by
running that file, which imports nothing: a command added there is one of the installed
`cosmos-outbox`, with no second list to keep.

The build hook puts htmx -- the console page's hypermedia
library -- into the package, from npm, pinned by version and by the SHA-256 of the file shipped.

The console (`cosmos_outbox_operators._console`) serves htmx itself, so that the page loads
nothing from another origin and works in a closed network; htmx is not kept in this repository
(no copy of another project's code): it is fetched from the npm registry when the package is
built, with `npm pack` (npm checks the tarball against the registry's integrity hash), and
checked again here against the hash below. It lands in
`src/cosmos_outbox_operators/_console/static/vendor/` (ignored by git) with its licence (0BSD),
and ships in the wheel and in the sdist (`artifacts` in pyproject.toml).

Built from the sdist, or from a tree where it was fetched once (`make setup`, `make wheels`), the
file is there: no npm is needed. Otherwise the build needs npm on the PATH and the registry
(NPM_CONFIG_REGISTRY names a mirror); without them the build stops, saying so."""

from __future__ import annotations

import hashlib
import runpy
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface
from hatchling.metadata.plugin.interface import MetadataHookInterface

HTMX_VERSION = "2.0.11"
HTMX_SHA256 = "d6fdc75f204e6bdefa99b69bf1e6d4ac69b8a364f77929f45c13476b4000f717"
VENDOR = Path("src/cosmos_outbox_operators/_console/static/vendor")
#: what the package's tarball holds -> where it goes in VENDOR
FILES = {"package/dist/htmx.min.js": "htmx.min.js", "package/LICENSE": "htmx.LICENSE"}
#: The one list of the operators' commands, and the entry-point group the core reads.
NAMES = Path("src/cosmos_outbox_operators/cli/_names.py")
COMMANDS_GROUP = "cosmos_outbox.commands"


def command_entry_points(root: Path) -> dict[str, dict[str, str]]:
    """The package's entry points: the group `COMMANDS_GROUP`, one per command of `NAMES`."""
    commands = runpy.run_path(str(root / NAMES))["COMMANDS"]
    return {COMMANDS_GROUP: dict(commands)}


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def vendor_htmx(root: Path) -> Path:
    """htmx in `root`'s vendor folder, fetched unless it is there with the pinned hash."""
    vendor = root / VENDOR
    script = vendor / "htmx.min.js"
    if script.is_file() and (vendor / "htmx.LICENSE").is_file() and _sha256(script) == HTMX_SHA256:
        return script
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError(
            f"cosmos-outbox-operators' console needs htmx {HTMX_VERSION} from npm to build the "
            "package, and npm is not on the PATH: install Node.js (with npm), or install "
            "cosmos-outbox-operators from its wheel or its sdist, which carry the file"
        )
    with tempfile.TemporaryDirectory() as scratch:
        done = subprocess.run(  # noqa: S603  # npm from the PATH, fixed arguments
            [npm, "pack", f"htmx.org@{HTMX_VERSION}", "--pack-destination", scratch, "--silent"],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(
                f"npm pack htmx.org@{HTMX_VERSION} failed ({done.returncode}): "
                f"{done.stderr.strip()[-500:]}"
            )
        [tarball] = Path(scratch).glob("htmx.org-*.tgz")
        vendor.mkdir(parents=True, exist_ok=True)
        with tarfile.open(tarball) as archive:
            for member, name in FILES.items():
                extracted = archive.extractfile(member)
                if extracted is None:
                    raise RuntimeError(f"htmx.org@{HTMX_VERSION} has no {member}")
                (vendor / name).write_bytes(extracted.read())
    if _sha256(script) != HTMX_SHA256:
        script.unlink()
        raise RuntimeError(
            f"htmx.org@{HTMX_VERSION}'s htmx.min.js from npm is not the file pinned in "
            f"hatch_build.py (SHA-256 {HTMX_SHA256}): not shipped"
        )
    return script


class CustomBuildHook(BuildHookInterface):  # type: ignore[type-arg]
    """Fetch htmx before the wheel or the sdist is assembled (the editable wheel too)."""

    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        vendor_htmx(Path(self.root))


class CustomMetadataHook(MetadataHookInterface):
    """The entry points (pyproject.toml: `dynamic = ["entry-points"]`) from `NAMES`."""

    PLUGIN_NAME = "custom"

    def update(self, metadata: dict[str, Any]) -> None:
        metadata["entry-points"] = command_entry_points(Path(self.root))
