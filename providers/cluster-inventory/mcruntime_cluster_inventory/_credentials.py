"""How a ClusterProfile becomes a kubeconfig: the labelled-Secret and the access-provider strategies.

A strategy returns a kubeconfig dict for a profile, or raises
`ConfigError` with a reason that names the
profile and never contains a token, key or kubeconfig content.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Protocol

import yaml
from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator

from mcruntime.errors import ConfigError

__all__ = [
    "EXTENSION_ADDITIONAL_ARGS",
    "EXTENSION_ADDITIONAL_ENVS",
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
#: extension of an access provider's ``cluster``: arguments for the plugin (a list of strings)
EXTENSION_ADDITIONAL_ARGS = "clusterprofiles.multicluster.x-k8s.io/exec/additional-args"
#: extension of an access provider's ``cluster``: environment for the plugin (a string map)
EXTENSION_ADDITIONAL_ENVS = "clusterprofiles.multicluster.x-k8s.io/exec/additional-envs"


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

    ``env`` is a mapping, or a kubeconfig's list of ``{name, value}``. ``provideClusterInfo:
    true`` passes the plugin the cluster it gets a token for, as ``spec.cluster`` of
    ``KUBERNETES_EXEC_INFO``: the profile's server, CA and, as ``spec.cluster.config``, the
    ``client.authentication.k8s.io/exec`` extension of the access provider's cluster (as the
    ClusterProfile API's ``access`` package does). ``installHint`` is said when the command
    is missing; ``interactiveMode`` is accepted and, as in that package, the plugin is never
    interactive.
    """

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    command: str
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict, repr=False)  # values may be secrets
    api_version: str = Field("client.authentication.k8s.io/v1", alias="apiVersion")
    provide_cluster_info: bool = Field(False, alias="provideClusterInfo")
    install_hint: str | None = Field(None, alias="installHint")
    interactive_mode: Literal["Never", "IfAvailable", "Always"] | None = Field(
        None, alias="interactiveMode"
    )

    @field_validator("args", mode="before")
    @classmethod
    def _args(cls, v: Any) -> Any:
        return [] if v is None else v  # Go writes an empty list as null

    @field_validator("env", mode="before")
    @classmethod
    def _env(cls, v: Any) -> Any:
        return _env_mapping(v)


def _env_mapping(v: Any) -> Any:
    """A kubeconfig's ``env`` list (``[{name, value}]``) as a mapping; anything else as given."""
    if v is None:
        return {}
    if not isinstance(v, list):
        return v
    out: dict[str, Any] = {}
    for i, item in enumerate(v):
        if not isinstance(item, dict) or set(item) - {"name", "value"} or "name" not in item:
            raise ValueError(f"env[{i}] is not a {{name, value}} pair")
        out[item["name"]] = item.get("value", "")
    return out


class AccessProvider(BaseModel):
    """An access provider the user trusts: its name in ``status.accessProviders`` and its plugin.

    Written as in the ClusterProfile API's access-provider file
    (``{"providers": [{"name", "execConfig", ...}]}``, the Go consumers'
    ``--clusterprofile-provider-file``) too: ``execConfig`` is ``exec``. The two policies say
    what the profile itself may add to the plugin's run through its cluster's extensions
    ([`EXTENSION_ADDITIONAL_ARGS`][mcruntime_cluster_inventory.EXTENSION_ADDITIONAL_ARGS],
    [`EXTENSION_ADDITIONAL_ENVS`][mcruntime_cluster_inventory.EXTENSION_ADDITIONAL_ENVS]):
    nothing by default (``Ignore``); ``Append`` its arguments; ``AppendIfNotExists`` its
    variables the plugin's own ``env`` does not set, or ``Replace`` those too. Whoever
    writes ClusterProfile status then chooses part of a command run in this process.
    """

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    name: str
    exec: ExecConfig = Field(validation_alias=AliasChoices("exec", "execConfig"))
    profile_sourced_cli_args_policy: Literal["Append", "Ignore"] = Field(
        "Ignore", alias="profileSourcedCLIArgsPolicy"
    )
    profile_sourced_env_vars_policy: Literal["AppendIfNotExists", "Replace", "Ignore"] = Field(
        "Ignore", alias="profileSourcedEnvVarsPolicy"
    )


