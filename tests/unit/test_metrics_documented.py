"""Every metric a manager serves is in the metrics table of docs/operations.md.

An SRE writes alerts from that table: a series the endpoint serves but the table
leaves out (the per-cluster health gauge, say) is one nobody alerts on.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from mcruntime.metrics import Metrics

REPO = Path(__file__).resolve().parents[2]


def documented() -> set[str]:
    text = (REPO / "docs" / "operations.md").read_text()
    # the table that opens the section (its subsections map other names, controller-runtime's)
    section = text.split("\n## Metrics\n", 1)[1].split("\n## ", 1)[0].split("\n### ", 1)[0]
    return set(re.findall(r"^\| `([a-z_]+)` \|", section, flags=re.MULTILINE))


def served() -> set[str]:
    return {
        f"{family.name}_total" if family.type == "counter" else family.name
        for family in Metrics().registry.collect()
    }


def test_every_metric_family_a_manager_serves_is_in_the_operations_table() -> None:
    assert served() - documented() == set()


def test_every_metric_the_operations_table_names_is_served() -> None:
    # a renamed or removed metric left in the table is an alert that never fires
    missing = documented() - served()
    if sys.platform != "linux":  # (prometheus_client reads the process metrics from /proc)
        missing = {name for name in missing if not name.startswith("process_")}
    assert missing == set()
