"""dist/ as a package index that stands for PyPI: a PEP 503 simple index (the HTML API pip and
uv read) written as files, served read-only by the standard library's HTTP server on
127.0.0.1, in a thread of the check's own process.

Why files and `http.server` rather than pypiserver: the index is six projects that do not
change while it serves; a static tree is what PEP 503 describes, needs no dependency and no
process to stop, and carries what pip checks (each file's sha256, `data-requires-python`, so
that pip on 3.11 never picks funcstack, which needs 3.13). Clients put it first
(`PIP_INDEX_URL`) and PyPI behind it (`PIP_EXTRA_INDEX_URL`) for every other requirement."""

from __future__ import annotations

import hashlib
import html
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tools.release.dists import Distribution, normalise


def write(dists: list[Distribution], out: Path, root: Path) -> None:
    """The simple index of `out`'s files under `root` (`root/simple/<name>/`, the files in
    `root/files/`)."""
    files = root / "files"
    files.mkdir(parents=True, exist_ok=True)
    projects = []
    for dist in dists:
        name = normalise(dist.name)
        projects.append(f'<a href="{name}/">{name}</a>')
        links = []
        for file in (dist.sdist, dist.wheel):
            shutil.copy2(out / file, files / file)
            digest = hashlib.sha256((out / file).read_bytes()).hexdigest()
            requires = html.escape(dist.requires_python)
            links.append(
                f'<a href="../../files/{file}#sha256={digest}" '
                f'data-requires-python="{requires}">{file}</a>'
            )
        page = root / "simple" / name
        page.mkdir(parents=True, exist_ok=True)
        (page / "index.html").write_text(_html(name, links), "utf-8")
    (root / "simple" / "index.html").write_text(_html("Simple index", projects), "utf-8")


def _html(title: str, links: list[str]) -> str:
    body = "<br>\n".join(links)
    return (
        '<!DOCTYPE html>\n<html><head><meta name="pypi:repository-version" content="1.0">'
        f"<title>{title}</title></head>\n<body>\n{body}\n</body></html>\n"
    )


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def serving(root: Path) -> Iterator[str]:
    """Serve `root` on 127.0.0.1 (a free port); yield the simple index's URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(_Quiet, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, name="release-index", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/simple/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
