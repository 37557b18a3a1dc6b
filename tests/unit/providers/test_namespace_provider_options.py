"""The ``namespace`` provider refuses bad options when it is built, naming them."""

from __future__ import annotations

import pytest
from kubernetes.client import Configuration

from mcruntime.cluster import Cluster
from mcruntime.plugins import ProviderError, load_provider
from mcruntime.providers import namespace

pytestmark = pytest.mark.timeout(10)

BAD = "tenant in (a"
WHAT = "option 'label_selector': invalid label selector 'tenant in (a'"


def test_a_label_selector_that_does_not_parse_is_refused_by_load_provider() -> None:
    # it was accepted, then retried with backoff forever: start blocked 30 s and readyz
    # said ok with no cluster at all
    with pytest.raises(ProviderError) as err:
        load_provider("namespace", label_selector=BAD)
    assert str(err.value).startswith(f"provider 'namespace': {WHAT}")
    assert "expected ',' or ')'" in str(err.value)


def test_a_label_selector_that_does_not_parse_is_refused_by_the_constructor() -> None:
    config = Configuration()
    config.host = "http://127.0.0.1:9"  # never reached
    host = Cluster.from_config(config, name="host")
    try:
        with pytest.raises(ProviderError) as err:
            namespace.Provider(host, label_selector=BAD)
        assert str(err.value).startswith(f"provider 'namespace': {WHAT}")
        assert namespace.Provider(host, label_selector="tenant in (a, b),!legacy").label_selector
    finally:
        host.stop()
