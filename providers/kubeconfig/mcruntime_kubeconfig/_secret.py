"""Write a kubeconfig Secret for a cluster, the way Go's ``create-kubeconfig-secret.sh`` does.

In the target cluster: a ServiceAccount, RBAC for it (when the cluster serves
``rbac.authorization.k8s.io``) and a token (TokenRequest, else a
``kubernetes.io/service-account-token`` Secret, else the source credentials
with a warning). Then a minimal kubeconfig (server, CA, token) goes into a
labelled Secret in the management cluster. One deadline (``timeout=``) bounds all
of it together. Nothing here prints or logs a token, key or kubeconfig content.
"""

from __future__ import annotations

import base64
import contextlib
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from mcruntime.client import deadline, remaining
from mcruntime.cluster import Cluster
from mcruntime.errors import (
    AlreadyExists,
    APIError,
    ConfigError,
    DeadlineExceeded,
    MCRuntimeError,
    NotFound,
)
from mcruntime.plugins import dns_subdomain_problems, label_key_problems, label_value_problems
from mcruntime_kubeconfig._provider import (
    DEFAULT_KEY,
    DEFAULT_LABEL,
    DEFAULT_LABEL_VALUE,
    DEFAULT_NAMESPACE,
    MANAGEMENT_CLUSTER_NAME,
    _key_problem,
    _namespace_problem,
)

__all__ = [
    "DEFAULT_CREATE_TIMEOUT",
    "DEFAULT_RULES",
    "DEFAULT_SERVICE_ACCOUNT",
    "DEFAULT_TOKEN_DURATION",
    "DEFAULT_TOKEN_TIMEOUT",
    "CreatedSecret",
    "create_kubeconfig_secret",
]

#: the ServiceAccount created in the target cluster (Go script's default)
DEFAULT_SERVICE_ACCOUNT = "multicluster-kubeconfig-provider"
#: rules of the Role/ClusterRole when none are given (Go script's rules.yaml)
DEFAULT_RULES: tuple[dict[str, Any], ...] = (
    {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list", "get", "watch"]},
)
#: lifetime asked for in the TokenRequest (a year, like ``kubectl create token --duration=8760h``)
DEFAULT_TOKEN_DURATION = 8760 * 3600
#: how long to wait for a service-account-token Secret to be filled in
DEFAULT_TOKEN_TIMEOUT = 10.0
#: the deadline of a whole `create_kubeconfig_secret` (seconds): every call to both clusters
DEFAULT_CREATE_TIMEOUT = 60.0

RBAC_GROUP = "rbac.authorization.k8s.io"
TOKEN_SECRET_TYPE = "kubernetes.io/service-account-token"
_CLUSTER_KEYS = (
    "server",
    "certificate-authority-data",
    "insecure-skip-tls-verify",
    "tls-server-name",
    "proxy-url",
    "disable-compression",
)
_FILE_KEYS = {
    "certificate-authority": "certificate-authority-data",
    "client-certificate": "client-certificate-data",
    "client-key": "client-key-data",
}

Credentials = Literal["token-request", "service-account-token-secret", "source-credentials"]


@dataclass(frozen=True)
class CreatedSecret:
    """What [`create_kubeconfig_secret()`][mcruntime_kubeconfig.create_kubeconfig_secret] did (no credentials in here)."""

    namespace: str
    name: str
    service_account: str
    #: where the kubeconfig's credentials came from
    credentials: Credentials
    #: "clusterrole", "role", "skipped" or "not-served"
    rbac: str
    warnings: tuple[str, ...] = field(default=())


# -- reading the source kubeconfig ----------------------------------------------------


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        doc = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"kubeconfig {path} does not exist", path=str(path)) from None
    except OSError as exc:
        raise ConfigError(
            f"kubeconfig {path} cannot be read: {exc.strerror}", path=str(path)
        ) from None
    except yaml.YAMLError:
        raise ConfigError(f"kubeconfig {path} is not valid YAML", path=str(path)) from None
    if not isinstance(doc, dict):
        raise ConfigError(f"kubeconfig {path} is not a kubeconfig mapping", path=str(path))
    return doc


