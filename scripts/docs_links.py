"""An mkdocs hook (mkdocs.yml `hooks:`): a guide's relative link to a file of the repository
outside docs/ (`../deploy/README.md#what-gets-created`, a package's README) is checked to exist
and pointed at that file on the repository's site, so the guides keep links that work on GitHub
and in an editor, and the site's strict build still fails on one that leads nowhere."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError

#: ](../path) or ](../path#anchor), the link's target group 1, its anchor group 2
_OUTSIDE = re.compile(r"\]\((\.\./[^)#\s]+)(#[^)\s]*)?\)")


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    docs = Path(config["docs_dir"]).resolve()
    root = docs.parent
    page_dir = (docs / page.file.src_path).parent
    blob = str(config["repo_url"]).rstrip("/") + "/blob/main/"

    def to_repository(match: re.Match[str]) -> str:
        target = (page_dir / match.group(1)).resolve()
        if target.is_relative_to(docs):  # inside docs/: mkdocs checks it
            return match.group(0)
        if not target.is_relative_to(root) or not target.exists():
            raise PluginError(
                f"{page.file.src_path}: link to {match.group(1)}, not a file of the repository"
            )
        return f"]({blob}{target.relative_to(root).as_posix()}{match.group(2) or ''})"

    return _OUTSIDE.sub(to_repository, markdown)
