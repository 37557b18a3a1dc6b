"""The pod subresources kube-apiserver hands on to the pod's kubelet: ``log``, ``exec``,
``attach`` and ``portforward``.

envtest runs no kubelet. It answers these as kube-apiserver 1.31 does up to the point
where it would connect to the node (``pkg/registry/core/pod/strategy.go``:
``LogLocation``, ``streamLocation``, ``PortForwardLocation``;
``pkg/registry/core/pod/rest/log.go``; ``pkg/kubelet/client/kubelet_client.go``), so
``kubectl logs``, ``exec``, ``attach``, ``cp`` and ``port-forward`` and a client's own
requests meet kube's answers instead of a bare 404:

- the options come from the query; an integer that does not parse is a 400 (the
  parameter codec's error);
- ``log``: ``tailLines`` below 0, ``limitBytes`` or ``sinceSeconds`` below 1, or both
  ``sinceSeconds`` and ``sinceTime``, are a 422 on ``PodLogOptions``
  (``ValidatePodLogOptions``);
- the pod must exist (404);
- ``log``, ``exec`` and ``attach``: a container named must be one of the pod's (its
  containers, init containers or ephemeral containers), and a pod of several
  containers needs one named (400);
- a pod not on a node: ``log`` answers ``204 No Content`` (kube-apiserver has no log to
  read, and ``kubectl logs`` prints nothing), the others a 400 (``pod p does not have a
  host assigned``);
- a pod on a node: the Node must exist (404) and have an address of a type kube-apiserver
  prefers (``--kubelet-preferred-address-types``; else a 500 naming the addresses it has).
  kube-apiserver would then connect to the kubelet at that address and the port the Node
  reports (10250 if none); envtest answers a 500 naming that URL and saying that no
  kubelet serves it.

``exec``, ``attach`` and ``portforward`` are admitted as a CONNECT of the subresource
whose object is the options (``PodExecOptions``...), before the pod is looked up, as
kube-apiserver's connect handler does: a webhook that refuses ``kubectl exec`` can be
tested on envtest.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl

from mcruntime.envtest._status import StatusError
from mcruntime.envtest._storage import ObjectStore

__all__ = ["CONNECTED", "SUBRESOURCES", "answer", "connect_options"]

#: each subresource: the kind discovery names, its verbs, and the kubelet's path
SUBRESOURCES: dict[str, tuple[str, tuple[str, ...], str]] = {
    "attach": ("PodAttachOptions", ("create", "get"), "attach"),
    "exec": ("PodExecOptions", ("create", "get"), "exec"),
    "log": ("Pod", ("get",), "containerLogs"),
    "portforward": ("PodPortForwardOptions", ("create", "get"), "portForward"),
}
#: the subresources kube-apiserver connects (upgraded streams) and admits as CONNECT
CONNECTED = frozenset({"attach", "exec", "portforward"})
_PODS, _NODES = ("", "pods"), ("", "nodes")
#: kube-apiserver's default ``--kubelet-preferred-address-types``, in its order
_ADDRESS_TYPES = ("Hostname", "InternalDNS", "InternalIP", "ExternalDNS", "ExternalIP")
_KUBELET_PORT = 10250
#: what Go's strconv.ParseBool takes as true
_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_LOG_INTEGERS = ("sinceSeconds", "tailLines", "limitBytes")
_NOT_NEGATIVE = "must be greater than or equal to 0"
_POSITIVE = "must be greater than 0"


def _integer(value: str) -> int:
    """``value`` as the parameter codec parses it (strconv.ParseInt's error: 400)."""
    try:
        return int(value)
    except ValueError:
        raise StatusError.bad_request(
            f'strconv.ParseInt: parsing "{value}": invalid syntax'
        ) from None


def connect_options(sub: str, raw_query: str) -> dict[str, Any]:
    """The options object kube-apiserver decodes from the query of ``sub`` (v1, its
    ``omitempty`` fields left out): what admission webhooks see, and what the rest reads."""
    pairs = parse_qsl(raw_query, keep_blank_values=True)
    last = dict(pairs)
    kind = SUBRESOURCES[sub][0]
    out: dict[str, Any] = {"kind": "PodLogOptions" if sub == "log" else kind, "apiVersion": "v1"}
    if sub == "portforward":
        ports = [_integer(v) for k, v in pairs if k == "ports"]
        if ports:
            out["ports"] = ports
        return out
    if last.get("container"):
        out["container"] = last["container"]
    if sub == "log":
        for flag in ("follow", "previous", "timestamps"):
            if last.get(flag) in _TRUE:
                out[flag] = True
        for name in _LOG_INTEGERS:
            if name in last:
                out[name] = _integer(last[name])
        if last.get("sinceTime"):
            out["sinceTime"] = last["sinceTime"]
        return out
    for flag in ("stdin", "stdout", "stderr", "tty"):
        if last.get(flag) in _TRUE:
            out[flag] = True
    if sub == "exec":
        out["command"] = [v for k, v in pairs if k == "command"]
    return out


def _validate_log_options(name: str, opts: dict[str, Any]) -> None:
    """``ValidatePodLogOptions``: 422 on ``PodLogOptions`` listing every fault."""
    causes: list[tuple[str, str, str]] = []

    def invalid(field: str, why: str) -> None:
        causes.append(("FieldValueInvalid", field, f"{field}: Invalid value: {opts[field]}: {why}"))

    if opts.get("tailLines", 0) < 0:
        invalid("tailLines", _NOT_NEGATIVE)
    if opts.get("limitBytes", 1) < 1:
        invalid("limitBytes", _POSITIVE)
    if "sinceSeconds" in opts and "sinceTime" in opts:
        causes.append(
            (
                "FieldValueForbidden",
                "",
                ": Forbidden: at most one of `sinceTime` or `sinceSeconds` may be specified",
            )
        )
    elif opts.get("sinceSeconds", 1) < 1:
        invalid("sinceSeconds", _POSITIVE)
    if causes:
        raise StatusError.invalid_causes("PodLogOptions", name, "", causes)


def _names(containers: Any) -> list[str]:
    return [str(c.get("name")) for c in containers or () if isinstance(c, dict)]


def _container(pod: dict[str, Any], name: str, wanted: str) -> str:
    """The container ``wanted`` (or the only one) of pod ``name``, as ``validateContainer``
    finds it (400 otherwise)."""
    spec = pod.get("spec") or {}
    containers = _names(spec.get("containers"))
    if wanted:
        every = containers + _names(spec.get("initContainers"))
        every += _names(spec.get("ephemeralContainers"))
        if wanted not in every:
            raise StatusError.bad_request(f"container {wanted} is not valid for pod {name}")
        return wanted
    if len(containers) == 1:
        return containers[0]
    if not containers:
        raise StatusError.bad_request(f"a container name must be specified for pod {name}")
    message = f"a container name must be specified for pod {name}, choose one of: [{' '.join(containers)}]"
    init = _names(spec.get("initContainers"))
    if init:
        message += f" or one of the init containers: [{' '.join(init)}]"
    raise StatusError.bad_request(message)


def _kubelet(store: ObjectStore, node_name: str) -> str:
    """``host:port`` of the kubelet of Node ``node_name``, as ``NodeConnectionInfoGetter``
    finds it (404 for no such Node, 500 for a Node without a preferred address)."""
    node = store.get(_NODES, "", node_name)
    if node is None:
        raise StatusError.not_found("nodes", node_name, "", "nodes")
    status = node.get("status") or {}
    addresses = [a for a in status.get("addresses") or () if isinstance(a, dict)]
    for kind in _ADDRESS_TYPES:
        host = next((str(a.get("address")) for a in addresses if a.get("type") == kind), None)
        if host is not None:
            break
    else:
        known = " ".join(f"{{{a.get('type', '')} {a.get('address', '')}}}" for a in addresses)
        raise StatusError(500, "", f"no preferred addresses found; known addresses: [{known}]")
    endpoint = (status.get("daemonEndpoints") or {}).get("kubeletEndpoint") or {}
    port = endpoint.get("Port")
    if not isinstance(port, int) or port <= 0:
        port = _KUBELET_PORT
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def answer(store: ObjectStore, ns: str, name: str, sub: str, opts: dict[str, Any]) -> None:
    """Decide ``sub`` of pod ``name``: return for an empty log (204), else raise the error
    kube-apiserver answers (or, where it would reach the kubelet, envtest's 500)."""
    if sub == "log":
        _validate_log_options(name, opts)
    pod = store.get(_PODS, ns, name)
    if pod is None:
        raise StatusError.not_found("pods", name, "", "pods")
    path = f"{SUBRESOURCES[sub][2]}/{ns}/{name}"
    if sub != "portforward":
        path += "/" + _container(pod, name, str(opts.get("container") or ""))
    node_name = (pod.get("spec") or {}).get("nodeName")
    if not node_name:
        if sub == "log":  # no location: an empty answer
            return
        raise StatusError.bad_request(f"pod {name} does not have a host assigned")
    url = f"https://{_kubelet(store, str(node_name))}/{path}"
    if sub == "log":
        raise StatusError(500, "", f'Get "{url}": envtest runs no kubelet')
    raise StatusError(500, "", f"error dialing backend: envtest runs no kubelet at {url}")