def _load_source(spec: str | None) -> tuple[dict[str, Any], str, dict[str, Path]]:
    """The merged kubeconfig of ``spec`` (first definition wins), its text, and each entry's base dir."""
    text = spec or os.environ.get("KUBECONFIG") or os.path.expanduser("~/.kube/config")
    paths = [Path(os.path.expanduser(p)) for p in text.split(os.pathsep) if p]
    merged: dict[str, Any] = {"clusters": [], "contexts": [], "users": []}
    bases: dict[str, Path] = {}
    existing = [p for p in paths if p.exists()] if len(paths) > 1 else paths
    if not existing:
        raise ConfigError(f"none of the kubeconfig files {text} exist", path=text)
    for path in existing:
        doc = _read_yaml(path)
        for section in ("clusters", "contexts", "users"):
            seen = {e.get("name") for e in merged[section]}
            for entry in doc.get(section) or []:
                if isinstance(entry, dict) and entry.get("name") not in seen:
                    merged[section].append(entry)
                    bases[f"{section}/{entry.get('name')}"] = path.resolve().parent
        if doc.get("current-context") and not merged.get("current-context"):
            merged["current-context"] = doc["current-context"]
    return merged, text, bases


def _entry(doc: dict[str, Any], section: str, name: str, source: str) -> dict[str, Any]:
    for e in doc.get(section) or []:
        if isinstance(e, dict) and e.get("name") == name:
            body = e.get(section[:-1])
            if isinstance(body, dict):
                return dict(body)
    known = (
        ", ".join(str(e.get("name")) for e in doc.get(section) or [] if isinstance(e, dict))
        or "none"
    )
    raise ConfigError(
        f"kubeconfig {source} defines no {section[:-1]} {name!r}; available {section}: {known}",
        path=source,
    )


def _flatten(entry: dict[str, Any], base: Path | None) -> dict[str, Any]:
    """Inline file references (CA, client cert/key, token file) as data, like ``--flatten``."""
    out = dict(entry)
    for file_key, data_key in _FILE_KEYS.items():
        ref = out.pop(file_key, None)
        if ref and not out.get(data_key):
            p = Path(os.path.expanduser(ref))
            if not p.is_absolute() and base is not None:
                p = base / p
            out[data_key] = base64.b64encode(_read(p, file_key)).decode()
    token_file = out.pop("tokenFile", None)
    if token_file:
        # the file wins over a token beside it, as in client-go (rest.Config.BearerTokenFile
        # "takes precedence over BearerToken"), and is read beside the kubeconfig when
        # relative (clientcmd resolves it as the other paths); the token only when the file
        # cannot be read, as client-go sends it
        p = Path(os.path.expanduser(token_file))
        if not p.is_absolute() and base is not None:
            p = base / p
        try:
            out["token"] = _read(p, "tokenFile").decode().strip()
        except ConfigError:
            if not out.get("token"):
                raise
    return out


def _read(path: Path, what: str) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise ConfigError(
            f"{what} file {path} cannot be read: {exc.strerror}", path=str(path)
        ) from None


# -- the target cluster ---------------------------------------------------------------


def _apply(cluster: Cluster, obj: dict[str, Any]) -> None:
    """Create ``obj``, or merge it into the existing object of that name."""
    try:
        cluster.client.create(obj)
    except AlreadyExists:
        meta = obj["metadata"]
        patch = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
        cluster.client.patch(
            f"{obj['apiVersion']}/{obj['kind']}", meta["name"], patch, meta.get("namespace")
        )


def _ensure_namespace(cluster: Cluster, namespace: str) -> bool:
    """Create ``namespace`` if missing; True when it was created."""
    try:
        cluster.api_reader.get("v1/Namespace", namespace)
        return False
    except NotFound:
        try:
            cluster.client.create(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
            )
        except AlreadyExists:
            return False
        return True


def _serves_group(cluster: Cluster, group: str) -> bool:
    doc = cluster.rest.request("GET", "/apis") or {}
    return any(g.get("name") == group for g in doc.get("groups") or ())


def _serves_token_request(cluster: Cluster) -> bool:
    doc = cluster.rest.request("GET", "/api/v1") or {}
    return any(r.get("name") == "serviceaccounts/token" for r in doc.get("resources") or ())


def _create_rbac(
    cluster: Cluster,
    role_type: str,
    name: str,
    namespace: str,
    sa: str,
    rules: Sequence[Mapping[str, Any]],
) -> None:
    kind = "ClusterRole" if role_type == "clusterrole" else "Role"
    meta: dict[str, Any] = {"name": name}
    if kind == "Role":
        meta["namespace"] = namespace
    _apply(
        cluster,
        {
            "apiVersion": f"{RBAC_GROUP}/v1",
            "kind": kind,
            "metadata": meta,
            "rules": [dict(r) for r in rules],
        },
    )
    _apply(
        cluster,
        {
            "apiVersion": f"{RBAC_GROUP}/v1",
            "kind": f"{kind}Binding",
            "metadata": {**meta, "name": f"{name}-binding"},
            "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": namespace}],
            "roleRef": {"kind": kind, "name": name, "apiGroup": RBAC_GROUP},
        },
    )


