"""Kubeconfig loading, in one place: files, dicts, ``$KUBECONFIG``, in-cluster config.

Every failure is a [`ConfigError`][mcruntime.errors.ConfigError] naming the file and
context; no message ever echoes the file's content (tokens, keys, certificates).
"""

from __future__ import annotations

import copy
import datetime
import hashlib
import hmac
import importlib.util
import json
import logging
import os
import secrets
import socket
import threading
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import quote, urlsplit
from urllib.request import getproxies

import urllib3
import yaml
from kubernetes.client import ApiClient, Configuration
from kubernetes.client.rest import should_bypass_proxies
from kubernetes.config import incluster_config
from kubernetes.config.kube_config import KubeConfigLoader

from mcruntime._credentials import CREDENTIAL_ATTRIBUTE, ExecCredential, OidcCredential, TokenFile
from mcruntime._credentials import attach as attach_credential
from mcruntime._keypair import (
    ClientCertificate,
    KeyProblem,
    check_ca,
    check_client_pair,
    dates_now,
)
from mcruntime._memfile import HELD_ATTRIBUTE, take_tls_data
from mcruntime._noproxy import direct as _direct
from mcruntime.errors import ConfigError

__all__ = [
    "load_config",
    "base_url",
    "not_a_kubeconfig",
    "impersonation_headers",
    "client_certificate_problem",
    "client_certificate_stamp",
    "credential_changes",
    "credentials_generation",
    "swap_credentials",
    "contexts",
    "new_api_client",
    "default_kubeconfig_path",
    "yaml_problem",
    "in_cluster_available",
    "in_cluster_config",
    "in_cluster_problem",
    "DEFAULT_POOL_SIZE",
    "KEEPALIVE_IDLE",
    "KEEPALIVE_INTERVAL",
    "KEEPALIVE_PROBES",
    "keepalive_socket_options",
]

log = logging.getLogger("mcruntime.cluster")

#: urllib3 pool size per cluster: one connection per informer watch plus request workers
DEFAULT_POOL_SIZE = 64
#: TCP keepalive of every connection to a cluster: probed once idle this long (seconds), then
#: every `KEEPALIVE_INTERVAL`, dropped after `KEEPALIVE_PROBES` unanswered probes. A
#: connection whose server vanished without closing it (a replica gone behind a load
#: balancer, a NAT entry lost) is dropped within 45 s of its last byte, as client-go's
#: HTTP/2 health check drops it (a ping after 30 s of silence, 15 s to answer): a watch on
#: it ends and its informer watches again, and an idle pooled one is not sent a call
KEEPALIVE_IDLE = 30
KEEPALIVE_INTERVAL = 5
KEEPALIVE_PROBES = 3
_DICT_SOURCE = "<kubeconfig dict>"
_PARSED_MAX = 8

# file text -> parsed document (read-only once cached); a provider loading every context
# of one big file parses it once instead of once per context
_parsed: dict[str, dict[str, Any]] = {}
#: a section's entries by name (unique: see `_check_unique`), each with its place in the list
_Index = dict[str, tuple[int, dict[str, Any]]]
#: section -> its index, built on first use
_Table = dict[str, _Index]
_SECTIONS = ("clusters", "contexts", "users")
# the last documents loaded (parsed files and dicts alike): id -> (document, its lists'
# identities and lengths when indexed, its table); holds them, so as many as files parsed
_tables: OrderedDict[int, tuple[dict[str, Any], tuple[tuple[int, int], ...], _Table]] = (
    OrderedDict()
)
_cache_lock = threading.Lock()


def _user_agent() -> str:
    from mcruntime import __version__

    return f"mcruntime/{__version__}"


def in_cluster_available() -> bool:
    """True when running in a pod (``KUBERNETES_SERVICE_HOST`` is set)."""
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST"))


def in_cluster_problem() -> str | None:
    """Why the in-cluster config cannot be loaded here, None when it can: not in a pod, or a
    pod whose service account token or CA is not mounted (``automountServiceAccountToken:
    false``), the checks of client-go's ``rest.InClusterConfig``."""
    if not in_cluster_available():
        return "KUBERNETES_SERVICE_HOST is not set (not in a pod)"
    for what, path in (
        ("service account token", incluster_config.SERVICE_TOKEN_FILENAME),
        ("CA certificate", incluster_config.SERVICE_CERT_FILENAME),
    ):
        if not os.path.isfile(path):
            return f"its {what} {path} does not exist"
    return None


#: what to do when there is no kubeconfig to load
_SET_KUBECONFIG = "set KUBECONFIG, or pass a kubeconfig"


def _no_home() -> str | None:
    """Why ``~/.kube/config`` names no file here, None when it does: HOME is not set and the
    user id has no entry in the password database (a container run as an arbitrary user id,
    as OpenShift runs them), so there is no home directory to expand ``~`` to."""
    if os.path.expanduser("~") != "~":
        return None
    getuid = getattr(os, "getuid", None)
    who = f"user id {getuid()}" if getuid is not None else "this user"
    return (
        f"~/.kube/config cannot be found: HOME is not set and {who} has no entry in the "
        "password database (a container run as an arbitrary user)"
    )


def default_kubeconfig_path() -> str:
    """``$KUBECONFIG`` (possibly a list joined by ``os.pathsep``) or ``~/.kube/config``.

    A `ConfigError` when KUBECONFIG is not set and there is no home directory (see `_no_home`).
    """
    env = os.environ.get("KUBECONFIG")
    if env:
        return env
    problem = _no_home()
    if problem is not None:
        raise ConfigError(
            f"no kubeconfig: KUBECONFIG is not set, and {problem}: {_SET_KUBECONFIG}",
            path="~/.kube/config",
        )
    return os.path.join(os.path.expanduser("~"), ".kube", "config")


def yaml_problem(exc: yaml.YAMLError) -> str:
    """``is not valid YAML (line 4, column 1)``: where the error is, never its text, which
    quotes the file (a token, a key)."""
    mark = getattr(exc, "problem_mark", None)
    where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
    return f"is not valid YAML{where}"


def _read_file(path: str, *, empty_ok: bool = False) -> dict[str, Any]:
    """The parsed kubeconfig ``path``; one with no document (empty, or only comments) is a
    `ConfigError`, or, with ``empty_ok``, a kubeconfig with nothing in it."""
    p = Path(os.path.expanduser(path))
    try:
        text = p.read_text()
    except FileNotFoundError:
        raise ConfigError(f"kubeconfig {path} does not exist", path=path) from None
    except OSError as exc:
        raise ConfigError(
            f"kubeconfig {path} cannot be read: {exc.strerror or type(exc).__name__}", path=path
        ) from None
    with _cache_lock:
        cached = _parsed.get(text)
    if cached is not None:
        return cached
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"kubeconfig {path} {yaml_problem(exc)}", path=path) from None
    if doc is None:
        if empty_ok:
            return {}
        raise ConfigError(f"kubeconfig {path} is empty", path=path)
    if not isinstance(doc, dict):
        raise ConfigError(
            f"kubeconfig {path} is not a kubeconfig (expected a mapping with clusters, "
            "contexts and users)",
            path=path,
        )
    for section in _SECTIONS:
        entries = doc.get(section)
        if isinstance(entries, list):
            _check_unique(entries, section, path)
    with _cache_lock:
        while len(_parsed) >= _PARSED_MAX:
            _parsed.pop(next(iter(_parsed)))
        _parsed[text] = doc
    return doc


