"""The samples of docs/concepts/crds.md run as written and generate what the page says."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

PAGE = Path(__file__).resolve().parents[3] / "docs" / "concepts" / "crds.md"

pytestmark = pytest.mark.timeout(30)


def test_the_page_samples_generate_the_crd_they_describe() -> None:
    blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S)
    runnable = [b for b in blocks if "install_crds(cluster" not in b]
    assert len(runnable) == 2, "the page's model sample and its versions sample"
    namespace: dict[str, Any] = {"__name__": "crds_page"}
    exec(compile(runnable[0], str(PAGE), "exec", dont_inherit=True), namespace)
    crd = namespace["crd"]
    assert crd["metadata"]["name"] == "webapps.apps.example.com"
    (version,) = crd["spec"]["versions"]
    assert set(version["subresources"]) == {"status", "scale"}
    assert [c["type"] for c in version["additionalPrinterColumns"]] == ["integer", "string"]
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    assert spec["properties"]["tier"]["enum"] == ["gold", "silver", "bronze"]
    assert spec["properties"]["podOverrides"]["x-kubernetes-preserve-unknown-fields"] is True

    exec(compile(runnable[1], str(PAGE), "exec", dont_inherit=True), namespace)
    versions = namespace["crd"]["spec"]["versions"]
    assert [(v["name"], v["storage"], v.get("deprecated", False)) for v in versions] == [
        ("v1", True, False),
        ("v1beta1", False, True),
    ]
