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
    runnable = [b for b in blocks if "install_crds(cluster, [WebApp]" not in b]
    assert len(runnable) == 4, "the model sample, the versions sample, and the fleet's two"
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


def test_the_page_s_fleet_sample_converts_the_renamed_field_both_ways() -> None:
    blocks = re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S)
    runnable = [b for b in blocks if "install_crds(cluster, [WebApp]" not in b]
    namespace: dict[str, Any] = {"__name__": "crds_page"}
    for block in runnable:  # the fleet's samples build on the model sample's imports
        if "mgr.fleet_clusters()" in block:  # the migration loop needs a running fleet: its imports
            block = "\n".join(line for line in block.splitlines() if line.startswith("from "))
        exec(compile(block, str(PAGE), "exec", dont_inherit=True), namespace)
    crd = namespace["generate_crd"](namespace["Backend"], namespace["BackendV1alpha1"])
    versions = {v["name"]: v for v in crd["spec"]["versions"]}
    assert (versions["v1"]["storage"], versions["v1alpha1"]["deprecated"]) == (True, True)
    assert (
        "size"
        in versions["v1alpha1"]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    )
    old = {"apiVersion": "shop.example.com/v1alpha1", "spec": {"image": "x", "size": 3}}
    new = namespace["to_v1"](old)
    assert new["spec"] == {"image": "x", "replicas": 3}
    assert namespace["to_v1alpha1"](new)["spec"] == {"image": "x", "size": 3}
    assert callable(namespace["migrate_storage"])