def _token_request(cluster: Cluster, namespace: str, sa: str, duration: int) -> str:
    path = f"/api/v1/namespaces/{namespace}/serviceaccounts/{sa}/token"
    body = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"expirationSeconds": duration},
    }
    doc = cluster.rest.request("POST", path, body=body) or {}
    token = (doc.get("status") or {}).get("token")
    if not token:
        raise MCRuntimeError(
            f"the TokenRequest for serviceaccount {namespace}/{sa} returned no token"
        )
    return str(token)


def _token_secret(cluster: Cluster, namespace: str, sa: str, timeout: float) -> str | None:
    """The token of a ``service-account-token`` Secret for ``sa``; None when no controller fills it."""
    name = f"{sa}-token"
    created = False
    try:
        cluster.client.create(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "type": TOKEN_SECRET_TYPE,
                "metadata": {
                    "name": name,
                    "namespace": namespace,
                    "annotations": {"kubernetes.io/service-account.name": sa},
                },
            }
        )
        created = True
    except AlreadyExists:
        pass
    left = remaining()  # the whole command's deadline, when it comes first
    until = time.monotonic() + (timeout if left is None else min(timeout, left))
    while True:
        secret = cluster.api_reader.get("v1/Secret", name, namespace)
        token = (secret.get("data") or {}).get("token")
        if token:
            return base64.b64decode(token).decode()
        if time.monotonic() >= until:
            break
        time.sleep(min(0.1, max(until - time.monotonic(), 0.0)))
    if created:
        with contextlib.suppress(NotFound):
            cluster.client.delete("v1/Secret", name, namespace)
    return None


def _bound(timeout: float | None, outer: float | None) -> str:
    """Which deadline bounds the whole command, as its error says it: ``timeout=`` or the
    caller's enclosing one (``outer``: the seconds it had left at the start), whichever is
    shorter."""
    if outer is not None and (timeout is None or outer < timeout):
        return f" (the caller's deadline: {outer:.3g}s left at the start)"
    return f" (timeout={timeout:g}s)" if timeout is not None else ""


def _failed(
    what: str, exc: MCRuntimeError, bound: str, secrets: Sequence[str] = ()
) -> MCRuntimeError:
    """``what`` failed with ``exc`` (said safely, ``secrets`` never); a `DeadlineExceeded`
    when it was the deadline of the whole command that ran out (its calls have no other),
    said by ``bound`` (see `_bound`)."""
    if isinstance(exc, DeadlineExceeded):
        return DeadlineExceeded(
            f"{what} failed: create_kubeconfig_secret did not finish in time{bound}: {exc}",
            cluster_name=exc.cluster_name,
            address=exc.address,
        )
    return MCRuntimeError(f"{what} failed: {_safe(exc, secrets)}")


def _safe(exc: BaseException, secrets: Sequence[str] = ()) -> str:
    """An API error as status, reason and the server's message, with ``secrets`` (the token,
    the credentials and the Secret's data sent) cut out of it: a webhook's or an admission
    message may echo what it was sent."""
    if isinstance(exc, APIError):
        text = f"HTTP {exc.status} {exc.reason or type(exc).__name__}"
        message = exc.message
        for secret in sorted({s for s in secrets if s}, key=len, reverse=True):
            message = message.replace(secret, "<redacted>")
        return f"{text}: {message}" if message else text
    if isinstance(exc, (ConfigError, MCRuntimeError)):
        return str(exc)
    return type(exc).__name__


