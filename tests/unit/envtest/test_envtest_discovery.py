"""Which discovery document an ``Accept`` header gets: aggregated (v2, v2beta1) or legacy."""

from __future__ import annotations

import pytest

from mcruntime.envtest._discovery import aggregated_version

V2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
V2BETA1 = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
V2_PROTOBUF = (
    "application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
)


@pytest.mark.parametrize(
    ("accept", "version"),
    [
        (f"{V2},{V2BETA1},application/json", "v2"),  # kubectl 1.30+
        (f"{V2BETA1},application/json", "v2beta1"),  # kubectl 1.26-1.29
        (f"{V2_PROTOBUF},{V2},application/json", "v2"),  # protobuf: answered in JSON
        ("application/json", None),  # the Python client: the legacy documents
        ("*/*", None),
        ("", None),
        (f"application/json,{V2}", None),  # the client's order decides
        (f"application/json;q=0.5,{V2};q=0.9", "v2"),  # ... and its q values
        ("application/json;g=apidiscovery.k8s.io;v=v3;as=APIGroupDiscoveryList", None),
    ],
)
def test_the_first_discovery_format_the_client_accepts_is_answered(
    accept: str, version: str | None
) -> None:
    assert aggregated_version(accept) == version
