"""Shared command-line handling for mcruntime programs and examples.

    parser = argparse.ArgumentParser()
    mcruntime.cli.add_arguments(parser)
    mcruntime.cli.add_manager_arguments(parser)  # --leader-elect, --metrics-bind-address, ...
    parser.add_argument("--my-flag")  # the program's own, beside them
    args = parser.parse_args()
    mcruntime.cli.setup_logging(args.log_level)
    mgr = mcruntime.cli.manager_from_args(args, parser=parser)
    ...
    sys.exit(mcruntime.cli.run(mgr))  # 0 after SIGTERM, 1 with one line when it failed

``--provider NAME`` picks a provider plugin, ``--provider-option key=value``
(repeatable; a repeated key makes a list, JSON values are decoded, except that an
option that takes a string gets the text as written: ``label_value=true``) sets its
options, ``--kubeconfig``/``--context`` name the local (management) cluster and
``--local-cluster auto|yes|no`` says whether there is one.

[`add_manager_arguments`][mcruntime.cli.add_manager_arguments] adds the manager's flags,
named as kubebuilder's ``main.go`` names them; a flag given wins over the program's
``ManagerOptions``, one not given leaves it as the program set it.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import logging
import re
import sys
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, TypeAdapter, ValidationError

from mcruntime._goduration import parse_go_duration
from mcruntime._kubeconfig import in_cluster_problem
from mcruntime._listen import parse_bind_address
from mcruntime.plugins import (
    ProviderError,
    available_providers,
    dns_label_problems,
    load_provider,
)

if TYPE_CHECKING:
    from mcruntime.manager import Manager, ManagerOptions
    from mcruntime.multicluster import Provider

__all__ = [
    "add_arguments",
    "add_manager_arguments",
    "parse_provider_options",
    "provider_from_args",
    "manager_from_args",
    "wants_local_cluster",
    "run",
    "setup_logging",
]

log = logging.getLogger(__name__)

NO_PROVIDER = "none"


def add_arguments(parser: argparse.ArgumentParser, *, default_provider: str = NO_PROVIDER) -> None:
    """Add ``--provider``, ``--provider-option``, ``--kubeconfig``, ``--context``, ``--log-level``."""
    parser.add_argument(
        "--provider",
        default=default_provider,
        help=f"cluster provider plugin (default: {default_provider}; '{NO_PROVIDER}' = local cluster only)",
    )
    parser.add_argument(
        "--provider-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="provider option (repeatable)",
    )
    parser.add_argument(
        "--local-cluster",
        choices=["auto", "yes", "no"],
        default="auto",
        help="whether the manager has a local (management) cluster; auto: yes without a provider, "
        "with --kubeconfig/--context, or inside a pod with its service account token (in-cluster "
        "config)",
    )
    parser.add_argument("--kubeconfig", help="kubeconfig of the local (management) cluster")
    parser.add_argument("--context", help="kubeconfig context of the local cluster")
    parser.add_argument(
        "--log-level",
        default="INFO",
        type=str.upper,
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="log level (default: INFO)",
    )


#: set on the arguments by add_manager_arguments: manager_from_args reads the manager's flags
_MANAGER_FLAGS = "_mcruntime_manager_flags"
#: the ManagerOptions fields add_manager_arguments sets (each flag's ``dest``), by flag
_FLAG_FIELDS = {
    "--metrics-bind-address": "metrics_bind_address",
    "--health-probe-bind-address": "health_probe_bind_address",
    "--metrics-secure": "metrics_secure",
    "--metrics-cert-path": "metrics_cert_dir",
    "--leader-elect": "leader_election",
    "--leader-election-id": "leader_election_id",
    "--leader-election-namespace": "leader_election_namespace",
    "--leader-elect-lease-duration": "lease_duration",
    "--leader-elect-renew-deadline": "renew_deadline",
    "--leader-elect-retry-period": "retry_period",
    "--graceful-shutdown-timeout": "graceful_shutdown_timeout",
    "--watch-namespace": "_watch_namespaces",  # the caches' default_namespaces
}


def add_manager_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the manager's flags, named as kubebuilder's ``main.go`` and client-go name them.

    ``--metrics-bind-address``, ``--health-probe-bind-address``, ``--metrics-secure``,
    ``--metrics-cert-path``, ``--leader-elect``, ``--leader-election-id``,
    ``--leader-election-namespace``, ``--leader-elect-lease-duration``,
    ``--leader-elect-renew-deadline``, ``--leader-elect-retry-period``,
    ``--graceful-shutdown-timeout`` (durations as Go writes them, ``30s``, ``1m30s``,
    ``500ms``, or a number of seconds) and ``--watch-namespace`` (repeatable, or a comma
    list: the ``default_namespaces`` of the caches' options).
    [`manager_from_args`][mcruntime.cli.manager_from_args] sets each flag given on the
    program's ``ManagerOptions``; a flag not given leaves the option as the program set it
    (``--no-leader-elect``, ``--no-metrics-secure`` turn an option the program set off). A
    bad address, duration or namespace ends the program as any bad flag does (exit status
    2, naming the flag).
    """
    from mcruntime.manager import ManagerOptions

    default = ManagerOptions()
    group = parser.add_argument_group("manager")
    parser.set_defaults(**{_MANAGER_FLAGS: True})

    def add(flag: str, help: str, **kwargs: Any) -> None:
        group.add_argument(flag, dest=_FLAG_FIELDS[flag], default=None, help=help, **kwargs)

    add(
        "--metrics-bind-address",
        "host:port of the Prometheus metrics endpoint (':8080': every address; '0': off; "
        "default: off)",
        type=_bind_address,
        metavar="ADDRESS",
    )
    add(
        "--health-probe-bind-address",
        "host:port of /healthz and /readyz ('0': off; default: off)",
        type=_bind_address,
        metavar="ADDRESS",
    )
    add(
        "--metrics-secure",
        "serve the metrics over HTTPS (default: plain HTTP)",
        action=argparse.BooleanOptionalAction,
    )
    add(
        "--metrics-cert-path",
        "directory of the metrics endpoint's tls.crt and tls.key (reloaded when they change; "
        "default: a self-signed certificate); needs --metrics-secure",
        metavar="DIR",
    )
    add(
        "--leader-elect",
        "leader election: only the replica holding the Lease runs the controllers (default: off)",
        action=argparse.BooleanOptionalAction,
    )
    add("--leader-election-id", "name of the Lease every replica shares", metavar="NAME")
    add(
        "--leader-election-namespace",
        "namespace of the Lease (default: the pod's namespace, else 'default')",
        metavar="NAMESPACE",
    )
    for flag, field, what in (
        ("--leader-elect-lease-duration", "lease_duration", "how long a Lease not renewed holds"),
        ("--leader-elect-renew-deadline", "renew_deadline", "how long the leader tries to renew"),
        ("--leader-elect-retry-period", "retry_period", "how often a replica tries the Lease"),
    ):
        add(
            flag,
            f"{what} (default: {getattr(default, field):g}s)",
            type=_positive_duration,
            metavar="DURATION",
        )
    add(
        "--graceful-shutdown-timeout",
        "how long a stop waits for running reconciles and runnables (default: "
        f"{default.graceful_shutdown_timeout:g}s)",
        type=_duration,
        metavar="DURATION",
    )
    add(
        "--watch-namespace",
        "cache only these namespaces of namespaced kinds (repeatable, or a comma list), in the "
        "local cluster and every provider cluster without cache options of its own "
        "(default: all namespaces)",
        type=_namespaces,
        action="extend",
        metavar="NAMESPACE",
    )


