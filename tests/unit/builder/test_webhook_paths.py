"""The paths webhook_managed_by serves are controller-runtime's, so its manifests carry over."""

from __future__ import annotations

from typing import Any

import pytest

import mcruntime
from mcruntime.providers.clusters import Provider


def paths(kind: str) -> list[str]:
    mgr = mcruntime.Manager(provider=Provider())

    def default(request: Any, obj: Any) -> None:
        return None

    mcruntime.webhook_managed_by(mgr).for_(kind).with_defaulter(default).with_validator(
        default
    ).complete()
    return sorted(hook.path for hook in mgr.get_webhook_server().hooks())


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        # a core kind has an empty group: kubebuilder's `path=/mutate--v1-pod` markers
        ("v1/Pod", ["/mutate--v1-pod", "/validate--v1-pod"]),
        ("apps/v1/Deployment", ["/mutate-apps-v1-deployment", "/validate-apps-v1-deployment"]),
        (
            "example.mcruntime.io/v1/Widget",
            ["/mutate-example-mcruntime-io-v1-widget", "/validate-example-mcruntime-io-v1-widget"],
        ),
    ],
)
def test_admission_paths_are_controller_runtimes(kind: str, expected: list[str]) -> None:
    assert paths(kind) == expected