def _credential_strings(value: Any) -> list[str]:
    """Every string in a kubeconfig ``user`` (its token, key, password, plugin arguments)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _credential_strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _credential_strings(v)]
    return []


def _check_names(
    *,
    name: str,
    defaulted: bool,
    namespace: str,
    service_account: str,
    label: str,
    label_value: str,
    key: str,
) -> None:
    """Refuse, before anything is written to either cluster, a name the API server would
    refuse half-way (an EKS context's ARN as the Secret's name: after the namespace and the
    ServiceAccount were made)."""
    problems: list[str] = []
    why = dns_subdomain_problems(name)
    if why:
        whence = " (the context's name; choose another with --name)" if defaulted else ""
        problems.append(f"Secret name {name!r}{whence} is not a valid name: {'; '.join(why)}")
    problem = _namespace_problem(namespace)
    if problem:
        problems.append(f"namespace {problem}")
    why = dns_subdomain_problems(service_account)
    if why:
        problems.append(
            f"service account name {service_account!r} is not a valid name: {'; '.join(why)}"
        )
    why = label_key_problems(label)
    if why:
        problems.append(f"label {label!r} is not a valid label key: {'; '.join(why)}")
    why = label_value_problems(label_value)
    if why:
        problems.append(f"label value {label_value!r} is not a valid label value: {'; '.join(why)}")
    problem = _key_problem(key)
    if problem:
        problems.append(f"key {problem}")
    if problems:
        raise ConfigError("create-secret: " + "; ".join(problems) + "; nothing was written")


def create_kubeconfig_secret(
    *,
    kubeconfig: str | None = None,
    context: str | None = None,
    name: str | None = None,
    namespace: str = DEFAULT_NAMESPACE,
    management_kubeconfig: str | None = None,
    management_context: str | None = None,
    service_account: str = DEFAULT_SERVICE_ACCOUNT,
    role_type: Literal["clusterrole", "role"] = "clusterrole",
    rules: Sequence[Mapping[str, Any]] = DEFAULT_RULES,
    create_rbac: bool = True,
    label: str = DEFAULT_LABEL,
    label_value: str = DEFAULT_LABEL_VALUE,
    key: str = DEFAULT_KEY,
    token_duration: int = DEFAULT_TOKEN_DURATION,
    token_timeout: float = DEFAULT_TOKEN_TIMEOUT,
    verify: bool = True,
    report: Callable[[str], None] | None = None,
    timeout: float | None = DEFAULT_CREATE_TIMEOUT,
) -> CreatedSecret:
    """Give the cluster of ``context`` (in ``kubeconfig``) a ServiceAccount and write its
    kubeconfig into Secret ``namespace/name`` of the management cluster.

    ``name`` defaults to the context name. ``management_kubeconfig`` defaults to
    ``$KUBECONFIG``, else ``~/.kube/config`` (not to ``kubeconfig``); it is loaded before
    anything is written to the target, so one that does not load changes nothing. Raises [`MCRuntimeError`][mcruntime.errors.MCRuntimeError]
    (never quoting credentials) when a step fails. ``report`` receives progress lines.
    ``timeout`` bounds every call to both clusters together, the wait for a token
    Secret (``token_timeout``) included (default `DEFAULT_CREATE_TIMEOUT`, 60 s; an
    enclosing [`deadline`][mcruntime.client.deadline] shortens it; None: no bound of its own);
    when it runs out, the step it ended raises
    [`DeadlineExceeded`][mcruntime.errors.DeadlineExceeded], naming it.
    """
    say = report or (lambda _line: None)
    warnings: list[str] = []

    def warn(text: str) -> None:
        warnings.append(text)
        say(f"WARNING: {text}")

    if role_type not in ("clusterrole", "role"):
        raise ValueError(f"role_type must be 'clusterrole' or 'role', not {role_type!r}")
    doc, source, bases = _load_source(kubeconfig)
    ctx = context or doc.get("current-context")
    if not ctx:
        raise ConfigError(
            f"kubeconfig {source} sets no current-context; name one with --context", path=source
        )
    defaulted = not name
    name = name or str(ctx)
    _check_names(
        name=name,
        defaulted=defaulted,
        namespace=namespace,
        service_account=service_account,
        label=label,
        label_value=label_value,
        key=key,
    )
    ctx_entry = _entry(doc, "contexts", str(ctx), source)
    cluster_ref, user_ref = ctx_entry.get("cluster"), ctx_entry.get("user")
    cluster_entry = _flatten(
        _entry(doc, "clusters", str(cluster_ref), source), bases.get(f"clusters/{cluster_ref}")
    )
    cluster_entry = {k: v for k, v in cluster_entry.items() if k in _CLUSTER_KEYS}

    target = Cluster.from_kubeconfig(kubeconfig, context=str(ctx), name=name)
    try:
        # loaded (not yet called) before anything is written to the target: a management
        # kubeconfig or context that does not load fails the command with nothing changed
        management = Cluster.from_kubeconfig(
            management_kubeconfig, context=management_context, name=MANAGEMENT_CLUSTER_NAME
        )
    except BaseException:
        target.stop()
        raise
    bound = _bound(timeout, remaining())
    with deadline(timeout):  # every call below, to both clusters, together
        try:
            step = "reading the target cluster's discovery"
            try:
                rbac_served = _serves_group(target, RBAC_GROUP)
                token_request = _serves_token_request(target)
                step = f"creating namespace {namespace} in the target cluster"
                if _ensure_namespace(target, namespace):
                    say(f"created namespace {namespace} in cluster {ctx}")
                step = f"creating serviceaccount {namespace}/{service_account}"
                _apply(
                    target,
                    {
                        "apiVersion": "v1",
                        "kind": "ServiceAccount",
                        "metadata": {"name": service_account, "namespace": namespace},
                    },
                )
                say(f"serviceaccount {namespace}/{service_account} ready in cluster {ctx}")
                if not create_rbac:
                    rbac = "skipped"
                elif not rbac_served:
                    rbac = "not-served"
                    warn(f"cluster {ctx} does not serve {RBAC_GROUP}: no Role/ClusterRole created")
                else:
                    step = f"creating the {role_type} {name}"
                    _create_rbac(target, role_type, name, namespace, service_account, rules)
                    rbac = role_type
                    say(f"{role_type} {name} and its binding ready in cluster {ctx}")
                credentials: Credentials
                user: dict[str, Any]
                token: str | None = None
                if token_request:
                    step = "requesting a service account token"
                    token = _token_request(target, namespace, service_account, token_duration)
                    credentials = "token-request"
                else:
                    step = "creating a service-account-token secret"
                    token = _token_secret(target, namespace, service_account, token_timeout)
                    credentials = "service-account-token-secret"
                if token is not None:
                    user_name = service_account
                    user = {"token": token}
                else:
                    credentials = "source-credentials"
                    user_name = str(user_ref or name)
                    user = _flatten(
                        _entry(doc, "users", user_name, source), bases.get(f"users/{user_name}")
                    )
                    warn(
                        f"cluster {ctx} issues no service account tokens (no TokenRequest API and no "
                        "token controller): the secret reuses the credentials of context "
                        f"{ctx!r}, with all their permissions"
                    )
                    if "exec" in user or "auth-provider" in user:
                        warn(
                            f"the credentials of context {ctx!r} come from a plugin: the provider "
                            "runs it only with its allow_exec option on"
                        )
            except MCRuntimeError as exc:
                raise _failed(f"{step} in cluster {ctx}", exc, bound) from None

            config = {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": name, "cluster": cluster_entry}],
                "users": [{"name": user_name, "user": user}],
                "contexts": [{"name": name, "context": {"cluster": name, "user": user_name}}],
                "current-context": name,
            }
            secrets = [*_credential_strings(user)]
            if verify:
                _verify(config, name, bound, secrets)
                say(f"verified: the new kubeconfig reaches cluster {ctx}")

            raw = yaml.safe_dump(config, sort_keys=False).encode()
            data = base64.b64encode(raw).decode()
            secrets += [data, raw.decode()]
            secret = {
                "apiVersion": "v1",
                "kind": "Secret",
                "type": "Opaque",
                "metadata": {"name": name, "namespace": namespace, "labels": {label: label_value}},
                "data": {key: data},
            }
            try:
                _ensure_namespace(management, namespace)
                _apply(management, secret)
            except MCRuntimeError as exc:
                raise _failed(
                    f"writing secret {namespace}/{name} to the management cluster",
                    exc,
                    bound,
                    secrets,
                ) from None
            say(
                f"secret {namespace}/{name} written to the management cluster (label {label}={label_value})"
            )
            return CreatedSecret(
                namespace, name, service_account, credentials, rbac, tuple(warnings)
            )
        finally:
            target.stop()
            management.stop()


def _verify(config: dict[str, Any], name: str, bound: str, secrets: Sequence[str]) -> None:
    cluster = Cluster.from_kubeconfig(config, name=name)
    try:
        cluster.rest.request("GET", "/version")
    except DeadlineExceeded as exc:
        raise _failed(f"checking the new kubeconfig for {name}", exc, bound) from None
    except MCRuntimeError as exc:
        raise MCRuntimeError(
            f"the new kubeconfig for {name} does not reach the cluster ({_safe(exc, secrets)}); "
            "check the service account and its permissions"
        ) from None
    finally:
        cluster.stop()