def _namespaces(text: str) -> list[str]:
    names = [name.strip() for name in text.split(",")]
    for name in names:
        problems = dns_label_problems(name)
        if problems:
            raise argparse.ArgumentTypeError(f"{name!r} is no namespace: {'; '.join(problems)}")
    return names


def _bind_address(text: str) -> str:
    try:
        parse_bind_address(text, "")
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc).strip()) from None
    return text


_NUMBER = r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"


def _duration(text: str) -> float:
    """Seconds of a duration as Go writes it (``30s``, ``1m30s``, ``1.5h``, ``500ms``) or of a
    number of seconds (``30``, ``0.5``); none is negative."""
    if re.fullmatch(_NUMBER, text):
        return float(text)
    seconds = parse_go_duration(text)
    if seconds is None:
        raise argparse.ArgumentTypeError(
            f"{text!r} is no duration: write it as 30s, 1m30s, 500ms or a number of seconds"
        )
    return seconds


def _positive_duration(text: str) -> float:
    seconds = _duration(text)
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: must be more than 0")
    return seconds


def _manager_options(
    args: argparse.Namespace, options: ManagerOptions | None, local: bool
) -> ManagerOptions | None:
    """``options`` with the manager flags given on the command line set on a copy."""
    from mcruntime.cache import CacheOptions
    from mcruntime.errors import ConfigError
    from mcruntime.manager import ManagerOptions

    if not getattr(args, _MANAGER_FLAGS, False):
        return options
    given = {
        field: getattr(args, field)
        for field in _FLAG_FIELDS.values()
        if getattr(args, field, None) is not None
    }
    if not given:
        return options
    namespaces = given.pop(_FLAG_FIELDS["--watch-namespace"], None)
    merged = dataclasses.replace(options if options is not None else ManagerOptions(), **given)
    if namespaces is not None:
        cache = merged.cache if merged.cache is not None else CacheOptions()
        merged.cache = dataclasses.replace(
            cache, default_namespaces=list(dict.fromkeys(namespaces))
        )
    if given.get("leader_election"):
        if not merged.leader_election_id:
            raise ConfigError(
                "--leader-elect needs --leader-election-id: the name of the Lease every replica "
                "shares"
            )
        if not local:
            raise ConfigError(
                "--leader-elect needs a local cluster to hold the Lease: give --kubeconfig or "
                "--local-cluster yes, or run in a pod"
            )
    return merged


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def _typed_value(raw: str, model: type[BaseModel] | None, key: str) -> Any:
    """``raw`` JSON-decoded, unless option ``key`` of ``model`` refuses the decoded value and
    takes the text as written (a string option given ``true``, ``2024`` or ``[x]``)."""
    value = _value(raw)
    field = model.model_fields.get(key) if model is not None else None
    if field is None or field.annotation is None or isinstance(value, str):
        return value
    try:
        adapter: TypeAdapter[Any] = TypeAdapter(field.annotation)
    except Exception:  # a type pydantic cannot check alone: the model decides
        return value
    for candidate in (value, raw):
        try:
            adapter.validate_python(candidate)
        except ValidationError:
            continue
        return candidate
    return value  # neither: the option's own error names what it wants