def _read_paths(spec: str) -> tuple[dict[str, Any], str]:
    """Read one file, or merge a ``os.pathsep`` list (first definition of a name wins).

    A file whose name holds the separator (``prod:eu-1.yaml``, as the file provider finds
    in a folder) is that one file, as ``kubectl --kubeconfig`` reads it. An empty file of a
    list is skipped (``touch ~/.kube/config``), as client-go's ``clientcmd.Load`` reads no
    data as an empty config; one empty file alone is a `ConfigError` that says so.
    """
    paths = [p for p in spec.split(os.pathsep) if p]
    if len(paths) > 1 and os.path.isfile(os.path.expanduser(spec)):
        paths = [spec]
    if len(paths) <= 1:
        path = paths[0] if paths else spec
        return _read_file(path), path
    existing = [p for p in paths if os.path.exists(os.path.expanduser(p))]
    if not existing:
        raise ConfigError(f"none of the kubeconfig files {spec} exist", path=spec)
    merged: dict[str, Any] = {"clusters": [], "contexts": [], "users": []}
    docs = [(path, _read_file(path, empty_ok=True)) for path in existing]
    if not any(doc for _, doc in docs):
        raise ConfigError(f"the kubeconfig files {spec} are all empty", path=spec)
    for path, doc in docs:
        folder = _folder(path)
        for section in ("clusters", "contexts", "users"):
            names = {e.get("name") for e in merged[section] if isinstance(e, dict)}
            for entry in doc.get(section) or []:
                if isinstance(entry, dict) and entry.get("name") not in names:
                    merged[section].append(_paths_resolved(entry, section, folder))
        if doc.get("current-context") and not merged.get("current-context"):
            merged["current-context"] = doc["current-context"]
    return merged, existing[0]


def _folder(path: str) -> str:
    """The folder a kubeconfig file's relative paths are read from: the one the file is named
    in, not where a symbolic link to it leads (client-go does not follow it either)."""
    return os.path.dirname(os.path.abspath(os.path.expanduser(path)))


def _absolute(path: Any, folder: str) -> Any:
    """``path`` joined to ``folder`` when it is a relative path; anything else as it is."""
    if isinstance(path, str) and path and not os.path.isabs(path):
        return os.path.join(folder, path)
    return path


def _paths_resolved(entry: dict[str, Any], section: str, folder: str) -> dict[str, Any]:
    """``entry`` of ``section``, read from a file in ``folder``, with the relative paths of its
    local files made absolute against ``folder``: client-go resolves each file's paths before
    it merges a list of files, so an entry from the second file names files beside it, not
    beside the first. A copy when a path changed (parsed files are cached and shared)."""
    key = section[:-1]  # "cluster" or "user"; a context names no file
    fields = entry.get(key) if section != "contexts" else None
    if not isinstance(fields, dict):
        return entry
    new = dict(fields)
    for field in _CLUSTER_FILES if key == "cluster" else _USER_FILES:
        if field in fields:
            new[field] = _absolute(fields[field], folder)
    plugin = fields.get("exec")
    if isinstance(plugin, dict) and os.sep in str(plugin.get("command")):
        # a command with a path separator; a bare name is looked up in PATH
        new["exec"] = {**plugin, "command": _absolute(plugin["command"], folder)}
    provider = fields.get("auth-provider")
    config = provider.get("config") if isinstance(provider, dict) else None
    if isinstance(provider, dict) and isinstance(config, dict):
        ca = _absolute(config.get("idp-certificate-authority"), folder)
        if ca is not None:
            new["auth-provider"] = {
                **provider,
                "config": {**config, "idp-certificate-authority": ca},
            }
    return entry if new == fields else {**entry, key: new}


def _shape(doc: dict[str, Any]) -> tuple[tuple[int, int], ...]:
    out = []
    for section in _SECTIONS:
        entries = doc.get(section)
        out.append((id(entries), len(entries) if isinstance(entries, list) else -1))
    return tuple(out)


def _table(doc: dict[str, Any]) -> _Table:
    """Where ``doc``'s sections are indexed: once for as long as its section lists stay the
    same lists of the same lengths (a parsed file's always do)."""
    shape = _shape(doc)
    with _cache_lock:
        hit = _tables.get(id(doc))
        if hit is not None and hit[0] is doc and hit[1] == shape:
            _tables.move_to_end(id(doc))
            return hit[2]
        table: _Table = {}
        _tables[id(doc)] = (doc, shape, table)
        while len(_tables) > _PARSED_MAX:
            _tables.popitem(last=False)
        return table


class _Sections:
    """A kubeconfig document's clusters, contexts and users by name.

    A provider loads every context of one big document in turn: each section is indexed
    once, not once per load. An entry found in the index is checked where it was found
    (the same entry, at the same place, with the same name), and the section is indexed
    again if it is not there, or if a name is missing: entries replaced, renamed or moved
    since are seen. Only a duplicate name put before an entry that was indexed is not.
    """

    __slots__ = ("doc", "source", "_table")

    def __init__(self, doc: dict[str, Any], source: str) -> None:
        self.doc = doc
        self.source = source
        self._table = _table(doc)

    def _index(self, section: str) -> _Index:
        index = self._table.get(section)
        if index is None:
            index = self._table[section] = _index(self.doc, section, self.source)
        return index

    def get(self, section: str, name: str) -> dict[str, Any] | None:
        """The entry ``name`` of ``section``, or None."""
        hit = self._index(section).get(name)
        if hit is not None:
            place, entry = hit
            entries = self.doc.get(section)
            if (
                isinstance(entries, list)
                and place < len(entries)
                and entries[place] is entry
                and entry.get("name") == name
            ):
                return hit[1]  # (``entry``, narrowed to Any by the ``is``)
        index = self._table[section] = _index(self.doc, section, self.source)
        hit = index.get(name)
        return hit[1] if hit is not None else None

    def names(self, section: str) -> list[str]:
        """Every name in ``section``, in order (indexed afresh: a dict may have changed)."""
        index = self._table[section] = _index(self.doc, section, self.source)
        return list(index)


def _index(doc: dict[str, Any], section: str, source: str) -> _Index:
    entries = doc.get(section) or []
    if not isinstance(entries, list):
        raise ConfigError(f"kubeconfig {source}: {section} must be a list", path=source)
    out: _Index = {}
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            raise ConfigError(
                f"kubeconfig {source}: entry {i} of {section} has no name", path=source
            )
        if entry["name"] in out:
            _check_unique(entries, section, source)
        out[entry["name"]] = (i, entry)
    return out


def _check_unique(entries: list[Any], section: str, source: str) -> None:
    """Refuse two entries of one ``section`` with the same name, as kubectl refuses the file:
    client-go's conversion of a kubeconfig's named lists (clientcmd/api/v1/conversion.go)
    fails with "duplicate name ... in list", whichever context is loaded. Only the name is
    said (client-go's message prints both entries, tokens and keys included)."""
    seen: dict[str, int] = {}
    for i, entry in enumerate(entries):
        name = entry.get("name") if isinstance(entry, dict) else None
        if not isinstance(name, str):
            continue
        if name in seen:
            raise ConfigError(
                f"kubeconfig {source}: entries {seen[name]} and {i} of {section} are both "
                f"named {name!r}; kubectl refuses such a file (duplicate name in list): "
                "remove or rename one",
                path=source,
            )
        seen[name] = i


