"""Provider plugins: pluggy hooks, found through the entry-point group ``mcruntime.providers``."""

from mcruntime._exports import publish
from mcruntime._logfields import log_fields
from mcruntime._process import kill_process_group
from mcruntime._streak import FailureStreaks, describe_error
from mcruntime.plugins._checks import (
    did_you_mean,
    dns_label_problems,
    dns_subdomain_problems,
    label_key_problems,
    label_selector_problem,
    label_value_problems,
)
from mcruntime.plugins._cluster_options import cluster_from_kubeconfig, cluster_options_problem
from mcruntime.plugins._registry import (
    ProviderError,
    available_providers,
    incompatibility,
    load_provider,
    plugin_manager,
    validate_options,
)
from mcruntime.plugins._spec import CommaSeparated, ProviderOptions, ProviderSpec
from mcruntime.plugins.hookspecs import ENTRY_POINT_GROUP, hookimpl, hookspec

__all__ = [
    "ENTRY_POINT_GROUP",
    "ProviderError",
    "CommaSeparated",
    "FailureStreaks",
    "ProviderOptions",
    "ProviderSpec",
    "available_providers",
    "cluster_from_kubeconfig",
    "cluster_options_problem",
    "describe_error",
    "did_you_mean",
    "dns_label_problems",
    "dns_subdomain_problems",
    "hookimpl",
    "hookspec",
    "incompatibility",
    "kill_process_group",
    "label_key_problems",
    "label_selector_problem",
    "label_value_problems",
    "load_provider",
    "log_fields",
    "plugin_manager",
    "validate_options",
]

publish(__name__, globals(), __all__)
