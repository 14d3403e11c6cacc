"""Each distribution's own tests as its README's "Tests" section says to run them: its `pip install
"<name>[<extras>]"` line's extras and its `python -m pytest ...` line's arguments are what the
trials install and run from the sdist (trial.py), so the README's commands are the ones tried. A
README without that section, or whose test line is a bare `pytest` (which does not put the
folder on the import path), is refused (`check`).

What a README leaves to the repository: cosmos-outbox's adapter suites, which also run on its
oldest Python against funcstack's services started from the repository's venv (`ADAPTERS`).
cosmos-outbox-testing ships no tests (cosmos-outbox's sdist holds the kit's): its README's
section says how an app's tests run with it (`python -m pytest`), as the trials run its first
example's.
"""

from __future__ import annotations

import functools
import shlex
from dataclasses import dataclass

from packaging.requirements import InvalidRequirement, Requirement

from tools.docblocks import shell_lines
from tools.release.build import Problems
from tools.release.dists import Distribution, distributions, normalise

#: The heading of a README's section of test commands.
HEADING = "Tests"
#: The distributions whose README's test lines install an extra and run tests from the sdist.
SHIPPED = (
    "cosmos-changefeed",
    "cosmos-outbox",
    "cosmos-outbox-operators",
    "cosmos-sql",
    "funcstack",
)
#: cosmos-outbox's adapter suites: on this Python, these arguments, against funcstack's services
#: started from the repository's 3.13 venv (FUNCSTACK).
ADAPTERS = {"cosmos-outbox": ("3.11", ("-m", "not e2e"))}


@dataclass(frozen=True)
class OwnTests:
    """What a distribution's own tests are, from its sdist: the extras that install what they
    need, and pytest's arguments (by Python; "*" for the others)."""

    extras: str
    args: dict[str, tuple[str, ...]]
    #: The Python on which the adapter suites also run, through its SDKs, against funcstack's
    #: services started from the repository's 3.13 venv (FUNCSTACK).
    adapters_on: str | None = None

    def arguments(self, python: str) -> tuple[str, ...]:
        return self.args.get(python, self.args["*"])


def readme_commands(dist: Distribution) -> tuple[str | None, tuple[str, ...] | None]:
    """The README's "Tests" section: the extras its `pip install "<name>[...]"` line installs
    (None: no such line) and its `python -m pytest` line's arguments (None: no such line)."""
    readme = dist.folder / "README.md"
    extras: str | None = None
    arguments: tuple[str, ...] | None = None
    for line in shell_lines(readme, str(readme)):
        if line.heading != HEADING:
            continue
        for part in line.text.split("&&"):
            words = shlex.split(part, comments=True)
            if words[:2] == ["pip", "install"]:
                extras = _extras(words[2:], dist) or extras
            elif words[:3] == ["python", "-m", "pytest"]:
                arguments = tuple(words[3:])
            elif words[:1] == ["pytest"]:
                arguments = None
                break
    return extras, arguments


def _extras(words: list[str], dist: Distribution) -> str | None:
    for word in words:
        try:
            requirement = Requirement(word)
        except InvalidRequirement:
            continue
        if normalise(requirement.name) == normalise(dist.name) and requirement.extras:
            return ",".join(sorted(requirement.extras))
    return None


@functools.cache
def own_tests() -> dict[str, OwnTests]:
    """The own tests of each distribution that ships them, as its README runs them."""
    found = {}
    for dist in distributions():
        if dist.name not in SHIPPED:
            continue
        extras, arguments = readme_commands(dist)
        if extras is None or arguments is None:
            continue  # check() names it
        args = {"*": arguments}
        adapters = ADAPTERS.get(dist.name)
        if adapters is not None:
            args[adapters[0]] = adapters[1]
        found[dist.name] = OwnTests(extras, args, adapters[0] if adapters else None)
    return found


def check(dists: list[Distribution], problems: Problems) -> None:
    """Each README names its test command (`python -m pytest`), and, for a distribution that
    ships its tests, the install line of its test extra."""
    for dist in dists:
        extras, arguments = readme_commands(dist)
        where = f"{dist.name} README.md"
        if arguments is None:
            problems.add(
                where,
                f'no "## {HEADING}" section with a `python -m pytest` line (a bare '
                "`pytest` does not put the folder on the import path)",
            )
        if dist.name in SHIPPED and extras is None:
            problems.add(
                where, f'no `pip install "{dist.name}[<extra>]"` line in its "## {HEADING}" section'
            )