def _context_names(doc: dict[str, Any], source: str) -> list[str]:
    return _Sections(doc, source).names("contexts")


def _secrets(doc: Any) -> Iterator[str]:
    """Every string leaf under users/clusters (what must never appear in a message)."""

    def walk(node: Any) -> Iterator[str]:
        if isinstance(node, dict):
            for v in node.values():
                yield from walk(v)
        elif isinstance(node, list):
            for v in node:
                yield from walk(v)
        elif isinstance(node, str) and len(node) >= 4:
            yield node

    for section in ("users", "clusters"):
        for entry in doc.get(section) or []:
            if isinstance(entry, dict):
                yield from walk({k: v for k, v in entry.items() if k != "name"})


def _redact(text: str, doc: dict[str, Any]) -> str:
    """First line of a loader message with every config value masked (tokens, keys, commands)."""
    text = text.strip().split("\n", 1)[0]
    if text.startswith("exec: process returned"):
        text = text.split(".", 1)[0]
    for secret in sorted(set(_secrets(doc)), key=len, reverse=True):
        text = text.replace(secret, "***")
    return text[:200]


class _Chosen(NamedTuple):
    """A context and the entries it names, checked."""

    name: str
    context: dict[str, Any]
    cluster: dict[str, Any]
    user: dict[str, Any] | None


def _choose_context(sections: _Sections, context: str | None) -> _Chosen:
    """Validate ``context`` (default: current-context) against the file: its entry, and
    the cluster and user it names."""
    doc, source = sections.doc, sections.source
    if context is None:
        current = doc.get("current-context")
        if not current:
            raise ConfigError(
                f"kubeconfig {source} sets no current-context and none was given; "
                f"available contexts: {_available(sections)}",
                path=source,
            )
        context = str(current)
    entry = sections.get("contexts", context)
    if entry is None:
        raise ConfigError(
            f"context {context!r} not found in kubeconfig {source}; "
            f"available contexts: {_available(sections)}",
            path=source,
            context=context,
        )
    ctx = entry.get("context")
    if not isinstance(ctx, dict):
        raise ConfigError(
            f"context {context!r} in kubeconfig {source} has no cluster/user",
            path=source,
            context=context,
        )
    cluster_name = ctx.get("cluster")
    cluster = _referred(sections, context, "cluster", cluster_name)
    server = cluster.get("cluster")
    if not isinstance(server, dict) or not server.get("server"):
        raise ConfigError(
            f"cluster {cluster_name!r} in kubeconfig {source} has no server",
            path=source,
            context=context,
        )
    user_name = ctx.get("user")
    user = None if user_name is None else _referred(sections, context, "user", user_name)
    url = _server_url(cluster, (user or {}).get("user"), context, source)
    if url != server["server"]:
        cluster = {**cluster, "cluster": {**server, "server": url}}
    return _Chosen(context, entry, cluster, user)


def _where(cluster: dict[str, Any], context: str, source: str) -> str:
    return f"cluster {cluster.get('name')!r} of context {context!r} in kubeconfig {source}"


def _server_url(entry: dict[str, Any], user: Any, context: str, source: str) -> str:
    """The cluster's ``server`` as a URL, read as client-go reads it (``DefaultServerURL``):
    without a scheme it is ``https://`` when the cluster has a CA or skips verification or
    the user has a client certificate, else ``http://``, and it is then a host and port
    alone; a URL's path is a prefix (a proxy in front of the server). One that is no URL is
    a `ConfigError` at load, never quoting it (it may hold a password), where the
    ``kubernetes`` client reached ``:80`` or raised a bare ``ValueError``."""
    cluster, where = entry["cluster"], _where(entry, context, source)
    server = cluster["server"]
    try:
        parts = urlsplit(server) if isinstance(server, str) else None
    except ValueError:  # said by `_url_problem`
        parts = None
    if parts is not None and (not parts.scheme or not parts.netloc):
        tls = any(
            cluster.get(k) for k in ("certificate-authority", "certificate-authority-data")
        ) or (cluster.get("insecure-skip-tls-verify") is True)
        if isinstance(user, dict):
            tls = tls or any(user.get(k) for k in ("client-certificate", "client-certificate-data"))
        server = ("https://" if tls else "http://") + server
        if urlsplit(server).path not in ("", "/"):
            raise ConfigError(
                f"{where}: its server is neither a URL nor a host:port pair, as kubectl requires",
                path=source,
                context=context,
            )
    why = _url_problem(server, ("http", "https"), "https or http")
    if why is not None:
        raise ConfigError(f"{where}: its server {why}", path=source, context=context)
    return base_url(str(server))


def base_url(url: str) -> str:
    """A server's ``url`` without its query and fragment, as client-go's RESTClient takes
    it (rest/client.go ``NewRESTClient``): they are no part of any request's URL, and were
    glued before each request's path (a 404 for every call), into urllib3's DEBUG lines
    too (a query may carry a token)."""
    parts = urlsplit(url)
    if not parts.query and not parts.fragment and "?" not in url and "#" not in url:
        return url
    return parts._replace(query="", fragment="").geturl()


def _url_problem(url: Any, schemes: tuple[str, ...], allowed: str) -> str | None:
    """Why ``url`` is not a URL of one of ``schemes`` naming a host, or None; its text is
    never echoed (it could hold credentials)."""
    try:
        parts = urlsplit(url) if isinstance(url, str) else None
        _ = parts and parts.port  # a port that is no number, or out of range, raises
    except ValueError:
        return "cannot be parsed (its host or port): check its brackets and port"
    if parts is None:
        return f"is not a URL but a {type(url).__name__}"
    if parts.scheme.lower() not in schemes:
        return (
            f"has the scheme {parts.scheme!r}" if parts.scheme else "has no scheme"
        ) + f": it must be {allowed}, as for kubectl"
    if not parts.hostname:
        return "names no host"
    return None


def _referred(sections: _Sections, context: str, kind: str, name: Any) -> dict[str, Any]:
    """The ``kind`` entry (``"cluster"`` or ``"user"``) that ``context`` names."""
    entry = sections.get(f"{kind}s", name) if isinstance(name, str) else None
    if entry is None:
        raise ConfigError(
            f"context {context!r} in kubeconfig {sections.source} refers to {kind} {name!r}, "
            "which is not defined",
            path=sections.source,
            context=context,
        )
    return entry


def _available(sections: _Sections) -> str:
    names = sections.names("contexts")
    return ", ".join(names) if names else "none"


def _only(chosen: _Chosen) -> dict[str, Any]:
    """A copy of just the chosen context, its cluster and user: the loader scans its lists,
    and may write tokens back."""
    only: dict[str, Any] = {
        "current-context": chosen.name,
        "contexts": [chosen.context],
        "clusters": [chosen.cluster],
        "users": [chosen.user] if chosen.user is not None else [],
    }
    return copy.deepcopy(only)


