"""How a ClusterProfile becomes a kubeconfig: the labelled-Secret and the access-provider strategies.

A strategy returns a kubeconfig dict for a profile, or raises
`ConfigError` with a reason that names the
profile and never contains a token, key or kubeconfig content.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import yaml
from pydantic import BaseModel, ConfigDict, Field

from mcruntime.errors import ConfigError

__all__ = [
    "AccessProvider",
    "AccessProviderStrategy",
    "CredentialStrategy",
    "ExecConfig",
    "SECRET_DATA_KEY",
    "SECRET_LABEL_CONSUMER",
    "SECRET_LABEL_PROFILE",
    "SecretStrategy",
]

#: label on a kubeconfig Secret: the consumer it is meant for (as in the Go provider)
SECRET_LABEL_CONSUMER = "x-k8s.io/cluster-inventory-consumer"
#: label on a kubeconfig Secret: the name of its ClusterProfile (same namespace)
SECRET_LABEL_PROFILE = "x-k8s.io/cluster-profile"
#: data key of the kubeconfig in the Secret
SECRET_DATA_KEY = "Config"


class CredentialStrategy(Protocol):
    """Turns a ClusterProfile into a kubeconfig dict.

    ``kubeconfig(profile, secrets)`` must not block on the network: it reads
    the profile and the Secrets the provider's informer holds (``secrets``:
    every Secret the strategy selects, by ``(namespace, name)``).
    ``secret_selector`` is the label selector of those Secrets, or None when
    the strategy needs none. ``allow_exec`` and ``allow_files`` say whether the
    kubeconfigs it returns may run an exec plugin (or an auth-provider) in this
    process and name local files to read (see `Cluster.from_kubeconfig`); a
    strategy without them may do neither.
    """

    secret_selector: str | None
    allow_exec: bool
    allow_files: bool

    def kubeconfig(
        self, profile: dict[str, Any], secrets: Mapping[tuple[str, str], dict[str, Any]]
    ) -> dict[str, Any]: ...

    def profile_of_secret(self, secret: dict[str, Any]) -> str | None: ...


def _where(profile: dict[str, Any]) -> str:
    m = profile.get("metadata") or {}
    return f"ClusterProfile {m.get('namespace')}/{m.get('name')}"


class SecretStrategy:
    """A Secret in the profile's namespace labelled ``x-k8s.io/cluster-inventory-consumer=<consumer>``
    and ``x-k8s.io/cluster-profile=<profile name>`` holds the kubeconfig under data key ``Config``.

    Its kubeconfig may not run an exec plugin or an auth-provider in this process, nor
    name local files to read (anyone who can write such a Secret could otherwise run
    commands here, or send this pod's token away), unless ``allow_exec`` or
    ``allow_files`` says so.
    """

    def __init__(
        self,
        consumer: str,
        *,
        key: str = SECRET_DATA_KEY,
        allow_exec: bool = False,
        allow_files: bool = False,
    ) -> None:
        if not consumer:
            raise ConfigError("the secret strategy needs a consumer name")
        self.consumer = consumer
        self.key = key
        self.allow_exec = allow_exec
        self.allow_files = allow_files
        self.secret_selector: str | None = f"{SECRET_LABEL_CONSUMER}={consumer}"

    def profile_of_secret(self, secret: dict[str, Any]) -> str | None:
        labels = (secret.get("metadata") or {}).get("labels") or {}
        if labels.get(SECRET_LABEL_CONSUMER) != self.consumer:
            return None
        return labels.get(SECRET_LABEL_PROFILE) or None

    def kubeconfig(
        self, profile: dict[str, Any], secrets: Mapping[tuple[str, str], dict[str, Any]]
    ) -> dict[str, Any]:
        m = profile["metadata"]
        found = [
            s
            for (ns, _), s in sorted(secrets.items())
            if ns == m.get("namespace") and self.profile_of_secret(s) == m["name"]
        ]
        where = _where(profile)
        if not found:
            raise ConfigError(
                f"{where}: no Secret labelled {SECRET_LABEL_CONSUMER}={self.consumer},"
                f" {SECRET_LABEL_PROFILE}={m['name']} in its namespace"
            )
        if len(found) > 1:
            names = ", ".join(s["metadata"]["name"] for s in found)
            raise ConfigError(f"{where}: {len(found)} kubeconfig Secrets ({names}), expected one")
        secret = found[0]
        sname = f"Secret {m.get('namespace')}/{secret['metadata']['name']}"
        data = secret.get("data") or {}
        raw = data.get(self.key)
        if not raw:
            if self.key in data:
                raise ConfigError(f"{where}: {sname} data key {self.key!r} is empty")
            raise ConfigError(f"{where}: {sname} has no data key {self.key!r}")
        try:
            doc = yaml.safe_load(base64.b64decode(raw, validate=True))
        except (binascii.Error, ValueError, yaml.YAMLError):
            raise ConfigError(
                f"{where}: {sname} data key {self.key!r} is not a base64 YAML kubeconfig"
            ) from None
        if not isinstance(doc, dict):
            raise ConfigError(f"{where}: {sname} data key {self.key!r} is not a kubeconfig mapping")
        return doc


class ExecConfig(BaseModel):
    """An exec credential plugin, as in a kubeconfig's ``users[].user.exec``.

    ``provideClusterInfo: true`` passes the plugin the cluster it gets a token for, as
    ``spec.cluster`` of ``KUBERNETES_EXEC_INFO``: the profile's server, CA and, as
    ``spec.cluster.config``, the ``client.authentication.k8s.io/exec`` extension of the
    access provider's cluster (as the ClusterProfile API's ``access`` package does).
    """

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    command: str
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    api_version: str = Field("client.authentication.k8s.io/v1", alias="apiVersion")
    provide_cluster_info: bool = Field(False, alias="provideClusterInfo")


class AccessProvider(BaseModel):
    """An access provider the user trusts: its name in ``status.accessProviders`` and its plugin."""

    model_config = ConfigDict(extra="forbid")

    name: str
    exec: ExecConfig


class AccessProviderStrategy:
    """Server and CA from the profile's ``status.accessProviders`` (or the older
    ``status.credentialProviders``), token from the exec plugin configured for that provider."""

    secret_selector: str | None = None
    #: the plugins are this process's own configuration; the profile names none
    allow_exec = True
    allow_files = False

    def __init__(self, providers: Sequence[AccessProvider]) -> None:
        if not providers:
            raise ConfigError("the access-provider strategy needs at least one access provider")
        self.providers = {p.name: p for p in providers}

    def profile_of_secret(self, secret: dict[str, Any]) -> str | None:
        return None

    def kubeconfig(
        self, profile: dict[str, Any], secrets: Mapping[tuple[str, str], dict[str, Any]]
    ) -> dict[str, Any]:
        status = profile.get("status") or {}
        offered = list(status.get("accessProviders") or []) + list(
            status.get("credentialProviders") or []
        )
        for entry in offered:
            if not isinstance(entry, dict) or entry.get("name") not in self.providers:
                continue
            plugin = self.providers[entry["name"]]
            cluster = entry.get("cluster") or {}
            if not cluster.get("server"):
                raise ConfigError(
                    f"{_where(profile)}: access provider {entry['name']!r} names no cluster server"
                )
            kept = {
                k: cluster[k]
                for k in (
                    "server",
                    "certificate-authority-data",
                    "insecure-skip-tls-verify",
                    "tls-server-name",
                    "proxy-url",
                    # the plugin reads the client.authentication.k8s.io/exec one as
                    # spec.cluster.config when it asked for the cluster's info
                    "extensions",
                )
                if k in cluster
            }
            exec_cfg = {
                "apiVersion": plugin.exec.api_version,
                "command": plugin.exec.command,
                "args": list(plugin.exec.args),
                "env": [{"name": k, "value": v} for k, v in plugin.exec.env.items()],
                "interactiveMode": "Never",
                "provideClusterInfo": plugin.exec.provide_cluster_info,
            }
            return {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "profile", "cluster": kept}],
                "users": [{"name": "profile", "user": {"exec": exec_cfg}}],
                "contexts": [
                    {"name": "profile", "context": {"cluster": "profile", "user": "profile"}}
                ],
                "current-context": "profile",
            }
        names = sorted(str(e["name"]) for e in offered if isinstance(e, dict) and e.get("name"))
        raise ConfigError(
            f"{_where(profile)}: none of its access providers ({', '.join(names) or 'none'})"
            f" is configured here ({', '.join(sorted(self.providers))})"
        )