def _options_model(provider: str | None) -> type[BaseModel] | None:
    if provider is None:
        return None
    try:
        spec = available_providers().get(provider)
    except Exception:  # a broken plugin: load_provider says so
        return None
    return spec.options if spec is not None else None


def parse_provider_options(pairs: list[str], *, provider: str | None = None) -> dict[str, Any]:
    """``["a=1", "b=x", "b=y"]`` -> ``{"a": 1, "b": ["x", "y"]}``.

    With ``provider``, an option of that provider that takes a string gets the value as
    written (``label_value=true`` is ``"true"``, not ``True``); other values are JSON-decoded.
    """
    options: dict[str, Any] = {}
    model = _options_model(provider)
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or not key:
            raise ProviderError(f"--provider-option {pair!r}: expected KEY=VALUE")
        value = _typed_value(raw, model, key)
        if key in options:
            prev = options[key]
            options[key] = [*prev, value] if isinstance(prev, list) else [prev, value]
        else:
            options[key] = value
    return options


def provider_from_args(args: argparse.Namespace) -> Provider | None:
    """The provider the arguments name, or None for ``--provider none``.

    Raises [`ProviderError`][mcruntime.plugins.ProviderError] for an unknown provider, a bad
    option, or a ``--provider-option`` given without a provider (it was dropped without a word).
    """
    if not args.provider or args.provider == NO_PROVIDER:
        if getattr(args, "provider_option", None):
            raise ProviderError(
                f"--provider-option {args.provider_option[0]!r} needs --provider: there is no "
                f"provider to take it (--provider {NO_PROVIDER})"
            )
        return None
    options = parse_provider_options(args.provider_option, provider=args.provider)
    return load_provider(args.provider, **options)