def _configuration() -> tuple[Configuration, dict[str, str]]:
    """An empty `Configuration` and the proxy settings of the environment, read once.

    `Configuration()` reads them itself, then again each time ``host`` is
    assigned: when the loader sets it, and on every request when a credential
    expires (the refresh hook sets ``host`` again). Each read decodes the whole
    environment (~75 us here, more in a pod with many service variables).
    `_settle_proxy` picks the proxy once ``host`` is known.
    """
    proxies = getproxies()
    return Configuration(proxy="", no_proxy=proxies.get("no") or ""), proxies


def _settle_proxy(cfg: Configuration, proxies: dict[str, str]) -> None:
    """The environment's proxy for ``cfg.host``'s scheme, unless the kubeconfig named one
    (``proxy-url``), as ``Configuration`` picks it; none when Go's rules reach the host
    directly (`_direct`).

    The choice is made here, whole: ``cfg.no_proxy`` is emptied, so the ``kubernetes``
    client's own reading of ``NO_PROXY`` (not Go's) does not undo it. A ``proxy-url`` is
    used for every host, loopback too, ``NO_PROXY`` unread, as client-go's
    ``http.ProxyURL`` (clientcmd/client_config.go) uses it.

    A ``socks5://`` proxy is asked for the server by name, as client-go asks it (urllib3's
    ``socks5h``): urllib3 would resolve the name here, and a cluster whose name only the
    network behind the proxy knows (a bastion's ``ssh -D``) was unreachable.
    """
    if not cfg.proxy:
        proxy = proxies.get(urlsplit(cfg.host).scheme) or proxies.get("all")
        cfg.proxy = None if not proxy or _direct(cfg.host, cfg.no_proxy or "") else proxy
    cfg.no_proxy = None
    if cfg.proxy and cfg.proxy[:9].lower() == "socks5://":
        cfg.proxy = "socks5h://" + cfg.proxy[9:]


#: the schemes of a ``proxy-url`` client-go accepts (and ``socks5h``, which means the same)
_PROXY_SCHEMES = ("http", "https", "socks5", "socks5h")


def _check_proxy_url(chosen: _Chosen, source: str) -> None:
    """Refuse a ``proxy-url`` client-go refuses: kubectl cannot load it, and the ``kubernetes``
    client failed at the first call (an ``ftp://`` proxy, with no cluster named) or spoke
    another protocol than the one written (``socks4://``). Never echoes its credentials."""
    cluster = chosen.cluster.get("cluster") or {}
    proxy = cluster.get("proxy-url")
    if proxy is None or proxy == "":
        return
    where = _where(chosen.cluster, chosen.name, source)
    why = _url_problem(proxy, _PROXY_SCHEMES, "http, https or socks5")
    if why is not None:
        raise ConfigError(f"{where}: its proxy-url {why}", path=source, context=chosen.name)


#: the attribute of a ``Configuration`` that carries its client certificate's dates and file
_CLIENT_CERTIFICATE_VALIDITY = "mcruntime_client_certificate_validity"


def client_certificate_problem(cfg: Configuration) -> str | None:
    """What is wrong with the kubeconfig's client certificate now (expired, not valid yet), or
    None. kube-apiserver answers such a certificate with a bare 401 (and some servers reset
    the handshake); kubectl says no more than "Unauthorized" or "EOF"."""
    found = getattr(cfg, _CLIENT_CERTIFICATE_VALIDITY, None)
    if found is None:
        return None
    now = datetime.datetime.now(datetime.UTC)
    not_before, not_after = found.not_before, found.not_after
    if not not_before <= now <= not_after:
        # a file may hold a renewed certificate by now (new connections present it)
        not_before, not_after = dates_now(found)
    if now > not_after:
        return f"the kubeconfig's client certificate expired at {not_after:%Y-%m-%dT%H:%M:%SZ}"
    if now < not_before:
        return (
            "the kubeconfig's client certificate is not valid until "
            f"{not_before:%Y-%m-%dT%H:%M:%SZ} (is this machine's clock right?)"
        )
    return None


