"""``python -m mcruntime_kubeconfig create-secret ...``: write a kubeconfig Secret for a cluster."""

from __future__ import annotations

import argparse
import sys
from typing import Any

import yaml

from mcruntime.errors import MCRuntimeError
from mcruntime_kubeconfig._provider import (
    DEFAULT_KEY,
    DEFAULT_LABEL,
    DEFAULT_LABEL_VALUE,
    DEFAULT_NAMESPACE,
)
from mcruntime_kubeconfig._secret import (
    DEFAULT_CREATE_TIMEOUT,
    DEFAULT_RULES,
    DEFAULT_SERVICE_ACCOUNT,
    DEFAULT_TOKEN_DURATION,
    DEFAULT_TOKEN_TIMEOUT,
    create_kubeconfig_secret,
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m mcruntime_kubeconfig")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser(
        "create-secret",
        help="create a ServiceAccount, RBAC and token in a cluster and store its kubeconfig "
        "in a labelled Secret of the management cluster",
    )
    p.add_argument(
        "--kubeconfig",
        help="kubeconfig holding the target cluster (default: $KUBECONFIG or ~/.kube/config)",
    )
    p.add_argument(
        "--context", "-c", help="context of the target cluster (default: current-context)"
    )
    p.add_argument(
        "--name", help="name of the Secret, and so of the cluster (default: the context name)"
    )
    p.add_argument(
        "--namespace",
        "-n",
        default=DEFAULT_NAMESPACE,
        help=f"namespace of the Secret and the ServiceAccount (default: {DEFAULT_NAMESPACE})",
    )
    p.add_argument(
        "--management-kubeconfig",
        help="kubeconfig of the management cluster (default: $KUBECONFIG or ~/.kube/config)",
    )
    p.add_argument(
        "--management-context", help="context of the management cluster (default: current-context)"
    )
    p.add_argument(
        "--service-account",
        "-a",
        default=DEFAULT_SERVICE_ACCOUNT,
        help=f"ServiceAccount in the target cluster (default: {DEFAULT_SERVICE_ACCOUNT})",
    )
    p.add_argument(
        "--role-type",
        "-t",
        choices=["clusterrole", "role"],
        default="clusterrole",
        help="create a ClusterRole or a Role (default: clusterrole)",
    )
    p.add_argument(
        "--rules-file",
        "-r",
        help="YAML file with 'rules:' for the role (default: get/list/watch configmaps)",
    )
    p.add_argument(
        "--skip-create-rbac", action="store_true", help="create no Role/ClusterRole and binding"
    )
    p.add_argument(
        "--label",
        default=DEFAULT_LABEL,
        help=f"label marking the Secret (default: {DEFAULT_LABEL})",
    )
    p.add_argument(
        "--label-value",
        default=DEFAULT_LABEL_VALUE,
        help=f"value of the label (default: {DEFAULT_LABEL_VALUE})",
    )
    p.add_argument(
        "--key", default=DEFAULT_KEY, help=f"data key of the kubeconfig (default: {DEFAULT_KEY})"
    )
    p.add_argument(
        "--token-duration",
        # the TokenRequest API refuses less than ten minutes
        type=_seconds(600, whole=True),
        default=DEFAULT_TOKEN_DURATION,
        help="requested token lifetime in seconds (default: one year)",
    )
    p.add_argument(
        "--token-timeout",
        type=_seconds(0),
        default=DEFAULT_TOKEN_TIMEOUT,
        help="seconds to wait for a service-account-token Secret to be filled in",
    )
    p.add_argument(
        "--no-verify", action="store_true", help="do not check that the new kubeconfig works"
    )
    p.add_argument(
        "--timeout",
        type=_seconds(0, above=True),
        default=DEFAULT_CREATE_TIMEOUT,
        help="seconds the whole command may take, every call to both clusters included "
        f"(default: {DEFAULT_CREATE_TIMEOUT:g})",
    )
    return parser


def _seconds(least: float, *, above: bool = False, whole: bool = False) -> Any:
    """An argparse type: a number of seconds of at least ``least`` (more than it, ``above``)."""

    def parse(text: str) -> float:
        try:
            value = int(text) if whole else float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
        if value < least or (above and value == least):
            bound = f"more than {least:g}" if above else f"at least {least:g}"
            raise argparse.ArgumentTypeError(f"{text} seconds: must be {bound}")
        return value

    return parse


def _rules(path: str | None) -> list[dict[str, Any]]:
    if path is None:
        return [dict(r) for r in DEFAULT_RULES]
    try:
        with open(path) as fh:
            doc = yaml.safe_load(fh)
    except (OSError, yaml.YAMLError) as exc:
        raise MCRuntimeError(f"rules file {path} cannot be read: {type(exc).__name__}") from None
    rules = doc.get("rules") if isinstance(doc, dict) else doc
    if not isinstance(rules, list) or not all(isinstance(r, dict) for r in rules):
        raise MCRuntimeError(f"rules file {path} has no list of rules under 'rules:'")
    return rules


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)

    def say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    try:
        result = create_kubeconfig_secret(
            kubeconfig=args.kubeconfig,
            context=args.context,
            name=args.name,
            namespace=args.namespace,
            management_kubeconfig=args.management_kubeconfig,
            management_context=args.management_context,
            service_account=args.service_account,
            role_type=args.role_type,
            rules=_rules(args.rules_file),
            create_rbac=not args.skip_create_rbac,
            label=args.label,
            label_value=args.label_value,
            key=args.key,
            token_duration=args.token_duration,
            token_timeout=args.token_timeout,
            verify=not args.no_verify,
            report=say,
            timeout=args.timeout,
        )
    except MCRuntimeError as exc:
        say(f"error: {exc}")
        return 1
    print(
        f"secret {result.namespace}/{result.name} created (credentials: {result.credentials}, rbac: {result.rbac})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
