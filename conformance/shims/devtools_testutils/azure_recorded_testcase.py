from __future__ import annotations

from devtools_testutils import get_credential

__all__ = ["get_credential"]
