from __future__ import annotations

RESOURCE_GROUP_PARAM = "resource_group"
