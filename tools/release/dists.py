"""The distributions this repository releases, read from their pyproject.toml: nothing about
them is written twice (their names, versions and Pythons are the metadata's)."""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ROOT / "packages"
#: The Pythons a check may run on, oldest first (a distribution's classifiers pick among them).
PYTHONS = ("3.11", "3.12", "3.13", "3.14")


def normalise(name: str) -> str:
    """A project name as an index names it (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class Distribution:
    """One distribution: its folder, name, version and the Pythons it says it supports."""

    folder: Path
    name: str
    version: str
    pythons: tuple[str, ...]
    requires_python: str

    @property
    def module(self) -> str:
        """Its import package (the file names of its sdist and wheel start with it too)."""
        return self.name.replace("-", "_")

    @property
    def sdist(self) -> str:
        return f"{self.module}-{self.version}.tar.gz"

    @property
    def wheel(self) -> str:
        return f"{self.module}-{self.version}-py3-none-any.whl"


def read(folder: Path) -> Distribution:
    project = tomllib.loads((folder / "pyproject.toml").read_text("utf-8"))["project"]
    classifiers = project.get("classifiers", [])
    pythons = tuple(p for p in PYTHONS if f"Programming Language :: Python :: {p}" in classifiers)
    return Distribution(
        folder=folder,
        name=project["name"],
        version=project["version"],
        pythons=pythons,
        requires_python=project["requires-python"],
    )


def distributions() -> list[Distribution]:
    """Every distribution under packages/, in the order they must be released: a distribution
    after every one it requires; among those ready, first the one the most others need (their
    extras included: the test kit before the operators, whose tests use it), then by name."""
    folders = sorted(p.parent for p in PACKAGES.glob("*/pyproject.toml"))
    found = {d.name: d for d in map(read, folders)}
    needs = {n: set(requirements_among(d, set(found))) for n, d in found.items()}
    wanted = {
        n: sum(n in requirements_among(d, set(found), extras=True) for d in found.values())
        for n in found
    }
    ordered: list[Distribution] = []
    while needs:
        ready = [n for n, required in needs.items() if required <= {d.name for d in ordered}]
        if not ready:
            raise ValueError(f"a requirement circle among {sorted(needs)}")
        name = min(ready, key=lambda n: (-wanted[n], n))
        ordered.append(found[name])
        del needs[name]
    return ordered


def requirements_among(dist: Distribution, names: set[str], *, extras: bool = False) -> list[str]:
    """The names of `names` that `dist` requires (with `extras`, its extras' requirements too;
    never itself). The release order follows the requirements without extras: an extra
    (cosmos-outbox's `test`, which names its test kit) is installed after both are out."""
    from packaging.requirements import Requirement

    project = tomllib.loads((dist.folder / "pyproject.toml").read_text("utf-8"))["project"]
    lines = list(project.get("dependencies", []))
    for extra in project.get("optional-dependencies", {}).values() if extras else ():
        lines += extra
    required = {normalise(Requirement(line).name) for line in lines}
    return sorted(n for n in names if normalise(n) in required and n != dist.name)


def main() -> int:
    """Print the release order, one distribution a line: its name, version and what of ours it
    requires (RELEASING.md)."""
    ordered = distributions()
    names = {d.name for d in ordered}
    for number, dist in enumerate(ordered, start=1):
        required = ", ".join(requirements_among(dist, names)) or "nothing of ours"
        print(f"{number}. {dist.name} {dist.version} (requires {required})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
