"""The README's code sample runs as written and reconciles a ConfigMap in each of three clusters."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"


@pytest.mark.timeout(60)
def test_readme_python_sample_runs(tmp_path):
    code = re.search(r"```python\n(.*?)```", README.read_text(), re.S)
    assert code, "README has no python sample"
    script = tmp_path / "sample.py"
    script.write_text(code.group(1))
    out = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=50, check=True
    ).stdout
    for name in ("cluster-0", "cluster-1", "cluster-2"):
        assert f"{name}: reconciled default/hello {{'from': '{name}'}}" in out