def wants_local_cluster(args: argparse.Namespace, provider: Provider | None) -> bool:
    """Whether ``--local-cluster`` (auto, yes, no) asks for a local cluster."""
    choice = getattr(args, "local_cluster", "auto")
    if choice != "auto":
        return bool(choice == "yes")
    # a pod whose service account token is not mounted is no more inside its cluster than
    # a laptop is: --kubeconfig (or yes) asks for a local cluster there
    in_pod = in_cluster_problem() is None
    return provider is None or bool(args.kubeconfig or args.context) or in_pod


def manager_from_args(
    args: argparse.Namespace,
    *,
    parser: argparse.ArgumentParser | None = None,
    options: ManagerOptions | None = None,
) -> Manager:
    """A [`Manager`][mcruntime.Manager] for the arguments: local cluster and provider.

    With ``parser``, a bad provider name or option, a local kubeconfig that cannot be
    loaded, or options the manager refuses, end the program as a bad argument does
    (``parser.error``: the usage and ``error: ...``, exit status 2) instead of raising
    [`MCRuntimeError`][mcruntime.errors.MCRuntimeError] (or ``ValueError``). ``options`` are
    the manager's; the flags of [`add_manager_arguments`][mcruntime.cli.add_manager_arguments]
    that were given are set on a copy of them.
    """
    from mcruntime.errors import ConfigError, MCRuntimeError
    from mcruntime.manager import Manager

    try:
        provider = provider_from_args(args)
        config: Any = None
        if provider is None and getattr(args, "local_cluster", "auto") == "no":
            # Manager(None, provider=None) would load the default kubeconfig instead
            raise ConfigError(
                "nothing to run: --provider none with --local-cluster no leaves no cluster "
                "(give a provider, or a local cluster)"
            )
        local = wants_local_cluster(args, provider)
        options = _manager_options(args, options, local)
        if local:
            from mcruntime.cluster import Cluster

            config = Cluster.from_kubeconfig(args.kubeconfig, context=args.context)
        return Manager(config, provider=provider, options=options)
    except (MCRuntimeError, ValueError) as exc:
        if parser is None:
            raise
        parser.error(str(exc))


def run(manager: Manager) -> int:
    """Run ``manager`` ([`Manager.run`][mcruntime.manager.Manager.run]) for a program's
    ``main``, and answer its exit status: ``sys.exit(cli.run(mgr))``.

    0 once it stopped as asked (SIGTERM, Ctrl-C, [`stop()`][mcruntime.manager.Manager.stop]).
    1 when it could not start (a bind address in use, a bad option), stopped itself (a
    runnable or the provider failed, the leader election was lost), or its stop left a
    reconcile or a runnable running past ``graceful_shutdown_timeout``
    ([`GracePeriodExceeded`][mcruntime.errors.GracePeriodExceeded]): one error line says why,
    as kubebuilder's ``problem running manager``; a runnable's traceback is the one the
    manager logged when it failed, not printed a second time. Any other error is raised.
    """
    from mcruntime.errors import MCRuntimeError

    try:
        manager.run()
    except Exception as exc:
        if exc is not manager.fatal_error and not isinstance(
            exc, MCRuntimeError | OSError | ValueError
        ):
            raise
        log.error("manager failed: %s; exiting with status 1", exc)
        return 1
    return 0


def setup_logging(level: str = "INFO") -> None:
    """Plain stdlib logging: time, level, logger, message (messages carry cluster names).

    It also makes ``sys.stdout`` line-buffered: a container's stdout is a pipe, which Python
    fills in blocks, so a reconciler's ``print()`` would reach ``kubectl logs`` only when the
    block fills or the program exits (and never, if it is killed), unless ``PYTHONUNBUFFERED``
    is set.
    """
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO),
        format="%(asctime)s %(levelname)-7s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
    )
    stdout: Any = sys.stdout
    if stdout is not None and not getattr(stdout, "line_buffering", True):
        with contextlib.suppress(AttributeError, ValueError, OSError):
            stdout.reconfigure(line_buffering=True)
