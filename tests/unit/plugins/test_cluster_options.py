"""A provider's ``cluster_options``: checked when the provider is built (the key it meant
suggested), and a cluster that the options do not build is the options' fault, not the
kubeconfig's."""

from __future__ import annotations

from typing import Any

import pytest

from mcruntime.errors import ConfigError
from mcruntime.plugins import ProviderError, cluster_from_kubeconfig, cluster_options_problem

pytestmark = pytest.mark.timeout(10)

#: a kubeconfig of a server nobody calls (building a Cluster makes no call)
KUBECONFIG: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Config",
    "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:9"}}],
    "users": [{"name": "u", "user": {"token": "t0ken"}}],
    "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
    "current-context": "x",
}


def test_a_misspelled_key_is_named_with_the_key_it_meant_and_the_known_ones() -> None:
    assert cluster_options_problem({"cache_optons": None}) == (
        "unknown key 'cache_optons'; did you mean 'cache_options'? "
        "(known: cache_options, uncached, allow_exec, allow_files)"
    )
    problem = cluster_options_problem({"allow_exec": True}, set_by_provider=("allow_exec",))
    assert problem == "key 'allow_exec' is set by the provider, not in cluster_options"
    assert cluster_options_problem({"name": "x"}) == (
        "key 'name' is set by the provider, not in cluster_options"
    )


def test_a_value_the_cluster_refuses_is_named_and_good_options_pass() -> None:
    problem = cluster_options_problem({"uncached": ["NoSuch"]})
    assert problem is not None and problem.startswith("ValueError: cannot read kind 'NoSuch'")
    assert cluster_options_problem({"uncached": ["v1/Secret"], "cache_options": None}) is None
    assert cluster_options_problem({}) is None


def test_options_that_build_no_cluster_are_a_provider_error_not_a_kubeconfig_error() -> None:
    with pytest.raises(ProviderError) as err:
        cluster_from_kubeconfig(KUBECONFIG, name="m", cluster_options={"uncached": ["NoSuch"]})
    assert str(err.value).startswith(
        "the provider's option 'cluster_options' does not build a cluster: ValueError: "
        "cannot read kind 'NoSuch'"
    )
    with pytest.raises(ConfigError):  # the kubeconfig's own fault stays a ConfigError
        cluster_from_kubeconfig(
            {**KUBECONFIG, "current-context": "gone"}, name="m", cluster_options={"uncached": []}
        )
    cluster = cluster_from_kubeconfig(
        KUBECONFIG, name="m", cluster_options={"uncached": ["v1/Secret"]}
    )
    try:
        assert cluster.name == "m" and cluster.uncached and not cluster.stopped
    finally:
        cluster.stop()


def test_the_cluster_built_with_options_works_after_the_one_checking_the_kubeconfig_stopped(
    envtest_server: Any,
) -> None:
    """The cluster built first, without the options, only checks the kubeconfig: its stop
    leaves the returned one whole, and no thread of either behind."""
    cluster = cluster_from_kubeconfig(
        envtest_server.kubeconfig(), name="m", cluster_options={"uncached": ["v1/Secret"]}
    )
    cluster.start()
    try:
        assert cluster.client.list("v1/Secret", "default") == []
        assert cluster.client.list("v1/ConfigMap", "default") == []
    finally:
        cluster.stop()
