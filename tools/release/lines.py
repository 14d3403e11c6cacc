"""The documented shell lines the release check runs (`make release-check`), and how: read from the
same functions its trials read them with (trial.py, own_tests.py), so the docs' test
(tools/doclines.py) can say, for each line it does not run itself, that this check runs it.

- Each README's and guide's lines under "Install" (`install_lines`): run verbatim in a clean
  venv, by pip or by uv's pip interface standing in for it (trial.py `_install`).
- A package README's other `pip install` lines (an extra a later section names): run verbatim in
  the same venv after its install lines.
- A guide's other lines (trial.py `_guide_steps`): run verbatim in the folder of its app, after
  its install lines and its files.
- A README's "Tests" section: its `pip install "<name>[<extra>]"` line installs that extra, and
  its `python -m pytest ...` line runs in the sdist the check built, unpacked (own_tests.py); the
  test kit's, whose README's `python -m pytest` is how its first example's tests run.
"""

from __future__ import annotations

import functools
import shlex

from tools.docblocks import install_lines, shell_lines
from tools.release.dists import ROOT, distributions
from tools.release.own_tests import HEADING, SHIPPED
from tools.release.trial import GUIDES, extra_installs

#: What each kind of line is, said in the docs test's listing.
INSTALL = "run by make release-check: an install line, verbatim, in a clean venv"
EXTRA = "run by make release-check: after the install lines, verbatim, in the same clean venv"
GUIDE = "run by make release-check: a step of the guide, verbatim, in its app's folder (clean venv)"
OWN_INSTALL = "run by make release-check: installs the extra its own tests need, in a clean venv"
OWN_TESTS = "run by make release-check: its own tests, in the sdist the check built, unpacked"
FIRST_EXAMPLE_TESTS = (
    "run by make release-check: its first example's tests, by pytest, in a clean venv"
)


def readmes() -> list[str]:
    """The package READMEs the release check tries, by their paths in the repository."""
    return [str((d.folder / "README.md").relative_to(ROOT)) for d in distributions()]


@functools.cache
def tried() -> dict[tuple[str, int], str]:
    """(document, line) -> how the release check runs it, for every line it runs."""
    found: dict[tuple[str, int], str] = {}
    for doc in [*readmes(), *GUIDES]:
        for line in install_lines(ROOT / doc, doc):
            found[(doc, line.line)] = INSTALL
    for doc in readmes():
        for line in extra_installs(ROOT / doc, doc):
            found[(doc, line.line)] = EXTRA
    for doc in GUIDES:
        if doc.startswith("docs/"):
            for line in shell_lines(ROOT / doc, doc):
                found.setdefault((doc, line.line), GUIDE)
    for dist in distributions():
        doc = str((dist.folder / "README.md").relative_to(ROOT))
        for line in shell_lines(ROOT / doc, doc):
            if line.heading != HEADING:
                continue
            for part in line.text.split("&&"):
                words = shlex.split(part, comments=True)
                if words[:2] == ["pip", "install"] and dist.name in SHIPPED:
                    found[(doc, line.line)] = OWN_INSTALL
                elif words[:3] == ["python", "-m", "pytest"]:
                    found[(doc, line.line)] = (
                        OWN_TESTS if dist.name in SHIPPED else FIRST_EXAMPLE_TESTS
                    )
    return found
