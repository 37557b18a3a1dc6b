"""What a held RBAC rule covers when a user grants rules to others (the escalation check)."""

from __future__ import annotations

from typing import Any

import pytest

from mcruntime.envtest._rbac import _atoms, _covers

pytestmark = pytest.mark.timeout(10)


def rule(**fields: Any) -> dict[str, Any]:
    return {"verbs": ["get"], "apiGroups": [""], "resources": ["pods"], **fields}


@pytest.mark.parametrize(
    ("held", "granted", "covered"),
    [
        (rule(), rule(), True),
        (rule(verbs=["*"]), rule(verbs=["get", "delete"]), True),
        (rule(), rule(verbs=["get", "delete"]), False),
        (rule(apiGroups=["*"]), rule(apiGroups=["apps"]), True),
        (rule(resources=["*"]), rule(resources=["pods/status"]), True),
        (rule(), rule(resources=["pods/status"]), False),  # a resource is not its subresources
        (rule(resources=["*/status"]), rule(resources=["pods/status"]), True),
        (rule(resourceNames=["a"]), rule(resourceNames=["a"]), True),
        (rule(resourceNames=["a"]), rule(), False),  # a named grant does not cover all names
        (rule(), rule(resourceNames=["a", "b"]), True),
        (
            {"verbs": ["get"], "nonResourceURLs": ["/metrics*"]},
            {"verbs": ["get"], "nonResourceURLs": ["/metrics/x"]},
            True,
        ),
        (
            {"verbs": ["get"], "nonResourceURLs": ["/healthz"]},
            {"verbs": ["get"], "nonResourceURLs": ["/metrics"]},
            False,
        ),
        (rule(), {"verbs": ["get"], "nonResourceURLs": ["/healthz"]}, False),
    ],
)
def test_a_held_rule_covers_a_grant_as_kube_apiserver_judges_it(
    held: dict[str, Any], granted: dict[str, Any], covered: bool
) -> None:
    assert all(_covers(held, atom) for atom in _atoms(granted)) is covered