def client_certificate_stamp(cfg: Configuration) -> tuple[int, int, int] | None:
    """The modification time, size and inode of the file of the kubeconfig's client
    certificate, or None (no such file, or its data is in the kubeconfig): what changes
    when the certificate is renewed on disk."""
    found = getattr(cfg, _CLIENT_CERTIFICATE_VALIDITY, None)
    if found is None or found.path is None:
        return None
    try:
        st = os.stat(found.path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size, st.st_ino


#: the attribute of a ``Configuration`` that carries its kubeconfig user's impersonation
_IMPERSONATE = "mcruntime_impersonate"


def impersonation_headers(cfg: Configuration) -> tuple[tuple[str, str], ...]:
    """The ``Impersonate-*`` headers every request of ``cfg`` sends (its kubeconfig user's
    ``as``, ``as-groups``, ``as-uid`` and ``as-user-extra``; none for most users)."""
    return tuple(getattr(cfg, _IMPERSONATE, ()))


def _impersonation(chosen: _Chosen, source: str) -> list[tuple[str, str]]:
    """The ``Impersonate-*`` headers the chosen context's user asks for, as client-go sends them.

    The ``kubernetes`` loader ignores these fields: a kubeconfig that impersonates a user
    with fewer rights would otherwise act with the full rights of its credentials.
    """
    if chosen.user is None:
        return []
    context, user_name = chosen.name, chosen.user["name"]
    user = chosen.user.get("user") or {}
    name, groups = user.get("as") or "", user.get("as-groups") or []
    uid, extra = user.get("as-uid") or "", user.get("as-user-extra") or {}
    where = f"user {user_name!r} of context {context!r} in kubeconfig {source}"
    if (
        not isinstance(name, str)
        or not isinstance(uid, str)
        or not isinstance(groups, list)
        or not all(isinstance(g, str) for g in groups)
        or not isinstance(extra, dict)
        or not all(
            isinstance(v, list) and all(isinstance(x, str) for x in v) for v in extra.values()
        )
    ):
        raise ConfigError(
            f"{where}: as and as-uid must be strings, as-groups a list of strings, "
            "as-user-extra a mapping to lists of strings",
            path=source,
            context=context,
        )
    if not name:
        if groups or uid or extra:
            raise ConfigError(
                f"{where} sets as-groups, as-uid or as-user-extra without as (the user to "
                "impersonate)",
                path=source,
                context=context,
            )
        return []
    headers = [("Impersonate-User", name)]
    headers += [("Impersonate-Group", g) for g in groups]
    if uid:
        headers.append(("Impersonate-Uid", uid))
    for key, values in extra.items():
        headers += [(f"Impersonate-Extra-{quote(str(key), safe='')}", v) for v in values]
    return headers


# -- credentials rotated in place ----------------------------------------------------------

#: a kubeconfig user's credential fields, by what a log line calls them; every other field of
#: the user (its impersonation: ``as``, ``as-groups``, ``as-uid``, ``as-user-extra``) and every
#: field of the cluster (server, CA, proxy, TLS server name, insecure flag) says what the
#: cluster is or how it is reached
CREDENTIAL_FIELDS: dict[str, tuple[str, ...]] = {
    "its token": ("token",),
    "its token file": ("tokenFile",),
    "its client certificate": (
        "client-certificate",
        "client-certificate-data",
        "client-key",
        "client-key-data",
    ),
    "its exec plugin": ("exec",),
    "its auth-provider": ("auth-provider",),
    "its username and password": ("username", "password"),
}
_CREDENTIAL_KEYS = frozenset(k for keys in CREDENTIAL_FIELDS.values() for k in keys)
#: the attribute of a ``Configuration`` loaded from a kubeconfig that tells its credentials
#: apart from the rest (`_Parts`)
_PARTS = "mcruntime_kubeconfig_parts"
#: the attribute counting the credentials a ``Configuration`` took in place (`swap_credentials`)
_GENERATION = "mcruntime_credentials_generation"
#: the attribute holding the memory files of the credentials taken before the last ones: a
#: connection being made as they were replaced may still name them
_HELD_BEFORE = "mcruntime_memory_files_before"
#: the attributes of a ``Configuration`` that carry its credentials (the ``kubernetes``
#: loader's, and mcruntime's: an exec plugin, token file or oidc refresher, the client
#: certificate's dates, the memory files its certificate and key are read from)
_CREDENTIAL_ATTRIBUTES = (
    "api_key",
    "api_key_prefix",
    "username",
    "password",
    "cert_file",
    "key_file",
    "refresh_api_key_hook",
    CREDENTIAL_ATTRIBUTE,
    _CLIENT_CERTIFICATE_VALIDITY,
    HELD_ATTRIBUTE,
    _PARTS,
)
#: held while a ``Configuration`` takes new credentials (`swap_credentials`)
_swap_lock = threading.Lock()
#: the key of this process's digests of credentials: a digest says whether two are the same,
#: and cannot be tested against guesses outside this process
_DIGEST_KEY = secrets.token_bytes(32)


class _Parts(NamedTuple):
    """Digests of what a kubeconfig's context says: the cluster and how it is reached, and
    each of its user's credentials (never the values)."""

    reached: bytes
    credentials: tuple[tuple[str, bytes], ...]


def _digest(value: Any) -> bytes:
    text = json.dumps(value, sort_keys=True, default=repr, separators=(",", ":"))
    return hmac.new(_DIGEST_KEY, text.encode(), hashlib.sha256).digest()


def _parts(chosen: _Chosen) -> _Parts:
    cluster = chosen.cluster.get("cluster") or {}
    user = _user_fields(chosen)
    reached = _digest(
        {"cluster": cluster, "user": {k: v for k, v in user.items() if k not in _CREDENTIAL_KEYS}}
    )
    credentials = tuple(
        (words, _digest([user.get(k) for k in keys]))
        for words, keys in CREDENTIAL_FIELDS.items()
        if any(k in user for k in keys)
    )
    return _Parts(reached, credentials)


def credential_changes(old: Configuration, new: Configuration) -> list[str] | None:
    """What differs between the credentials of ``old`` and ``new``, in words (``["its
    token"]``; empty when nothing does), when they differ in nothing else: the same
    cluster (server, CA, proxy, TLS server name, insecure flag) reached as the same user
    (impersonation). None when something else differs, or when either was not loaded from
    a kubeconfig (built in code, in-cluster): that cannot be told."""
    a, b = getattr(old, _PARTS, None), getattr(new, _PARTS, None)
    if not isinstance(a, _Parts) or not isinstance(b, _Parts) or a.reached != b.reached:
        return None
    before, after = dict(a.credentials), dict(b.credentials)
    return [words for words in CREDENTIAL_FIELDS if before.get(words) != after.get(words)]


def credentials_generation(cfg: Configuration) -> int:
    """How many times ``cfg`` took new credentials in place (`swap_credentials`): a client
    that built its connections from ``cfg`` builds them again when this changed."""
    return int(getattr(cfg, _GENERATION, 0))


def swap_credentials(into: Configuration, source: Configuration) -> list[str] | None:
    """Make ``into`` carry ``source``'s credentials, if they are all that differs (see
    `credential_changes`); what changed, in words (empty: nothing, ``into`` is left as it
    is), or None (nothing taken). Every client of ``into`` uses them from its next request
    on (see `credentials_generation`)."""
    changes = credential_changes(into, source)
    if not changes:
        return changes
    with _swap_lock:
        setattr(into, _HELD_BEFORE, getattr(into, HELD_ATTRIBUTE, None))
        for name in _CREDENTIAL_ATTRIBUTES:
            value = getattr(source, name, None)
            setattr(into, name, dict(value) if isinstance(value, dict) else value)
        # last: a client that sees the new generation reads the new credentials
        setattr(into, _GENERATION, credentials_generation(into) + 1)
    return changes


#: a user's fields that read a local file, and a cluster's
_USER_FILES = ("tokenFile", "client-certificate", "client-key")
_CLUSTER_FILES = ("certificate-authority",)
#: an ``auth-provider``'s ``config`` fields that read a local file (oidc's; the others,
#: gcp's ``cmd-path``, run a command and are refused with ``allow_exec`` off, and at load)
_PROVIDER_FILES = ("idp-certificate-authority",)


def _check_allowed(chosen: _Chosen, source: str, allow_exec: bool, allow_files: bool) -> None:
    """Refuse what a kubeconfig from an untrusted place (a Secret anyone with write access
    to it controls) must not do in this process: run a command, use the process's own
    cloud credentials (an ``auth-provider``), or read a local file, such as the pod's
    service account token, and send it to the server the kubeconfig names."""
    user = _user_fields(chosen)
    where = _user_where(chosen, source)
    if not allow_exec:
        found = user.get("exec")
        if found is not None:
            command = found.get("command") if isinstance(found, dict) else None
            name = os.path.basename(command) if isinstance(command, str) else "?"
            raise ConfigError(
                f"{where} runs the exec plugin {name!r}, and this kubeconfig may not run "
                "commands (allow_exec is off)",
                path=source,
                context=chosen.name,
            )
        provider = user.get("auth-provider")
        kind = provider.get("name") if isinstance(provider, dict) else "?"
        if provider is not None and kind != "oidc":
            # gcp and azure use this process's own cloud credentials; oidc only the
            # kubeconfig's (mcruntime refreshes it, see `mcruntime._credentials`)
            raise ConfigError(
                f"{where} uses the auth-provider {kind!r}, and this kubeconfig may not use "
                "auth-provider plugins other than oidc (allow_exec is off)",
                path=source,
                context=chosen.name,
            )
    if not allow_files:
        cluster = chosen.cluster.get("cluster") or {}
        provider = user.get("auth-provider")
        config = provider.get("config") if isinstance(provider, dict) else None
        for entry, fields, what in (
            (user, _USER_FILES, where),
            (cluster, _CLUSTER_FILES, _where(chosen.cluster, chosen.name, source)),
            # oidc, allowed with allow_exec off, reads its issuer's CA from a file (before
            # any request: what a refused path's error said told whether it exists, is a CA)
            (
                config if isinstance(config, dict) else {},
                _PROVIDER_FILES,
                f"the auth-provider of {where}",
            ),
        ):
            for field in fields:
                if entry.get(field):
                    raise ConfigError(
                        f"{what} reads the local file {entry[field]!r} ({field}), and this "
                        f"kubeconfig may not read this process's files (allow_files is off; "
                        f"carry the content in {_DATA_FIELD.get(field, field)})",
                        path=source,
                        context=chosen.name,
                    )


def _check_insecure(chosen: _Chosen, source: str) -> None:
    """Read ``insecure-skip-tls-verify`` as client-go does: a boolean, and never beside a CA.

    The ``kubernetes`` loader turns verification off for any value that is not false, so a
    quoted ``"false"`` (YAML's string, not its boolean) skipped the server's certificate
    check; kubectl cannot load such a file. A CA beside the flag is refused as kubectl
    refuses it: whoever wrote the CA meant the certificate to be checked.
    """
    cluster = chosen.cluster.get("cluster") or {}
    insecure = cluster.get("insecure-skip-tls-verify")
    if insecure is None:
        return
    where = (
        f"cluster {chosen.cluster.get('name')!r} of context {chosen.name!r} in kubeconfig {source}"
    )
    if not isinstance(insecure, bool):
        raise ConfigError(
            f"{where}: insecure-skip-tls-verify must be true or false (a boolean, unquoted), "
            f"not a {type(insecure).__name__}",
            path=source,
            context=chosen.name,
        )
    if insecure and (
        cluster.get("certificate-authority") or cluster.get("certificate-authority-data")
    ):
        raise ConfigError(
            f"{where} sets insecure-skip-tls-verify beside a certificate-authority: specifying "
            "a root certificates file with the insecure flag is not allowed (kubectl refuses "
            "it too); remove one of them",
            path=source,
            context=chosen.name,
        )


def _check_file_and_data(chosen: _Chosen, source: str) -> None:
    """Refuse a file field beside its ``-data`` field, as client-go's validation refuses it
    (tools/clientcmd/validation.go: "certificate-authority-data and certificate-authority
    are both specified", "client-cert-data and client-cert ...", "client-key-data and
    client-key ..." for a user with a client certificate): the data silently won, and a
    wrong one failed as if the only CA or key were wrong."""
    cluster = chosen.cluster.get("cluster") or {}
    user = _user_fields(chosen)
    pairs = [(cluster, "certificate-authority", _where(chosen.cluster, chosen.name, source))]
    if user.get("client-certificate") or user.get("client-certificate-data"):
        where = _user_where(chosen, source)
        pairs += [(user, "client-certificate", where), (user, "client-key", where)]
    for entry, field, where in pairs:
        if entry.get(field) and entry.get(f"{field}-data"):
            raise ConfigError(
                f"{where} sets both {field} and {field}-data: kubectl refuses it too "
                f"({field}-data would override); keep one",
                path=source,
                context=chosen.name,
            )


def _check_one_method(chosen: _Chosen, source: str) -> None:
    """Refuse a ``token`` beside a ``username`` or ``password``, as client-go's validation
    refuses it (tools/clientcmd/validation.go, validateAuthInfo: "more than one
    authentication method found for %v; found [token basicAuth], only one is allowed"):
    the token silently won. Never quotes them."""
    user = _user_fields(chosen)
    if user.get("token") and (user.get("username") or user.get("password")):
        raise ConfigError(
            f"{_user_where(chosen, source)} sets both a token and a username/password: more "
            "than one authentication method, which kubectl refuses too; keep one",
            path=source,
            context=chosen.name,
        )


def _check_client_key(chosen: _Chosen, source: str) -> None:
    """A client certificate needs its key, as client-go's validation says: without one ssl
    cannot load the certificate, and every connection failed as a bare "TLS handshake
    failed", retried as if the server were unreachable."""
    user = _user_fields(chosen)
    if (user.get("client-certificate") or user.get("client-certificate-data")) and not (
        user.get("client-key") or user.get("client-key-data")
    ):
        raise ConfigError(
            f"{_user_where(chosen, source)} has a client certificate and no key: set "
            "client-key-data or client-key beside client-certificate(-data)",
            path=source,
            context=chosen.name,
        )


def _token_problem(token: str) -> str | None:
    """Why ``token`` cannot be sent in an ``Authorization`` header, None when it can; never
    quotes it. A line break or another control character is refused as Go's net/http refuses
    it (kubectl fails every call), a character outside latin-1 as Python's http.client cannot
    encode it."""
    if any(c in "\r\n" for c in token):
        return "contains a line break (a YAML block scalar `|` keeps the final one: use `|-`)"
    if any((ord(c) < 0x20 and c != "\t") or ord(c) == 0x7F for c in token):
        return "contains a control character"
    try:
        token.encode("latin-1")
    except UnicodeEncodeError:
        return "contains a character outside latin-1, which an HTTP header cannot carry"
    return None


def _check_token(chosen: _Chosen, source: str) -> None:
    """Refuse a ``token`` that is not a string (kubectl cannot load it, the ``kubernetes``
    loader sent its Python repr) or cannot be sent in a header (every call failed, reported
    as the connection's fault); never quotes it."""
    token = _user_fields(chosen).get("token")
    if token is None or token == "":
        return
    if not isinstance(token, str):
        kind = {bool: "a boolean", int: "a number", float: "a number", list: "a list"}.get(
            type(token), "a mapping" if isinstance(token, dict) else type(token).__name__
        )
        raise ConfigError(
            f"{_user_where(chosen, source)}: its token is {kind}, not a string",
            path=source,
            context=chosen.name,
        )
    why = _token_problem(token)
    if why is not None:
        raise ConfigError(
            f"{_user_where(chosen, source)}: its token {why}", path=source, context=chosen.name
        )


def _check_tls_files(chosen: _Chosen, source: str, base: str) -> ClientCertificate | None:
    """The cluster's CA and the user's client certificate and key read and checked as client-go
    checks them when kubectl loads the file (see `mcruntime._keypair`); the client
    certificate's dates and file, if there is one."""
    cluster = chosen.cluster.get("cluster") or {}
    try:
        if not cluster.get("insecure-skip-tls-verify"):
            check_ca(cluster, base)
    except KeyProblem as exc:
        raise ConfigError(
            f"cluster {chosen.cluster.get('name')!r} of context {chosen.name!r} in kubeconfig "
            f"{source}: its {exc}",
            path=source,
            context=chosen.name,
        ) from None
    try:
        return check_client_pair(_user_fields(chosen), base)
    except KeyProblem as exc:
        raise ConfigError(
            f"{_user_where(chosen, source)}: its {exc}", path=source, context=chosen.name
        ) from None


#: the field that carries a file field's content in the kubeconfig itself
_DATA_FIELD = {
    "tokenFile": "token",
    "client-certificate": "client-certificate-data",
    "client-key": "client-key-data",
    "certificate-authority": "certificate-authority-data",
    "idp-certificate-authority": "idp-certificate-authority-data",
}


def _from_doc(
    doc: dict[str, Any],
    source: str,
    context: str | None,
    base: str,
    *,
    allow_exec: bool = True,
    allow_files: bool = True,
) -> Configuration:
    chosen = _choose_context(_Sections(doc, source), context)
    _check_allowed(chosen, source, allow_exec, allow_files)
    _check_auth_provider(chosen, source)
    _check_insecure(chosen, source)
    _check_file_and_data(chosen, source)
    _check_one_method(chosen, source)
    _check_client_key(chosen, source)
    _check_token(chosen, source)
    _check_proxy_url(chosen, source)
    validity = _check_tls_files(chosen, source, base)
    ctx = chosen.name
    impersonate = _impersonation(chosen, source)
    cfg, proxies = _configuration()
    only = _only(chosen)
    credential = (
        _oidc_credential(chosen, only, source, base)
        or _exec_credential(chosen, only, source, base)
        or _token_file(chosen, only, source, base)
    )
    tls = take_tls_data(only)  # the loader would write certificates and keys to the temp dir
    try:
        loader = KubeConfigLoader(config_dict=only, active_context=ctx, config_base_path=base)
        loader.load_and_set(cfg)
    except Exception as exc:
        raise ConfigError(
            f"cannot load context {ctx!r} from kubeconfig {source}: "
            f"{_redact(str(exc), doc) or type(exc).__name__}",
            path=source,
            context=ctx,
        ) from None
    tls.apply(cfg)
    _settle_proxy(cfg, proxies)
    if impersonate:
        setattr(cfg, _IMPERSONATE, tuple(impersonate))
    if validity is not None:
        setattr(cfg, _CLIENT_CERTIFICATE_VALIDITY, validity)
    if "expiry" not in vars(loader):
        # Without an expiring credential the loader's refresh hook re-applies the same settings
        # (and rescans the proxy environment) on every request: ~70 us per request for nothing.
        cfg.refresh_api_key_hook = None
    if credential is not None:
        attach_credential(cfg, credential)
    setattr(cfg, _PARTS, _parts(chosen))
    return cfg


def _exec_credential(
    chosen: _Chosen, only: dict[str, Any], source: str, base: str
) -> ExecCredential | None:
    """The chosen user's exec plugin, taken out of ``only`` (its copy for the loader), which
    would run it at once and at every expired request with no deadline (see
    `mcruntime._credentials`). None when the user has none, or has a token the loader uses
    before it."""
    user = _user_fields(chosen)
    if "exec" not in user:
        return None
    if user.get("token") or user.get("tokenFile") or user.get("auth-provider"):
        return None  # the loader takes these first and never runs the plugin
    config = user["exec"]
    where = _user_where(chosen, source)
    if not isinstance(config, dict):
        raise ConfigError(f"{where}: exec is not a mapping", path=source, context=chosen.name)
    credential = ExecCredential(
        config,
        where=where,
        base_dir=base,
        cluster=chosen.cluster,
        source=source,
        context=chosen.name,
    )
    del only["users"][0]["user"]["exec"]
    return credential


#: the auth-providers client-go removed (1.26), and the credential plugin kubectl names
_REMOVED_PROVIDERS = {
    "gcp": 'the "gke-gcloud-auth-plugin" exec credential plugin',
    "azure": "the https://github.com/Azure/kubelogin exec credential plugin",
}


def _check_auth_provider(chosen: _Chosen, source: str) -> None:
    """Refuse an ``auth-provider`` other than oidc, as client-go and kubectl do since 1.26:
    gcp and azure were removed (the ``kubernetes`` loader would fetch their tokens with no
    deadline), and any other name has no provider."""
    provider = _user_fields(chosen).get("auth-provider")
    if provider is None:
        return
    name = provider.get("name") if isinstance(provider, dict) else None
    if name == "oidc":
        return
    where = _user_where(chosen, source)
    instead = _REMOVED_PROVIDERS.get(name) if isinstance(name, str) else None
    why = (
        f"uses the {name} auth-provider, which client-go removed in 1.26 (kubectl refuses it "
        f"too): use {instead} instead"
        if instead
        else f"names the auth-provider {name!r}, which has no provider (only oidc has one)"
    )
    raise ConfigError(f"{where} {why}", path=source, context=chosen.name)


def _oidc_credential(
    chosen: _Chosen, only: dict[str, Any], source: str, base: str
) -> OidcCredential | None:
    """The chosen user's ``auth-provider: oidc``, taken out of ``only``: the loader would
    refresh its id-token with no deadline, without checking the issuer's certificate when
    the kubeconfig names no CA for it (see `mcruntime._credentials`). The loader takes an
    auth-provider before any token or plugin, and so does this."""
    provider = _user_fields(chosen).get("auth-provider")
    if not isinstance(provider, dict) or provider.get("name") != "oidc":
        return None
    credential = OidcCredential(
        provider,
        where=_user_where(chosen, source),
        base_dir=base,
        source=source,
        context=chosen.name,
    )
    del only["users"][0]["user"]["auth-provider"]
    return credential


def _token_file(chosen: _Chosen, only: dict[str, Any], source: str, base: str) -> TokenFile | None:
    """The chosen user's ``tokenFile``, taken out of ``only``: the loader reads it once, so a
    rotated token would be refused until the process restarts (see `mcruntime._credentials`).
    None when the user has none.

    Beside a ``token`` the file wins, as in client-go: ``rest.Config.BearerTokenFile``'s
    "last successfully read value takes precedence over BearerToken" (client_config.go
    keeps both, transport's ``NewBearerAuthWithRefreshRoundTripper`` sends the file's
    token); the ``token`` is sent only while the file has never been read, so a file that
    cannot be read at load leaves the ``token`` in use rather than failing the load."""
    user = _user_fields(chosen)
    if user.get("auth-provider"):
        return None
    path = user.get("tokenFile")
    if not path or not isinstance(path, str):
        return None
    where = _user_where(chosen, source)
    try:
        found = TokenFile(
            str(Path(base, path)) if base else path,
            where=where,
            source=source,
            context=chosen.name,
        )
    except ConfigError as exc:
        if not user.get("token"):
            raise
        log.warning("%s; sending its token instead, as client-go does", exc)
        return None
    del only["users"][0]["user"]["tokenFile"]
    only["users"][0]["user"].pop("token", None)
    return found


def _user_fields(chosen: _Chosen) -> dict[str, Any]:
    """The chosen user's ``user`` mapping (its credentials); empty when there is none."""
    fields = chosen.user.get("user") if chosen.user is not None else None
    return fields if isinstance(fields, dict) else {}


def _user_where(chosen: _Chosen, source: str) -> str:
    name = chosen.user["name"] if chosen.user is not None else None
    return f"user {name!r} of context {chosen.name!r} in kubeconfig {source}"


def in_cluster_config() -> Configuration:
    """The in-cluster config (service account token and CA of the pod).

    The kubelet rotates the token in its file: it is read again when a minute old and
    at once after a 401, as for a kubeconfig's ``tokenFile``.
    """
    cfg, proxies = _configuration()
    token_path = incluster_config.SERVICE_TOKEN_FILENAME
    problem = in_cluster_problem()
    if problem is not None:
        raise ConfigError(f"cannot load the in-cluster config: {problem}", path=token_path)
    try:
        incluster_config.load_incluster_config(client_configuration=cfg, try_refresh_token=False)
    except Exception as exc:
        raise ConfigError(
            f"cannot load the in-cluster config ({type(exc).__name__}: {str(exc)[:200]})",
            path=token_path,
        ) from None
    _settle_proxy(cfg, proxies)
    attach_credential(
        cfg,
        TokenFile(token_path, where="the in-cluster config", source=token_path, context=""),
    )
    return cfg


def not_a_kubeconfig(value: object, wanted: str) -> TypeError:
    """The error for ``value`` given where ``wanted`` (a kubeconfig) was: its type, and, for
    what has a ``kubeconfig()`` of its own (an envtest ``APIServer`` or ``Fleet``), or is that
    method not called, what to pass instead."""
    if getattr(value, "__name__", "") == "kubeconfig" and callable(value):
        hint = ": call it, kubeconfig(), for the kubeconfig dict"
    elif callable(getattr(value, "kubeconfig", None)):
        hint = ": pass its kubeconfig() (a dict)"
    else:
        hint = ""
    return TypeError(f"expected {wanted}, got {type(value).__name__}{hint}")


def load_config(
    *,
    path: str | os.PathLike[str] | dict[str, Any] | None = None,
    config_dict: dict[str, Any] | None = None,
    context: str | None = None,
    allow_exec: bool = True,
    allow_files: bool = True,
) -> Configuration:
    """A ``kubernetes`` ``Configuration`` for one context of a kubeconfig.

    With neither ``path`` nor ``config_dict``: ``$KUBECONFIG`` if set, else the
    in-cluster config when running in a pod, else ``~/.kube/config`` (also in a pod
    whose service account token is not mounted), the order of controller-runtime's
    ``GetConfig`` and kubectl's.
    ``context`` defaults to the kubeconfig's current-context.

    For a kubeconfig from a place less trusted than the process (a Secret), turn off
    ``allow_exec`` (its user may not run an ``exec`` plugin or an ``auth-provider``)
    and ``allow_files`` (its user and cluster may not name local files, such as the
    pod's own service account token, to read and send): such a kubeconfig is then a
    `ConfigError` naming the field.
    """
    try:
        return _load_config(path, config_dict, context, allow_exec, allow_files)
    except ConfigError as exc:
        # raised again from here, without the loading's frames: their locals hold the
        # kubeconfig read (every user's token and key), and error trackers record the
        # locals of a traceback's frames (Sentry's include_local_variables, pytest -l)
        del path, config_dict  # (a dict passed in: the caller's own frame holds it)
        raise exc.with_traceback(None) from None


def _load_config(
    path: str | os.PathLike[str] | dict[str, Any] | None,
    config_dict: dict[str, Any] | None,
    context: str | None,
    allow_exec: bool,
    allow_files: bool,
) -> Configuration:
    if isinstance(path, dict):
        path, config_dict = None, path
    if config_dict is not None:
        if not isinstance(config_dict, dict):
            raise ConfigError(f"{_DICT_SOURCE} is not a mapping", path=_DICT_SOURCE)
        return _from_doc(
            config_dict,
            _DICT_SOURCE,
            context,
            "",
            allow_exec=allow_exec,
            allow_files=allow_files,
        )
    if path is not None and not isinstance(path, (str, os.PathLike)):
        raise not_a_kubeconfig(path, "a kubeconfig path or dict")
    if path is None:
        if not os.environ.get("KUBECONFIG") and in_cluster_available() and context is None:
            # controller-runtime's loadConfig (pkg/client/config/config.go): "If the
            # recommended kubeconfig env variable is set, or there is no in-cluster config,
            # try the default recommended locations"
            try:
                return in_cluster_config()
            except ConfigError as exc:
                no_home = _no_home()
                if no_home is not None:
                    raise ConfigError(
                        f"no kubeconfig: {exc}, and {no_home}: {_SET_KUBECONFIG}", path=exc.path
                    ) from None
                home = default_kubeconfig_path()
                if not Path(home).exists():
                    raise ConfigError(
                        f"no kubeconfig: {exc}, and {home} does not exist", path=exc.path
                    ) from None
                log.info("%s: loading %s instead", exc, home)
        spec = default_kubeconfig_path()
    else:
        spec = os.fspath(path)
    doc, first = _read_paths(spec)
    return _from_doc(
        doc,
        spec,
        context,
        _folder(first),
        allow_exec=allow_exec,
        allow_files=allow_files,
    )


def _check_socks(configuration: Configuration) -> None:
    """A SOCKS ``proxy-url`` needs PySocks (urllib3's SOCKS support): without it, a clear
    `ConfigError` instead of the ``ModuleNotFoundError`` the ``kubernetes`` client raises."""
    proxy = configuration.proxy
    if not proxy or not urlsplit(proxy).scheme.startswith("socks"):
        return
    if should_bypass_proxies(configuration.host, configuration.no_proxy or ""):
        return
    if importlib.util.find_spec("socks") is None:
        where = urlsplit(proxy).netloc.rpartition("@")[2]  # never its credentials
        raise ConfigError(
            f"the SOCKS proxy {where} of cluster "
            f"{configuration.host} needs PySocks: pip install 'mcruntime[socks]'"
        )


def contexts(path_or_dict: str | os.PathLike[str] | dict[str, Any] | None = None) -> list[str]:
    """Names of the contexts of a kubeconfig file (or list of files) or dict."""
    if isinstance(path_or_dict, dict):
        return _context_names(path_or_dict, _DICT_SOURCE)
    spec = default_kubeconfig_path() if path_or_dict is None else os.fspath(path_or_dict)
    doc, _ = _read_paths(spec)
    return _context_names(doc, spec)


def keepalive_socket_options() -> list[tuple[int, int, int]]:
    """urllib3's default socket options (no Nagle) with TCP keepalive on, probing as
    `KEEPALIVE_IDLE`, `KEEPALIVE_INTERVAL` and `KEEPALIVE_PROBES` say (the options a
    platform lacks left out: macOS names the idle time ``TCP_KEEPALIVE``)."""
    options: list[tuple[int, int, int]] = list(
        urllib3.connection.HTTPConnection.default_socket_options
    )
    options.append((socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1))
    idle = getattr(socket, "TCP_KEEPIDLE", getattr(socket, "TCP_KEEPALIVE", None))
    for option, value in (
        (idle, KEEPALIVE_IDLE),
        (getattr(socket, "TCP_KEEPINTVL", None), KEEPALIVE_INTERVAL),
        (getattr(socket, "TCP_KEEPCNT", None), KEEPALIVE_PROBES),
    ):
        if option is not None:
            options.append((socket.IPPROTO_TCP, option, value))
    return options


def new_api_client(configuration: Configuration) -> ApiClient:
    """An ``ApiClient`` whose connection pool fits informers plus workers.

    Raises the configuration's ``connection_pool_maxsize`` to
    `DEFAULT_POOL_SIZE` when it is lower, turns urllib3's own retries off, and TCP
    keepalive on (`keepalive_socket_options`) unless the configuration sets its own
    ``socket_options``.
    """
    _check_socks(configuration)
    if configuration.socket_options is None:
        # HTTP/1.1 has no ping: without keepalive a watch on a connection that died without
        # a FIN or RST stays silent until its timeoutSeconds + 60 s (6 to 11 minutes)
        configuration.socket_options = keepalive_socket_options()
    if (configuration.connection_pool_maxsize or 0) < DEFAULT_POOL_SIZE:
        configuration.connection_pool_maxsize = DEFAULT_POOL_SIZE
    # mcruntime owns its retries (within each call's deadline): none hidden in urllib3 (as a
    # Retry: ``False`` would be converted by each pool, with a debug line naming no cluster)
    configuration.retries = urllib3.Retry(total=False, redirect=0)
    client = ApiClient(configuration)
    client.user_agent = _user_agent()
    return client
