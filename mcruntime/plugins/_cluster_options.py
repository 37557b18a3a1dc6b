"""A provider's ``cluster_options``: the options of every `Cluster` it builds, checked when
the provider is built, and the building of a cluster from a kubeconfig it found, telling the
kubeconfig's faults from those of the options."""

from __future__ import annotations

import inspect
from collections.abc import Collection, Mapping
from typing import Any

from kubernetes.client import Configuration

from mcruntime._streak import describe_error
from mcruntime.cluster import Cluster
from mcruntime.plugins._checks import did_you_mean
from mcruntime.plugins._registry import ProviderError

__all__ = ["cluster_from_kubeconfig", "cluster_options_problem"]

#: what `Cluster.from_kubeconfig` takes besides the options of `Cluster` itself
_LOADING = ("allow_exec", "allow_files")


def cluster_options_problem(
    options: Mapping[str, Any], *, set_by_provider: Collection[str] = ()
) -> str | None:
    """Why ``options`` cannot go to every [`Cluster`][mcruntime.cluster.Cluster] a provider
    builds (its ``cluster_options``, passed to
    [`from_kubeconfig()`][mcruntime.cluster.Cluster.from_kubeconfig]): a key the `Cluster`
    does not take (with the closest one it does), one of ``set_by_provider`` (``name``
    always), which the provider sets itself, or a value the `Cluster` refuses (a kind of
    ``uncached`` that is no kind); None when the options build a cluster.

    Checked when the provider is built: a key that is no option would otherwise fail the
    building of each cluster, one by one, as though each cluster's configuration were wrong.
    """
    taken = {"name", *set_by_provider}
    params = inspect.signature(Cluster.__init__).parameters.values()
    known = [p.name for p in params if p.kind is p.KEYWORD_ONLY and p.name not in taken]
    known += [k for k in _LOADING if k not in taken]
    for key in options:
        if key in taken:
            return f"key {key!r} is set by the provider, not in cluster_options"
        if key not in known:
            guess = did_you_mean(str(key), known)
            return f"unknown key {key!r}{guess} (known: {', '.join(known)})"
    # and the values: a Cluster built with them, of no server (it makes no call)
    try:
        Cluster.from_config(
            Configuration(),
            name="cluster-options",
            **{k: v for k, v in options.items() if k not in _LOADING},
        ).stop()
    except Exception as exc:
        return describe_error(exc)
    return None


def cluster_from_kubeconfig(
    kubeconfig: dict[str, Any],
    *,
    name: str,
    cluster_options: Mapping[str, Any] | None = None,
    allow_exec: bool = False,
    allow_files: bool = False,
) -> Cluster:
    """The [`Cluster`][mcruntime.cluster.Cluster] ``name`` of a kubeconfig a provider found
    (in a Secret, from a tool), built with the provider's ``cluster_options``.

    What is wrong with the kubeconfig raises as
    [`from_kubeconfig()`][mcruntime.cluster.Cluster.from_kubeconfig] raises it (a
    `ConfigError` naming the field, never the content); ``cluster_options`` that do not
    build a cluster (a value the `Cluster` refuses) raise
    [`ProviderError`][mcruntime.plugins.ProviderError] naming the option and the reason: a
    fault of the provider's options, not of the kubeconfig, which the provider must not
    report as a broken kubeconfig. ``allow_exec`` and ``allow_files`` in
    ``cluster_options`` (where the provider does not set them) override the arguments.
    """
    options = dict(cluster_options or {})
    cluster = Cluster.from_kubeconfig(
        kubeconfig,
        name=name,
        allow_exec=bool(options.pop("allow_exec", allow_exec)),
        allow_files=bool(options.pop("allow_files", allow_files)),
    )
    if not options:
        return cluster
    try:
        return Cluster.from_config(cluster.config, name=name, **options)
    except Exception as exc:
        raise ProviderError(
            f"the provider's option 'cluster_options' does not build a cluster: "
            f"{describe_error(exc)}"
        ) from None
    finally:
        cluster.stop()  # built without the options, to check the kubeconfig alone
