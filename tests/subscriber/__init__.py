"""Tests of the subscriber app (subscriber/): its package is imported as `contacts_projection`,
the name it has when the Functions host loads subscriber/ as the app folder."""

from __future__ import annotations

import sys
from pathlib import Path

SUBSCRIBER_DIR = Path(__file__).resolve().parents[2] / "subscriber"
if str(SUBSCRIBER_DIR) not in sys.path:
    sys.path.append(str(SUBSCRIBER_DIR))  # appended: the contacts app's function_app.py wins