class AccessProviderStrategy:
    """Server and CA from the profile's ``status.accessProviders`` (or the older
    ``status.credentialProviders``), token from the exec plugin configured for that provider.

    The first of ``providers`` (in the order given) that the profile offers is used, as the
    ClusterProfile API's ``access`` package picks it: the consumer's preference, not the
    order the profile lists them in. An ``accessProviders`` entry replaces a
    ``credentialProviders`` one of the same name.
    """

    secret_selector: str | None = None
    #: the plugins are this process's own configuration; the profile names none
    allow_exec = True
    allow_files = False

    def __init__(self, providers: Sequence[AccessProvider]) -> None:
        if not providers:
            raise ConfigError("the access-provider strategy needs at least one access provider")
        self.providers: dict[str, AccessProvider] = {}
        for p in providers:
            self.providers.setdefault(p.name, p)  # the first of a name, as the Go package

    def profile_of_secret(self, secret: dict[str, Any]) -> str | None:
        return None

    def kubeconfig(
        self, profile: dict[str, Any], secrets: Mapping[tuple[str, str], dict[str, Any]]
    ) -> dict[str, Any]:
        status = profile.get("status") or {}
        offered: dict[str, dict[str, Any]] = {}
        for field in ("credentialProviders", "accessProviders"):  # the newer field wins
            for entry in status.get(field) or ():
                if isinstance(entry, dict) and isinstance(entry.get("name"), str):
                    offered[entry["name"]] = entry
        for name, plugin in self.providers.items():
            entry = offered.get(name)
            if entry is None:
                continue
            cluster = entry.get("cluster") or {}
            if not isinstance(cluster, dict) or not cluster.get("server"):
                raise ConfigError(
                    f"{_where(profile)}: access provider {name!r} names no cluster server"
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
            args, env = _profile_sourced(profile, name, plugin, cluster)
            exec_cfg: dict[str, Any] = {
                "apiVersion": plugin.exec.api_version,
                "command": plugin.exec.command,
                "args": args,
                "env": [{"name": k, "value": v} for k, v in env.items()],
                "interactiveMode": "Never",
                "provideClusterInfo": plugin.exec.provide_cluster_info,
            }
            if plugin.exec.install_hint:
                exec_cfg["installHint"] = plugin.exec.install_hint
            # named after the profile and the access provider: a failing plugin's error
            # says "of user '<access provider>' of context '<namespace>/<profile>'"
            meta = profile.get("metadata") or {}
            where = f"{meta.get('namespace')}/{meta.get('name')}"
            return {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": where, "cluster": kept}],
                "users": [{"name": name, "user": {"exec": exec_cfg}}],
                "contexts": [{"name": where, "context": {"cluster": where, "user": name}}],
                "current-context": where,
            }
        raise ConfigError(
            f"{_where(profile)}: none of its access providers ({', '.join(sorted(offered)) or 'none'})"
            f" is configured here ({', '.join(self.providers)})"
        )


def _extension(cluster: dict[str, Any], name: str) -> tuple[bool, Any]:
    """Whether ``cluster`` (a kubeconfig cluster, as in the profile) has extension ``name``,
    and its value."""
    for item in cluster.get("extensions") or ():
        if isinstance(item, dict) and item.get("name") == name:
            return True, item.get("extension")
    return False, None


def _profile_sourced(
    profile: dict[str, Any], name: str, plugin: AccessProvider, cluster: dict[str, Any]
) -> tuple[list[str], dict[str, str]]:
    """The plugin's arguments and environment, with what the profile adds as its policies
    allow (the Go ``access`` package's rules); a value of the wrong shape is a `ConfigError`
    that does not quote it."""
    args = list(plugin.exec.args)
    env = dict(plugin.exec.env)
    where = f"{_where(profile)}: access provider {name!r}: extension"
    if plugin.profile_sourced_cli_args_policy == "Append":
        found, value = _extension(cluster, EXTENSION_ADDITIONAL_ARGS)
        if found:
            if not isinstance(value, list) or not all(isinstance(a, str) for a in value):
                raise ConfigError(f"{where} {EXTENSION_ADDITIONAL_ARGS} is not a list of strings")
            args += value
    if plugin.profile_sourced_env_vars_policy != "Ignore":
        found, value = _extension(cluster, EXTENSION_ADDITIONAL_ENVS)
        if found:
            if not isinstance(value, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in value.items()
            ):
                raise ConfigError(
                    f"{where} {EXTENSION_ADDITIONAL_ENVS} is not a map of strings to strings"
                )
            if plugin.profile_sourced_env_vars_policy == "Replace":
                env = {**env, **value}
            else:  # AppendIfNotExists
                env = {**value, **env}
    return args, env
