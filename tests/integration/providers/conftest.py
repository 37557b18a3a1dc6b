"""Make the multi-cluster test helpers importable from the provider integration tests."""

from __future__ import annotations

import sys
from pathlib import Path

_HELPERS = str(Path(__file__).parent.parent / "multicluster")
if _HELPERS not in sys.path:
    sys.path.insert(0, _HELPERS)
