"""What a manager's repr says: a failed test's traceback shows it beside its fixtures."""

from __future__ import annotations

import mcruntime
from mcruntime.providers import clusters


def test_the_repr_names_a_provider_with_no_clusters_yet():
    # a provider is a sized collection of clusters: empty, it is falsy, not absent
    assert repr(mcruntime.Manager(provider=clusters.Provider())) == (
        "Manager(local=False, provider=Provider)"
    )
