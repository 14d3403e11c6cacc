"""A real browser for the end-to-end tests: Debian's headless Chromium, driven by Selenium through
Debian's chromedriver (the same build: no driver download, no browser download; Selenium
Manager is never asked). `make setup` installs both with apt when missing (elsewhere: a Chromium
and its matching chromedriver on the PATH, or CHROMIUM / CHROMEDRIVER naming them).

Chromium starts with the flags that keep it quiet on a closed network (no background
networking, component updates, sync or QUIC: without them it floods the network with calls it
cannot complete) and a fresh profile. Also here: axe-core, the accessibility checker, fetched
from npm once (pinned by version and hash) and run inside the page; screenshots kept as test
artefacts."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service

from funcstack.deadlines import LONG

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1280,800",
)
AXE_VERSION = "4.14.1"
AXE_SHA256 = "29348999450cdf2849a8e70b7912fc2da85a849da39c0d0d5394f51d4a9ed95c"


def require_browser() -> None:
    """Skip (saying what to install) when there is no Chromium and chromedriver; fail instead
    where `make test` could install them (BROWSER_REQUIRED=1: apt is there), so that a failed
    install is never a walk silently skipped."""
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if shutil.which(p) is None]
    if missing:
        why = (
            f"no {', '.join(missing)}: on Debian/Ubuntu `make setup` installs chromium and "
            "chromium-driver; elsewhere install a Chromium and its matching chromedriver and "
            "set CHROMIUM and CHROMEDRIVER"
        )
        if os.environ.get("BROWSER_REQUIRED") == "1":
            pytest.fail(why)
        pytest.skip(why)


@contextmanager
def chromium(profile: Path) -> Iterator[webdriver.Chrome]:
    """A headless Chromium with a fresh profile under `profile`, stopped at the end."""
    require_browser()
    options = Options()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    try:
        yield driver
    finally:
        driver.quit()


def axe_source(cache: Path) -> str:
    """axe-core's script, from npm on first use (pinned), kept in `cache`."""
    kept = cache / f"axe-core-{AXE_VERSION}.min.js"
    if kept.is_file() and hashlib.sha256(kept.read_bytes()).hexdigest() == AXE_SHA256:
        return kept.read_text()
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("npm is needed to fetch axe-core (the accessibility checker)")
    with tempfile.TemporaryDirectory() as scratch:
        subprocess.run(  # npm from the PATH, fixed arguments
            [npm, "pack", f"axe-core@{AXE_VERSION}", "--pack-destination", scratch, "--silent"],
            check=True,
            capture_output=True,
            timeout=LONG,  # a download
        )
        [tarball] = Path(scratch).glob("axe-core-*.tgz")
        with tarfile.open(tarball) as archive:
            member = archive.extractfile("package/axe.min.js")
            assert member is not None
            source = member.read()
    assert hashlib.sha256(source).hexdigest() == AXE_SHA256, (
        "axe-core from npm is not the pinned file"
    )
    cache.mkdir(parents=True, exist_ok=True)
    kept.write_bytes(source)
    return source.decode()


def accessibility_violations(driver: webdriver.Chrome, axe: str) -> list[dict[str, Any]]:
    """axe-core's violations of WCAG 2.x A and AA (and best practices) on the current page."""
    driver.execute_script(axe)
    result = driver.execute_async_script(
        """
        const done = arguments[arguments.length - 1];
        axe.run(document, {runOnly: {type: "tag",
                values: ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "best-practice"]}})
           .then(r => done(r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,
                 nodes: v.nodes.map(n => n.target.join(" ")).slice(0, 5)}))))
           .catch(e => done([{id: "axe-error", help: String(e), nodes: []}]));
        """
    )
    assert isinstance(result, list)
    return result
