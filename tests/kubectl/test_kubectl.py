"""The real kubectl against an HTTPS envtest server, with a token and with a client certificate.

Every test runs once per credential kind (the ``kubectl`` fixture) in a
namespace of its own; the server is shared by the module.
"""

from __future__ import annotations

import contextlib
import json
import pathlib
import queue
import subprocess
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator

import pytest
import yaml

from mcruntime.envtest import APIServer
from tests.kubectl.conftest import Kubectl, kubectl_binary

pytestmark = pytest.mark.timeout(60)

WIDGETS_CRD = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.kubectl.example.com
spec:
  group: kubectl.example.com
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wdg]}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
      scale: {specReplicasPath: .spec.replicas, statusReplicasPath: .status.replicas}
    additionalPrinterColumns:
    - {name: Color, type: string, jsonPath: .spec.color}
    - {name: Replicas, type: integer, jsonPath: .spec.replicas}
    - {name: Ready, type: string, jsonPath: '.status.conditions[?(@.type=="Ready")].status'}
    - {name: Age, type: date, jsonPath: .metadata.creationTimestamp}
    - {name: Owner, type: string, jsonPath: .spec.owner, priority: 1}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              color: {type: string}
              owner: {type: string}
              replicas: {type: integer}
          status:
            type: object
            x-kubernetes-preserve-unknown-fields: true
"""


def _openapi_served(server: APIServer) -> bool:
    import http.client

    conn = http.client.HTTPSConnection(
        server.host, server.port, timeout=5, context=server.client_ssl_context()
    )
    conn.request("GET", "/openapi/v2", headers={"Authorization": f"Bearer {server.token}"})
    resp = conn.getresponse()
    resp.read()
    return resp.status == 200


def _validate_flag(server: APIServer) -> list[str]:
    """``--validate=false`` until envtest serves OpenAPI (kubectl validates against it)."""
    return [] if _openapi_served(server) else ["--validate=false"]


@pytest.fixture
def ns(envtest: APIServer) -> Iterator[str]:
    """A namespace of the test's own (made in-process: a kubectl call costs ~0.15 s)."""
    from kubernetes import client, config

    name = f"t-{uuid.uuid4().hex[:8]}"
    with config.new_client_from_config_dict(envtest.kubeconfig()) as api:
        core = client.CoreV1Api(api)
        core.create_namespace({"metadata": {"name": name}})
        yield name
        core.delete_namespace(name)


@pytest.fixture(scope="module")
def widgets(envtest: APIServer, kubectl: Kubectl) -> str:
    out = kubectl.run("get", "crd", "widgets.kubectl.example.com", check=False)
    if out.returncode != 0:
        kubectl("create", *_validate_flag(envtest), "-f", "-", input=WIDGETS_CRD)
    return "widgets.kubectl.example.com"


def _deployment(kubectl: Kubectl, ns: str, name: str = "web", replicas: int = 2) -> None:
    kubectl("create", "deployment", name, "-n", ns, "--image=nginx:1.27", f"--replicas={replicas}")


def _header(out: str) -> list[str]:
    return out.splitlines()[0].split()


def _rows(out: str) -> dict[str, list[str]]:
    return {line.split()[0]: line.split() for line in out.splitlines()[1:] if line.strip()}


def test_get_prints_the_servers_columns(kubectl: Kubectl, ns: str) -> None:
    kubectl("create", "configmap", "settings", "-n", ns, "--from-literal=a=1", "--from-literal=b=2")
    _deployment(kubectl, ns)
    out = kubectl("get", "configmaps", "-n", ns)
    assert _header(out) == ["NAME", "DATA", "AGE"]
    assert _rows(out)["settings"][1] == "2"
    assert _rows(out)["kube-root-ca.crt"][1] == "1"
    out = kubectl("get", "deployments", "-n", ns)
    assert _header(out) == ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]
    assert _rows(out)["web"][1:4] == ["0/2", "0", "0"]
    out = kubectl("get", "namespace", ns)
    assert _header(out) == ["NAME", "STATUS", "AGE"] and _rows(out)[ns][1] == "Active"


def test_get_prints_kube_apiservers_columns_of_rbac_ingress_and_crds(
    kubectl: Kubectl, ns: str, widgets: str
) -> None:
    """Role bindings name their role (and, wide, their subjects); ingresses their class,
    hosts and ports; roles and CRDs, which have no printer, ``NAME CREATED AT``."""
    kubectl("create", "rolebinding", "rb", "-n", ns, "--clusterrole=view", "--user=bob")
    kubectl("create", "role", "reader", "-n", ns, "--verb=get", "--resource=pods")
    kubectl("create", "ingress", "web", "-n", ns, "--rule=foo.com/=svc:80")
    out = kubectl("get", "rolebinding", "rb", "-n", ns, "-o", "wide")
    assert _header(out) == ["NAME", "ROLE", "AGE", "USERS", "GROUPS", "SERVICEACCOUNTS"]
    assert _rows(out)["rb"][1] == "ClusterRole/view" and _rows(out)["rb"][3] == "bob"
    out = kubectl("get", "ingress", "-n", ns)
    assert _header(out) == ["NAME", "CLASS", "HOSTS", "ADDRESS", "PORTS", "AGE"]
    assert _rows(out)["web"][1:4] == ["<none>", "foo.com", "80"]
    for args in (("role", "reader", "-n", ns), ("crd", widgets)):
        out = kubectl("get", *args)
        assert out.splitlines()[0].split() == ["NAME", "CREATED", "AT"]
        created = kubectl("get", *args, "-o", "jsonpath={.metadata.creationTimestamp}")
        assert _rows(out)[args[1]][1] == created


def test_get_output_formats(kubectl: Kubectl, ns: str) -> None:
    _deployment(kubectl, ns)
    as_yaml = yaml.safe_load(kubectl("get", "deploy", "web", "-n", ns, "-o", "yaml"))
    assert (as_yaml["kind"], as_yaml["spec"]["replicas"]) == ("Deployment", 2)
    as_json = json.loads(kubectl("get", "deploy", "-n", ns, "-o", "json"))
    assert as_json["kind"] == "List" and as_json["items"][0]["metadata"]["name"] == "web"
    wide = kubectl("get", "deploy", "-n", ns, "-o", "wide")
    assert _header(wide)[-3:] == ["CONTAINERS", "IMAGES", "SELECTOR"]
    assert _rows(wide)["web"][-3:] == ["nginx", "nginx:1.27", "app=web"]
    path = "{.spec.replicas}/{.spec.template.spec.containers[0].image}"
    assert kubectl("get", "deploy", "web", "-n", ns, "-o", f"jsonpath={path}") == "2/nginx:1.27"


def test_get_all_namespaces_adds_the_namespace_column(kubectl: Kubectl, ns: str) -> None:
    out = kubectl("get", "serviceaccounts", "-A")
    assert _header(out) == ["NAMESPACE", "NAME", "SECRETS", "AGE"]
    namespaces = {line.split()[0] for line in out.splitlines()[1:]}
    assert {"default", "kube-system", "kube-public", "kube-node-lease", ns} <= namespaces


def test_crd_printer_columns_and_wide(kubectl: Kubectl, ns: str, widgets: str) -> None:
    kubectl(
        "create",
        "-f",
        "-",
        "--validate=false",
        input=(
            f"apiVersion: kubectl.example.com/v1\nkind: Widget\nmetadata: {{name: w1, namespace: {ns}}}\n"
            "spec: {color: blue, replicas: 3, owner: team-a}\n"
        ),
    )
    kubectl(
        "patch",
        "widget",
        "w1",
        "-n",
        ns,
        "--subresource=status",
        "--type=merge",
        "-p",
        '{"status":{"conditions":[{"type":"Ready","status":"True"}]}}',
    )
    out = kubectl("get", "wdg", "-n", ns)
    assert _header(out) == ["NAME", "COLOR", "REPLICAS", "READY", "AGE"]
    assert _rows(out)["w1"][1:4] == ["blue", "3", "True"]
    wide = kubectl("get", "widgets", "-n", ns, "-o", "wide")
    assert _header(wide)[-1] == "OWNER" and _rows(wide)["w1"][-1] == "team-a"
    kubectl("scale", "widget", "w1", "-n", ns, "--replicas=5")
    assert kubectl("get", "widget", "w1", "-n", ns, "-o", "jsonpath={.spec.replicas}") == "5"


class _Background:
    """A kubectl command running in the background (``get -w``, ``proxy``), its output
    lines read as they come."""

    def __init__(self, tool: Kubectl, *args: str) -> None:
        self.proc = subprocess.Popen(
            [tool.binary, "--kubeconfig", str(tool.kubeconfig), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        self.reader = threading.Thread(target=self._read, name="test-kubectl-watch", daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def until(self, printed: str, timeout: float = 15) -> list[str]:
        """Every line so far, once one starting with ``printed`` came (fails after ``timeout``)."""
        deadline = time.monotonic() + timeout
        while not any(line.startswith(printed) for line in self.seen):
            left = deadline - time.monotonic()
            assert left > 0, f"kubectl printed no {printed!r}: {self.seen}"
            with contextlib.suppress(queue.Empty):
                self.seen.append(self.lines.get(timeout=min(left, 0.5)))
        return self.seen

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait(10)
        self.reader.join(10)


def test_get_watch_prints_new_rows(kubectl: Kubectl, ns: str) -> None:
    watch = _Background(kubectl, "get", "cm", "-n", ns, "-w")
    try:
        watch.until("kube-root-ca.crt")
        kubectl("create", "configmap", "late", "-n", ns, "--from-literal=x=y")
        assert watch.until("late ")[0].split() == ["NAME", "DATA", "AGE"]
    finally:
        watch.close()


@pytest.mark.parametrize("version", ["1.27", None])
def test_get_watch_shows_changes_and_deletes_and_ends_when_the_server_stops(
    tmp_path: pathlib.Path, version: str | None
) -> None:
    """``--output-watch-events``: a change and a delete are shown as such; when the server
    goes away, kubectl's watch ends and kubectl exits 0, as with kube-apiserver."""
    with APIServer("watch-stop", root_ca_configmap=True) as server:
        tool = Kubectl(
            kubectl_binary(f"kubectl.{version}" if version else "kubectl"),
            server.write_kubeconfig(tmp_path / "config"),
        )
        watch = _Background(tool, "get", "cm", "-n", "default", "-w", "--output-watch-events")
        try:
            watch.until("ADDED")
            tool("create", "configmap", "seen", "-n", "default")
            tool("label", "configmap", "seen", "-n", "default", "changed=yes")
            tool("delete", "configmap", "seen", "-n", "default")
            events = [line.split()[:2] for line in watch.until("DELETED")]
            assert events[-3:] == [["ADDED", "seen"], ["MODIFIED", "seen"], ["DELETED", "seen"]]
            server.stop()
            assert watch.proc.wait(15) == 0
        finally:
            watch.close()


def test_describe_shows_events(kubectl: Kubectl, ns: str) -> None:
    _deployment(kubectl, ns)
    uid = kubectl("get", "deploy", "web", "-n", ns, "-o", "jsonpath={.metadata.uid}")
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "web.scaled", "namespace": ns},
        "involvedObject": {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "name": "web",
            "namespace": ns,
            "uid": uid,
        },
        "reason": "ScalingReplicaSet",
        "message": "Scaled up replica set web-1 to 2",
        "type": "Normal",
        "source": {"component": "deployment-controller"},
        "count": 1,
    }
    kubectl("create", "--validate=false", "-f", "-", input=json.dumps(event))
    out = kubectl("describe", "deployment", "web", "-n", ns)
    assert "Replicas:" in out and "2 desired" in out
    events = out.split("Events:", 1)[1]
    assert "ScalingReplicaSet" in events and "Scaled up replica set web-1 to 2" in events
    listed = kubectl("get", "events", "-n", ns)
    assert _header(listed)[:4] == ["LAST", "SEEN", "TYPE", "REASON"]
    assert "deployment/web" in listed
    # the same Event through events.k8s.io/v1
    via_v1 = kubectl("get", "events.v1.events.k8s.io", "-n", ns, "-o", "json")
    item = json.loads(via_v1)["items"][0]
    assert (item["apiVersion"], item["note"]) == (
        "events.k8s.io/v1",
        "Scaled up replica set web-1 to 2",
    )


def test_create_from_a_file_with_validation(envtest: APIServer, kubectl: Kubectl, ns: str) -> None:
    if not _openapi_served(envtest):
        pytest.skip(
            "kubectl validates against /openapi/v2 or /openapi/v3, which envtest does not serve yet"
        )
    manifest = f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: validated, namespace: {ns}}}\ndata: {{a: b}}\n"
    assert "configmap/validated created" in kubectl("create", "-f", "-", input=manifest)


def test_create_from_a_file(envtest: APIServer, kubectl: Kubectl, ns: str, tmp_path) -> None:
    manifest = tmp_path / "objects.yaml"
    manifest.write_text(
        f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: from-file, namespace: {ns}}}\n"
        "data: {a: b}\n---\n"
        f"apiVersion: v1\nkind: Secret\nmetadata: {{name: creds, namespace: {ns}}}\n"
        "stringData: {password: hunter2}\n"
    )
    out = kubectl("create", *_validate_flag(envtest), "-f", str(manifest))
    assert "configmap/from-file created" in out and "secret/creds created" in out
    secrets = kubectl("get", "secret", "creds", "-n", ns)
    assert _header(secrets) == ["NAME", "TYPE", "DATA", "AGE"]
    assert _rows(secrets)["creds"][1:3] == ["Opaque", "1"]


def test_create_of_a_configmap_with_a_number_prints_the_decoder_s_error(
    envtest: APIServer, kubectl: Kubectl, ns: str
) -> None:
    manifest = f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: numbers, namespace: {ns}}}\ndata: {{n: 5}}\n"
    out = kubectl.run("create", *_validate_flag(envtest), "-f", "-", input=manifest, check=False)
    assert out.returncode == 1
    assert (
        'Error from server (BadRequest): error when creating "STDIN": ConfigMap in version "v1" '
        "cannot be handled as a ConfigMap: json: cannot unmarshal number into Go struct field "
        "ConfigMap.data of type string"
    ) in out.stderr
    assert kubectl.run("get", "configmap", "numbers", "-n", ns, check=False).returncode != 0


def test_replace_of_an_absent_lease_creates_it_and_of_a_configmap_fails(
    kubectl: Kubectl, ns: str
) -> None:
    """``kubectl replace`` PUTs the manifest: kube-apiserver creates an absent Lease (its
    strategy allows create on update) and answers 404 for an absent ConfigMap."""
    lease = (
        "apiVersion: coordination.k8s.io/v1\nkind: Lease\n"
        f"metadata: {{name: replaced, namespace: {ns}}}\nspec: {{holderIdentity: me}}\n"
    )
    assert kubectl("replace", "-f", "-", input=lease).strip() == (
        "lease.coordination.k8s.io/replaced replaced"
    )
    assert kubectl(
        "get", "lease", "replaced", "-n", ns, "-o", "jsonpath={.spec.holderIdentity}"
    ) == ("me")
    cm = f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: replaced, namespace: {ns}}}\n"
    out = kubectl.run("replace", "-f", "-", input=cm, check=False)
    assert out.returncode == 1
    assert out.stderr.strip() == (
        'Error from server (NotFound): error when replacing "STDIN": '
        'configmaps "replaced" not found'
    )


def test_create_secret_of_a_type_without_its_keys_prints_the_servers_refusal(
    kubectl: Kubectl, ns: str
) -> None:
    """``kubectl create secret generic --type=kubernetes.io/tls`` checks nothing itself: the
    Secret kube-apiserver's ``ValidateSecret`` refuses, for want of ``tls.crt`` and
    ``tls.key``, is not created, and kubectl prints why."""
    args = ("create", "secret", "generic", "half-tls", "-n", ns, "--type=kubernetes.io/tls")
    out = kubectl.run(*args, "--from-literal=tls.crt=c", check=False)
    assert out.returncode == 1
    assert out.stderr.strip() == (
        'error: failed to create secret Secret "half-tls" is invalid: data[tls.key]: Required value'
    )
    assert kubectl.run("get", "secret", "half-tls", "-n", ns, check=False).returncode != 0
    kubectl(*args, "--from-literal=tls.crt=c", "--from-literal=tls.key=k")


def test_create_prints_every_fault_of_a_manifest_at_once(kubectl: Kubectl, ns: str) -> None:
    """kube-apiserver validates an object's metadata and spec together: kubectl prints the
    faults of a broken manifest all at once, in the server's order, not one per attempt."""
    manifest = f"""apiVersion: apps/v1
kind: Deployment
metadata: {{name: Bad_Name, namespace: {ns}, labels: {{"bad key!": x}}}}
spec:
  replicas: -1
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: other}}}}
    spec: {{containers: [{{name: main, image: nginx}}]}}
"""
    out = kubectl.run("create", "--dry-run=server", "-f", "-", input=manifest, check=False)
    assert out.returncode == 1
    assert 'The Deployment "Bad_Name" is invalid: \n' in out.stderr
    faults = [line.split(":")[0] for line in out.stderr.splitlines() if line.startswith("* ")]
    assert faults == [
        "* metadata.name",
        "* metadata.labels",
        "* spec.replicas",
        "* spec.template.metadata.labels",
    ]


def test_get_quota_prints_what_its_status_enforces_as_describe_does(
    kubectl: Kubectl, ns: str
) -> None:
    """kube-apiserver's quota columns are ``used/hard`` from the status the resourcequota
    controller writes (none runs here): blank until a status is written, as ``describe``."""
    kubectl("create", "quota", "q", "-n", ns, "--hard=pods=2,cpu=1,limits.memory=1Gi")
    out = kubectl("get", "quota", "q", "-n", ns)
    assert _header(out) == ["NAME", "AGE", "REQUEST", "LIMIT"]
    assert len(_rows(out)["q"]) == 2  # name and age: no REQUEST or LIMIT yet
    assert "pods" not in kubectl("describe", "quota", "q", "-n", ns)
    status = {"hard": {"pods": "2", "cpu": "1", "limits.memory": "1Gi"}, "used": {"pods": "1"}}
    kubectl(
        "patch", "quota", "q", "-n", ns, "--subresource=status", "--type=merge",
        "-p", json.dumps({"status": status}),
    )  # fmt: skip
    assert _rows(kubectl("get", "quota", "q", "-n", ns))["q"][2:] == [
        "cpu:", "0/1,", "pods:", "1/2", "limits.memory:", "0/1Gi",
    ]  # fmt: skip


@pytest.mark.parametrize("binary", ["kubectl", "kubectl.1.27", "kubectl.1.33"])
def test_explain_names_int_or_string_and_quantity_fields_as_on_a_cluster(
    kubectl: Kubectl, binary: str
) -> None:
    """kube-apiserver's OpenAPI v3 refers these fields to IntOrString and Quantity, which
    kubectl explain prints by name (and IntOrString's description under the field's)."""
    explain = Kubectl(kubectl_binary(binary), kubectl.kubeconfig)
    out = explain("explain", "deployment.spec.strategy.rollingUpdate.maxSurge")
    assert "FIELD: maxSurge <IntOrString>" in out
    assert "IntOrString is a type that can hold an int32 or a string." in " ".join(out.split())
    assert "FIELD: targetPort <IntOrString>" in explain("explain", "service.spec.ports.targetPort")
    limits = explain("explain", "pod.spec.containers.resources.limits")
    assert "FIELD: limits <map[string]Quantity>" in limits
    assert "FIELD: sizeLimit <Quantity>" in explain(
        "explain", "pod.spec.volumes.emptyDir.sizeLimit"
    )


def test_label_and_annotate(kubectl: Kubectl, ns: str) -> None:
    kubectl("create", "configmap", "tagged", "-n", ns)
    kubectl("label", "configmap", "tagged", "-n", ns, "tier=web", "team=a")
    kubectl("annotate", "configmap", "tagged", "-n", ns, "note=hello")
    kubectl("label", "configmap", "tagged", "-n", ns, "team-")
    got = json.loads(kubectl("get", "configmap", "tagged", "-n", ns, "-o", "json"))
    assert got["metadata"]["labels"] == {"tier": "web"}
    assert got["metadata"]["annotations"] == {"note": "hello"}
    assert _rows(kubectl("get", "cm", "-n", ns, "-l", "tier=web")).keys() == {"tagged"}
    overwrite = kubectl.run("label", "configmap", "tagged", "-n", ns, "tier=db", check=False)
    assert overwrite.returncode != 0 and "--overwrite" in overwrite.stderr


def test_scale_a_deployment(kubectl: Kubectl, ns: str) -> None:
    _deployment(kubectl, ns)
    assert "deployment.apps/web scaled" in kubectl(
        "scale", "deployment", "web", "-n", ns, "--replicas=4"
    )
    assert kubectl("get", "deploy", "web", "-n", ns, "-o", "jsonpath={.spec.replicas}") == "4"
    kubectl("scale", "deployment", "web", "-n", ns, "--current-replicas=4", "--replicas=1")
    assert kubectl("get", "deploy", "web", "-n", ns, "-o", "jsonpath={.spec.replicas}") == "1"


def test_rollout_status_waits_for_the_status_a_deployment_controller_would_write(
    kubectl: Kubectl, ns: str
) -> None:
    """No deployment controller runs (as with kube-apiserver alone): rollout status waits
    until the test writes the status one would (docs/testing.md says so)."""
    _deployment(kubectl, ns)
    waiting = kubectl.run("rollout", "status", "deploy/web", "-n", ns, "--timeout=1s", check=False)
    assert waiting.returncode == 1
    assert "Waiting for deployment spec update to be observed" in waiting.stdout
    generation = kubectl("get", "deploy", "web", "-n", ns, "-o", "jsonpath={.metadata.generation}")
    counts = {k: 2 for k in ("replicas", "updatedReplicas", "readyReplicas", "availableReplicas")}
    status = {"status": {"observedGeneration": int(generation), **counts}}
    write_status = ("patch", "deploy/web", "-n", ns, "--subresource=status", "--type=merge")
    kubectl(*write_status, "-p", json.dumps(status))
    done = kubectl("rollout", "status", "deploy/web", "-n", ns, "--timeout=5s")
    assert done.strip() == 'deployment "web" successfully rolled out'


def test_get_of_a_subresource_prints_its_columns(kubectl: Kubectl, ns: str) -> None:
    # the scale subresource has columns of its own; status those of its kind
    _deployment(kubectl, ns)
    kubectl("scale", "deployment", "web", "-n", ns, "--replicas=3")
    scale = kubectl("get", "deploy", "web", "-n", ns, "--subresource=scale").splitlines()
    assert scale[0].split() == ["NAME", "DESIRED", "AVAILABLE", "AGE"]
    assert scale[1].split()[:3] == ["web", "3", "0"]
    status = kubectl("get", "deploy", "web", "-n", ns, "--subresource=status").splitlines()
    assert status[0].split() == ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"]


def test_scale_owns_the_replicas_through_the_scale_subresource(kubectl: Kubectl, ns: str) -> None:
    _deployment(kubectl, ns)
    kubectl("scale", "deployment", "web", "-n", ns, "--replicas=3")
    got = json.loads(
        kubectl("get", "deploy", "web", "-n", ns, "-o", "json", "--show-managed-fields")
    )
    entries = got["metadata"]["managedFields"]
    scaled = [e for e in entries if e.get("subresource") == "scale"]
    assert len(scaled) == 1, entries
    assert scaled[0]["manager"].startswith("kubectl")
    assert (scaled[0]["operation"], scaled[0]["apiVersion"]) == ("Update", "apps/v1")
    assert scaled[0]["fieldsV1"] == {"f:spec": {"f:replicas": {}}}
    created = [e for e in entries if e["manager"] == "kubectl-create"]
    assert created and all("f:replicas" not in e["fieldsV1"]["f:spec"] for e in created)


def test_patch_strategic_merge_json_and_status(kubectl: Kubectl, ns: str) -> None:
    _deployment(kubectl, ns)
    kubectl(
        "patch",
        "deploy",
        "web",
        "-n",
        ns,
        "-p",
        '{"spec":{"template":{"spec":{"containers":[{"name":"sidecar","image":"busybox"}]}}}}',
    )
    images = kubectl(
        "get", "deploy", "web", "-n", ns, "-o", "jsonpath={.spec.template.spec.containers[*].name}"
    )
    assert sorted(images.split()) == ["nginx", "sidecar"]  # strategic merge: merged by name
    kubectl(
        "patch",
        "deploy",
        "web",
        "-n",
        ns,
        "--type=merge",
        "-p",
        '{"metadata":{"labels":{"m":"1"}}}',
    )
    kubectl(
        "patch",
        "deploy",
        "web",
        "-n",
        ns,
        "--type=json",
        "-p",
        '[{"op":"replace","path":"/spec/replicas","value":3}]',
    )
    kubectl(
        "patch",
        "deploy",
        "web",
        "-n",
        ns,
        "--subresource=status",
        "--type=merge",
        "-p",
        '{"status":{"readyReplicas":3,"replicas":3,"updatedReplicas":3,"availableReplicas":3}}',
    )
    got = json.loads(kubectl("get", "deploy", "web", "-n", ns, "-o", "json"))
    assert got["metadata"]["labels"]["m"] == "1" and got["spec"]["replicas"] == 3
    assert _rows(kubectl("get", "deploy", "-n", ns))["web"][1:4] == ["3/3", "3", "3"]


def test_strategic_patch_and_apply_into_lists_the_deployment_lacks(
    kubectl: Kubectl, ns: str
) -> None:
    # kubectl patch sends the items as written (an empty pull secret has no merge key);
    # client-side apply sends $setElementOrder/containers beside a container whose env,
    # volumeMounts and the pod's volumes the live object lacks
    _deployment(kubectl, ns)
    kubectl(
        "patch",
        "deploy",
        "web",
        "-n",
        ns,
        "--type=strategic",
        "-p",
        '{"spec":{"template":{"spec":{"imagePullSecrets":[{}]}}}}',
    )
    got = json.loads(kubectl("get", "deploy", "web", "-n", ns, "-o", "json"))
    assert got["spec"]["template"]["spec"]["imagePullSecrets"] == [{}]
    manifest = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "applied", "namespace": ns},
        "spec": {
            "selector": {"matchLabels": {"app": "applied"}},
            "template": {
                "metadata": {"labels": {"app": "applied"}},
                "spec": {"containers": [{"name": "main", "image": "nginx"}]},
            },
        },
    }
    kubectl("apply", "-f", "-", input=json.dumps(manifest))
    spec = manifest["spec"]["template"]["spec"]  # type: ignore[index]
    spec["containers"][0]["env"] = [{"name": "B", "value": "2"}, {"name": "A", "value": "1"}]
    spec["containers"][0]["volumeMounts"] = [{"name": "data", "mountPath": "/data"}]
    spec["volumes"] = [{"name": "data", "emptyDir": {}}]
    kubectl("apply", "-f", "-", input=json.dumps(manifest))
    got = json.loads(kubectl("get", "deploy", "applied", "-n", ns, "-o", "json"))
    live = got["spec"]["template"]["spec"]
    assert live["containers"][0]["env"] == spec["containers"][0]["env"]
    assert live["containers"][0]["volumeMounts"] == spec["containers"][0]["volumeMounts"]
    assert live["volumes"] == spec["volumes"]


@pytest.mark.parametrize("version", ["1.27", None])
def test_patch_type_json_whose_test_op_fails_is_refused_as_kube_apiserver_refuses_it(
    kubectl: Kubectl, ns: str, version: str | None
) -> None:
    """The guard of an optimistic JSON patch: kube-apiserver answers a failed ``test`` (as
    any operation that does not apply) with one generic 422, and kubectl prints that."""
    tool = Kubectl(kubectl_binary(f"kubectl.{version}"), kubectl.kubeconfig) if version else kubectl
    tool("create", "configmap", "guarded", "-n", ns, "--from-literal=owner=a")
    guard = '[{"op":"test","path":"/data/owner","value":"b"},'
    take = guard + '{"op":"replace","path":"/data/owner","value":"c"}]'
    out = tool.run("patch", "cm", "guarded", "-n", ns, "--type=json", "-p", take, check=False)
    assert out.returncode == 1
    assert out.stderr.strip() == (
        "The request is invalid: the server rejected our request due to an error in our request"
    )
    assert tool("get", "cm", "guarded", "-n", ns, "-o", "jsonpath={.data.owner}") == "a"


def test_wait_for_a_condition(kubectl: Kubectl, ns: str) -> None:
    _deployment(kubectl, ns)
    waiting = subprocess.Popen(
        [
            kubectl.binary,
            "--kubeconfig",
            str(kubectl.kubeconfig),
            "wait",
            "-n",
            ns,
            "--for=condition=Available",
            "deployment/web",
            "--timeout=15s",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        kubectl(
            "patch",
            "deploy",
            "web",
            "-n",
            ns,
            "--subresource=status",
            "--type=merge",
            "-p",
            '{"status":{"conditions":[{"type":"Available","status":"True","reason":"MinimumReplicasAvailable"}]}}',
        )
        out, err = waiting.communicate(timeout=20)
    finally:
        if waiting.poll() is None:
            waiting.kill()
            waiting.wait()
    assert waiting.returncode == 0, err
    assert "deployment.apps/web condition met" in out


@pytest.mark.parametrize("version", ["", "1.27", "1.33"])
def test_an_operator_authors_loop_on_a_custom_resource(
    kubectl: Kubectl, ns: str, widgets: str, version: str, tmp_path: pathlib.Path
) -> None:
    # what an author runs on their CRs while a controller works, answered as kube-apiserver does
    if version:
        kubectl = Kubectl(kubectl_binary(f"kubectl.{version}"), kubectl.kubeconfig)
    manifest = tmp_path / "w.yaml"
    manifest.write_text(
        "apiVersion: kubectl.example.com/v1\nkind: Widget\n"
        f"metadata: {{name: w, namespace: {ns}, finalizers: [kubectl.example.com/hold]}}\n"
        "spec: {color: red, replicas: 1}\n"
    )
    kubectl("apply", "-f", str(manifest))
    kubectl("wait", "-n", ns, "--for=jsonpath={.spec.color}=red", "widget/w", "--timeout=5s")
    # a status written as the controller writes it, awaited as a test script awaits it
    kubectl(
        "patch", "widget", "w", "-n", ns, "--subresource=status", "--type=merge", "-p",
        '{"status":{"conditions":[{"type":"Ready","status":"False","reason":"Painting"}]}}',
    )  # fmt: skip
    kubectl("wait", "-n", ns, "--for=condition=Ready=false", "widget/w", "--timeout=5s")
    # diff: 0 when the file is what is stored, 1 with the change shown
    assert kubectl.run("diff", "-f", str(manifest)).returncode == 0
    manifest.write_text(manifest.read_text().replace("color: red", "color: blue"))
    changed = kubectl.run("diff", "-f", str(manifest), check=False)
    assert changed.returncode == 1, changed.stderr
    assert "-  color: red" in changed.stdout and "+  color: blue" in changed.stdout
    # a custom resource takes no strategic merge patch: kube-apiserver's 415, in kubectl's words
    refused = kubectl.run(
        "patch", "widget", "w", "-n", ns, "-p", '{"spec":{"replicas":2}}', check=False
    )
    assert refused.returncode == 1
    assert (
        "application/strategic-merge-patch+json is not supported by kubectl.example.com/v1, "
        "Kind=Widget" in refused.stderr
    ), refused.stderr
    # deleted while a finalizer holds it: still there, terminating, until the finalizer goes
    kubectl("delete", "widget", "w", "-n", ns, "--wait=false")
    held = kubectl.run("wait", "-n", ns, "--for=delete", "widget/w", "--timeout=1s", check=False)
    assert held.returncode != 0 and "timed out" in held.stderr, held.stderr
    held_object = json.loads(kubectl("get", "widget", "w", "-n", ns, "-o", "json"))
    assert held_object["metadata"]["deletionTimestamp"]
    kubectl(
        "patch",
        "widget",
        "w",
        "-n",
        ns,
        "--type=json",
        "-p",
        '[{"op":"remove","path":"/metadata/finalizers"}]',
    )
    kubectl("wait", "-n", ns, "--for=delete", "widget/w", "--timeout=5s")


@pytest.mark.parametrize("version", ["", "1.27", "1.33"])
def test_logs_exec_and_cp_meet_the_api_server_s_answers(
    kubectl: Kubectl, ns: str, version: str, tmp_path: pathlib.Path
) -> None:
    """envtest runs no kubelet, but answers as kube-apiserver does for a pod on no node:
    an empty log, and a 400 for exec (and cp, which execs ``tar``), not a bare 404."""
    tool = (
        kubectl
        if not version
        else Kubectl(kubectl_binary(f"kubectl.{version}"), kubectl.kubeconfig)
    )
    tool("run", "solo", "-n", ns, "--image=registry.k8s.io/pause:3.9")
    logs = tool.run("logs", "solo", "-n", ns)
    assert (logs.returncode, logs.stdout) == (0, "")
    wrong = tool.run("logs", "solo", "-n", ns, "-c", "nope", check=False)
    assert wrong.returncode != 0
    assert "container nope is not valid for pod solo" in wrong.stderr
    for args in (
        ("exec", "solo", "-n", ns, "--", "ls"),
        ("cp", f"{ns}/solo:/etc/hosts", str(tmp_path / "hosts")),
    ):
        proc = tool.run(*args, check=False)
        assert proc.returncode != 0, args
        assert "pod solo does not have a host assigned" in proc.stderr, (args, proc.stderr)
    tool("delete", "pod", "solo", "-n", ns, "--wait=false")


@pytest.mark.parametrize("version", ["", "1.27", "1.33"])
def test_debug_adds_an_ephemeral_container(kubectl: Kubectl, ns: str, version: str) -> None:
    """``kubectl debug`` patches ``pods/ephemeralcontainers`` (envtest starts nothing)."""
    tool = (
        kubectl
        if not version
        else Kubectl(kubectl_binary(f"kubectl.{version}"), kubectl.kubeconfig)
    )
    tool("run", "target", "-n", ns, "--image=registry.k8s.io/pause:3.9")
    tool("debug", "target", "-n", ns, "--image=busybox:1.36", "--container=dbg", "--target=target")
    spec = json.loads(tool("get", "pod", "target", "-n", ns, "-o", "json"))["spec"]
    (dbg,) = spec["ephemeralContainers"]
    assert (dbg["name"], dbg["image"], dbg["targetContainerName"]) == (
        "dbg",
        "busybox:1.36",
        "target",
    )
    tool("delete", "pod", "target", "-n", ns, "--wait=false")


@pytest.mark.parametrize(("cascade", "dependent_left"), [("foreground", False), ("orphan", True)])
def test_delete_with_cascade(kubectl: Kubectl, ns: str, cascade: str, dependent_left: bool) -> None:
    _deployment(kubectl, ns)
    uid = kubectl("get", "deploy", "web", "-n", ns, "-o", "jsonpath={.metadata.uid}")
    owned = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": "owned",
            "namespace": ns,
            "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": uid}
            ],
        },
    }
    kubectl("create", "--validate=false", "-f", "-", input=json.dumps(owned))
    out = kubectl("delete", "deployment", "web", "-n", ns, f"--cascade={cascade}", "--timeout=15s")
    assert 'deployment.apps "web" deleted' in out
    assert kubectl.run("get", "deploy", "web", "-n", ns, check=False).returncode != 0
    left = kubectl.run("get", "configmap", "owned", "-n", ns, "-o", "json", check=False)
    assert (left.returncode == 0) == dependent_left
    if dependent_left:
        assert not json.loads(left.stdout)["metadata"].get("ownerReferences")


@pytest.mark.parametrize("version", ["1.27", None])
def test_replace_raw_finalize_frees_a_namespace_stuck_terminating(
    envtest: APIServer, kubectl: Kubectl, version: str | None
) -> None:
    """The way out of a namespace held Terminating by content whose finalizer nobody will
    remove: PUT the namespace without ``spec.finalizers`` to its ``/finalize``."""
    from kubernetes import client, config

    tool = Kubectl(kubectl_binary(f"kubectl.{version}"), kubectl.kubeconfig) if version else kubectl
    stuck = f"stuck-{uuid.uuid4().hex[:8]}"
    held = {"name": "blocker", "finalizers": ["example.com/hold"]}
    with config.new_client_from_config_dict(envtest.kubeconfig()) as api:
        core = client.CoreV1Api(api)
        core.create_namespace({"metadata": {"name": stuck}})
        core.create_namespaced_config_map(stuck, {"metadata": held})
        tool("delete", "namespace", stuck, "--wait=false")
        ns = json.loads(tool("get", "namespace", stuck, "-o", "json"))
        assert ns["status"]["phase"] == "Terminating"
        ns["spec"]["finalizers"] = []
        path = f"/api/v1/namespaces/{stuck}/finalize"
        tool("replace", "--raw", path, "-f", "-", input=json.dumps(ns))
        gone = tool.run("get", "namespace", stuck, check=False)
        assert gone.returncode == 1 and "NotFound" in gone.stderr
        # as on a real cluster, the content is left behind
        core.patch_namespaced_config_map("blocker", stuck, {"metadata": {"finalizers": None}})


def test_get_pages_sorts_and_shapes_what_it_prints(kubectl: Kubectl, ns: str) -> None:
    """What ``kubectl get`` does with a list: fetches it in pages (continue tokens), sorts,
    prints chosen columns, paths and labels, and asks the server to select by field."""
    made = [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "labels": {"tier": tier}},
            "data": {"n": name[1]},
        }
        for name, tier in (("c3", "db"), ("c1", "web"), ("c2", "web"))
    ]
    kubectl(
        "create",
        "-n",
        ns,
        "-f",
        "-",
        input=json.dumps({"apiVersion": "v1", "kind": "List", "items": made}),
    )
    paged = kubectl.run("get", "cm", "-n", ns, "--chunk-size=2", "-o", "name", "-v=6")
    assert paged.stdout.split() == [
        f"configmap/{n}" for n in ("c1", "c2", "c3", "kube-root-ca.crt")
    ]
    assert paged.stderr.count("continue=") == 1  # two pages of two
    by_n = kubectl("get", "cm", "-n", ns, "-l", "tier", "--sort-by=.data.n", "-o", "name")
    assert by_n.split() == ["configmap/c1", "configmap/c2", "configmap/c3"]
    columns = kubectl(
        "get", "cm", "-n", ns, "-l", "tier=web", "-o", "custom-columns=N:.metadata.name,V:.data.n"
    )
    assert [line.split() for line in columns.splitlines()] == [["N", "V"], ["c1", "1"], ["c2", "2"]]
    ranged = kubectl(
        "get",
        "cm",
        "-n",
        ns,
        "-l",
        "tier",
        "-o",
        'jsonpath={range .items[*]}{.metadata.name}={.metadata.labels.tier}{"\\n"}{end}',
    )
    assert ranged.split() == ["c1=web", "c2=web", "c3=db"]
    labelled = _rows(kubectl("get", "cm", "-n", ns, "--show-labels"))
    assert labelled["c3"][-1] == "tier=db" and labelled["kube-root-ca.crt"][-1] == "<none>"
    tiers = kubectl("get", "cm", "-n", ns, "-L", "tier", "--field-selector", "metadata.name!=c1")
    rows = _rows(tiers)
    assert _header(tiers)[-1] == "TIER" and sorted(rows) == ["c2", "c3", "kube-root-ca.crt"]
    assert (rows["c2"][-1], rows["c3"][-1]) == ("web", "db")


def test_discovery_health_and_a_kubectl_proxy(kubectl: Kubectl, ns: str) -> None:
    versions = kubectl("api-versions").split()
    assert {"v1", "apps/v1", "rbac.authorization.k8s.io/v1"} <= set(versions)
    info = kubectl("cluster-info")  # coloured: the words between escapes
    assert "Kubernetes control plane" in info and "is running at" in info and "https://" in info
    ready = kubectl("get", "--raw", "/readyz?verbose")
    assert "[+]ping ok" in ready and ready.rstrip().endswith("readyz check passed")
    assert kubectl("get", "--raw", "/livez") == "ok"
    assert json.loads(kubectl("get", "--raw", "/version"))["major"] == "1"
    assert "apis/apps/v1" in json.loads(kubectl("get", "--raw", "/openapi/v3"))["paths"]
    kubectl("create", "configmap", "via-proxy", "-n", ns)
    scraped = kubectl("get", "--raw", "/metrics").splitlines()
    assert "# TYPE apiserver_storage_objects gauge" in scraped
    assert any(
        line.startswith('apiserver_storage_objects{resource="configmaps"} ') for line in scraped
    )
    proxy = _Background(kubectl, "proxy", "--port=0")
    try:
        address = proxy.until("Starting to serve on ")[-1].split()[-1]
        url = f"http://{address}/api/v1/namespaces/{ns}/configmaps/via-proxy"
        with urllib.request.urlopen(url, timeout=10) as resp:
            assert json.load(resp)["metadata"]["name"] == "via-proxy"
    finally:
        proxy.close()


def test_rollout_restart_set_image_expose_and_run_write_what_they_should(
    kubectl: Kubectl, ns: str
) -> None:
    _deployment(kubectl, ns)
    kubectl("rollout", "restart", "deploy/web", "-n", ns)
    kubectl("set", "image", "deploy/web", "-n", ns, "nginx=nginx:1.28")
    kubectl("expose", "deploy/web", "-n", ns, "--port=80", "--target-port=8080")
    kubectl("run", "one-off", "-n", ns, "--image=busybox:1.36", "--labels=app=web")
    deploy = json.loads(kubectl("get", "deploy", "web", "-n", ns, "-o", "json"))
    template = deploy["spec"]["template"]
    assert "kubectl.kubernetes.io/restartedAt" in template["metadata"]["annotations"]
    assert template["spec"]["containers"][0]["image"] == "nginx:1.28"
    assert deploy["metadata"]["generation"] == 3  # created, restarted, image set
    svc = json.loads(kubectl("get", "svc", "web", "-n", ns, "-o", "json"))["spec"]
    assert svc["selector"] == {"app": "web"} and svc["type"] == "ClusterIP"
    assert svc["ports"] == [{"port": 80, "protocol": "TCP", "targetPort": 8080}]
    assert _rows(kubectl("get", "pods", "-n", ns, "-l", "app=web"))["one-off"][2] == "Pending"


@pytest.mark.parametrize("version", ["1.27", None])
def test_apply_prune_with_an_applyset(kubectl: Kubectl, ns: str, version: str | None) -> None:
    tool = Kubectl(kubectl_binary(f"kubectl.{version}"), kubectl.kubeconfig) if version else kubectl
    two = [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": n}, "data": {"k": n}}
        for n in ("kept", "dropped")
    ]
    applyset = ("apply", "-n", ns, "--prune", "--applyset=cfgs", "-f", "-")
    env = {"KUBECTL_APPLYSET": "true"}  # alpha on every kubectl here
    for items in (two, two[:1]):
        manifest = json.dumps({"apiVersion": "v1", "kind": "List", "items": items})
        out = tool.run(*applyset, input=manifest, env=env).stdout
    assert "configmap/dropped pruned" in out
    parent = json.loads(tool("get", "secret", "cfgs", "-n", ns, "-o", "json"))
    member = f"applyset.kubernetes.io/part-of={parent['metadata']['labels']['applyset.kubernetes.io/id']}"
    assert tool("get", "cm", "-n", ns, "-l", member, "-o", "name").split() == ["configmap/kept"]


def _configmap(ns: str, data: dict[str, str]) -> str:
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "m", "namespace": ns},
            "data": data,
        }
    )


@pytest.mark.parametrize("version", ["1.27", None])
def test_apply_server_side_after_apply_takes_over_the_fields_apply_set(
    kubectl: Kubectl, ns: str, version: str | None
) -> None:
    """``kubectl apply`` then ``kubectl apply --server-side`` of a changed file succeeds
    without ``--force-conflicts`` (kube-apiserver's lastAppliedManager), except for a field
    someone changed since: that one conflicts, alone."""
    tool = Kubectl(kubectl_binary(f"kubectl.{version}"), kubectl.kubeconfig) if version else kubectl
    tool("apply", "-f", "-", input=_configmap(ns, {"a": "1", "b": "1"}))
    tool("patch", "cm", "m", "-n", ns, "--type=merge", "-p", '{"data":{"b":"9"}}')
    ssa = ("apply", "--server-side", "-f", "-")
    refused = tool.run(*ssa, input=_configmap(ns, {"a": "2", "b": "3"}), check=False)
    assert refused.returncode == 1
    assert refused.stderr.startswith(
        'error: Apply failed with 1 conflict: conflict with "kubectl-patch" using v1: .data.b\n'
    ), refused.stderr
    other = tool.run(*ssa, "--field-manager=other", input=_configmap(ns, {"a": "2"}), check=False)
    assert 'conflict with "kubectl-client-side-apply" using v1: .data.a' in other.stderr
    out = tool(*ssa, input=_configmap(ns, {"a": "2", "b": "9"}))
    assert out == "configmap/m serverside-applied\n"
    live = json.loads(tool("get", "cm", "m", "-n", ns, "-o", "json", "--show-managed-fields"))
    assert live["data"] == {"a": "2", "b": "9"}
    owners = {e["manager"]: e["fieldsV1"].get("f:data") for e in live["metadata"]["managedFields"]}
    assert "f:a" in owners["kubectl"]


@pytest.mark.parametrize("version", ["1.27", None])
def test_apply_after_apply_server_side_diffs_against_what_was_applied_server_side(
    kubectl: Kubectl, ns: str, version: str | None
) -> None:
    """A server-side apply by kubectl's manager rewrites the last-applied annotation
    (kube-apiserver's lastAppliedUpdater), so the next client-side apply removes a key that
    was applied server-side and is gone from the file."""
    tool = Kubectl(kubectl_binary(f"kubectl.{version}"), kubectl.kubeconfig) if version else kubectl
    tool("apply", "-f", "-", input=_configmap(ns, {"a": "1", "old": "o"}))
    applied = _configmap(ns, {"a": "2", "new": "n"})
    tool("apply", "--server-side", "--force-conflicts", "-f", "-", input=applied)
    path = "jsonpath={.metadata.annotations.kubectl\\.kubernetes\\.io/last-applied-configuration}"
    assert json.loads(tool("get", "cm", "m", "-n", ns, "-o", path)) == json.loads(applied)
    tool("apply", "-f", "-", input=_configmap(ns, {"a": "2"}))
    assert json.loads(tool("get", "cm", "m", "-n", ns, "-o", "jsonpath={.data}")) == {"a": "2"}


def test_api_resources_and_get_all(kubectl: Kubectl, ns: str, widgets: str) -> None:
    resources = kubectl("api-resources")
    rows = {line.split()[0]: line.split() for line in resources.splitlines()[1:]}
    assert rows["deployments"][1:] == ["deploy", "apps/v1", "true", "Deployment"]
    assert rows["widgets"][1:] == ["wdg", "kubectl.example.com/v1", "true", "Widget"]
    assert "namespaces" in kubectl("api-resources", "--namespaced=false", "-o", "name").split()
    _deployment(kubectl, ns)
    kubectl("create", "service", "clusterip", "web", "-n", ns, "--tcp=80:8080")
    everything = kubectl("get", "all", "-n", ns)
    assert "deployment.apps/web" in everything and "service/web" in everything
    assert "configmap" not in everything


DEPLOYMENT = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "web"},
    "spec": {
        "replicas": 1,
        "selector": {"matchLabels": {"app": "web"}},
        "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "web", "image": "nginx"}]},
        },
    },
}


@pytest.mark.parametrize("version", ["1.27", "1.33"])
def test_older_and_newer_kubectl_work_too(
    envtest: APIServer, kubectl: Kubectl, ns: str, version: str
) -> None:
    # ``create -f`` sends JSON (kubectl 1.33's generators send protobuf: tested below)
    other = Kubectl(kubectl_binary(f"kubectl.{version}"), kubectl.kubeconfig)
    other("create", "-n", ns, *_validate_flag(envtest), "-f", "-", input=json.dumps(DEPLOYMENT))
    assert _header(other("get", "deploy", "-n", ns))[:2] == ["NAME", "READY"]
    assert "scaled" in other("scale", "deploy", "web", "-n", ns, "--replicas=3")
    assert other("get", "deploy", "web", "-n", ns, "-o", "jsonpath={.spec.replicas}") == "3"
    other("label", "deploy", "web", "-n", ns, "skew=ok")
    assert "skew=ok" in other("describe", "deploy", "web", "-n", ns)
    other("delete", "deploy", "web", "-n", ns)


#: ``kubectl create ...`` of kubectl 1.33, which sends protobuf; the object it makes, and what
#: that object holds (paths into it): fields Go leaves at zero are not in it, as on a real server
GENERATORS: list[tuple[list[str], str, dict[str, object]]] = [
    (
        ["configmap", "cfg", "--from-literal=a=b", "--from-literal=empty="],
        "configmap/cfg",
        {"data": {"a": "b", "empty": ""}},
    ),
    (
        ["secret", "generic", "sec", "--from-literal=a=b"],
        "secret/sec",
        {"data": {"a": "Yg=="}, "type": "Opaque"},
    ),
    (
        ["deployment", "web", "--image=nginx", "--replicas=0", "--port=80"],
        "deployment/web",
        {
            "spec.replicas": 0,
            "spec.template.spec.containers": [
                {
                    "name": "nginx",
                    "image": "nginx",
                    "ports": [{"containerPort": 80, "protocol": "TCP"}],
                    # kube-apiserver's defaults
                    "imagePullPolicy": "Always",
                    "resources": {},
                    "terminationMessagePath": "/dev/termination-log",
                    "terminationMessagePolicy": "File",
                }
            ],
        },
    ),
    (
        ["service", "clusterip", "svc", "--tcp=80:8080"],
        "service/svc",
        {"spec.ports": [{"name": "80-8080", "port": 80, "protocol": "TCP", "targetPort": 8080}]},
    ),
    (
        ["job", "batch", "--image=busybox"],
        "job/batch",
        {"spec.template.spec.restartPolicy": "Never"},
    ),
    (
        ["cronjob", "nightly", "--image=busybox", "--schedule=0 3 * * *"],
        "cronjob/nightly",
        {"spec.schedule": "0 3 * * *"},
    ),
    (
        ["role", "reader", "--verb=get", "--resource=pods"],
        "role/reader",
        {"rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]},
    ),
    (
        ["rolebinding", "readers", "--role=reader", "--user=ann"],
        "rolebinding/readers",
        {
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "ann"}],
        },
    ),
    (
        ["ingress", "site", "--rule=a.example/=svc:80"],
        "ingress/site",
        {"spec.rules.0.http.paths.0.backend.service": {"name": "svc", "port": {"number": 80}}},
    ),
    (["serviceaccount", "robot"], "serviceaccount/robot", {"metadata.name": "robot"}),
    (
        ["poddisruptionbudget", "pdb", "--selector=app=web", "--min-available=1"],
        "poddisruptionbudget/pdb",
        {"spec.minAvailable": 1, "spec.selector": {"matchLabels": {"app": "web"}}},
    ),
    (["quota", "q", "--hard=pods=2,limits.cpu=2"], "resourcequota/q", {"spec.hard.pods": "2"}),
]


def _at(obj: object, path: str) -> object:
    for part in path.split("."):
        obj = obj[int(part)] if isinstance(obj, list) else obj[part]  # type: ignore[index]
    return obj


@pytest.mark.parametrize(
    ("args", "made", "expected"), GENERATORS, ids=[g[0][0] for g in GENERATORS]
)
def test_kubectl_133_create_sends_protobuf_and_envtest_decodes_it(
    kubectl: Kubectl, ns: str, args: list[str], made: str, expected: dict[str, object]
) -> None:
    newer = Kubectl(kubectl_binary("kubectl.1.33"), kubectl.kubeconfig)
    newer("create", *args, "-n", ns)
    obj = json.loads(kubectl("get", made, "-n", ns, "-o", "json"))
    for path, value in expected.items():
        assert _at(obj, path) == value, (path, obj)


def test_kubectl_133_creates_cluster_scoped_objects(kubectl: Kubectl, ns: str) -> None:
    newer = Kubectl(kubectl_binary("kubectl.1.33"), kubectl.kubeconfig)
    newer("create", "namespace", f"{ns}-new")
    newer("create", "clusterrole", f"{ns}-reader", "--verb=list", "--resource=nodes")
    newer("create", "priorityclass", f"{ns}-high", "--value=1000", "--description=high")
    try:
        value = kubectl("get", "priorityclass", f"{ns}-high", "-o", "jsonpath={.value}")
        assert value == "1000"
        phase = kubectl("get", "namespace", f"{ns}-new", "-o", "jsonpath={.status.phase}")
        assert phase == "Active"
        verbs = kubectl("get", "clusterrole", f"{ns}-reader", "-o", "jsonpath={.rules[0].verbs}")
        assert json.loads(verbs) == ["list"]
    finally:
        kubectl("delete", "namespace", f"{ns}-new", "--wait=false")
        kubectl("delete", "clusterrole", f"{ns}-reader")
        kubectl("delete", "priorityclass", f"{ns}-high")


#: one object of each kind envtest serves besides the workloads (kube 1.31's storage,
#: network, node and legacy core kinds), as a manifest names it
MORE_KINDS = """\
apiVersion: v1
kind: ReplicationController
metadata: {name: legacy}
spec:
  template:
    metadata: {labels: {app: legacy}}
    spec: {containers: [{name: web, image: nginx}]}
---
apiVersion: v1
kind: PodTemplate
metadata: {name: tpl}
template:
  spec: {containers: [{name: web, image: nginx}]}
---
apiVersion: apps/v1
kind: ControllerRevision
metadata: {name: rev-1}
revision: 1
data: {spec: {}}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: deny}
spec: {podSelector: {}}
---
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: NS-ic}
spec: {controller: example.com/ingress}
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: NS-sc}
provisioner: example.com/disk
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: NS-pv}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  hostPath: {path: /tmp/NS}
---
apiVersion: storage.k8s.io/v1
kind: CSIDriver
metadata: {name: NS.csi.example.com}
spec: {}
---
apiVersion: storage.k8s.io/v1
kind: CSINode
metadata: {name: NS-node}
spec: {drivers: []}
---
apiVersion: storage.k8s.io/v1
kind: VolumeAttachment
metadata: {name: NS-va}
spec:
  attacher: example.com/disk
  nodeName: NS-node
  source: {persistentVolumeName: NS-pv}
---
apiVersion: node.k8s.io/v1
kind: RuntimeClass
metadata: {name: NS-rc}
handler: runc
"""
MORE_NAMES = [
    "replicationcontroller/legacy",
    "podtemplate/tpl",
    "controllerrevision.apps/rev-1",
    "networkpolicy.networking.k8s.io/deny",
    "ingressclass.networking.k8s.io/NS-ic",
    "storageclass.storage.k8s.io/NS-sc",
    "persistentvolume/NS-pv",
    "csidriver.storage.k8s.io/NS.csi.example.com",
    "csinode.storage.k8s.io/NS-node",
    "volumeattachment.storage.k8s.io/NS-va",
    "runtimeclass.node.k8s.io/NS-rc",
]
MORE_PLURALS = [
    "replicationcontrollers", "podtemplates", "controllerrevisions", "networkpolicies",
    "ingressclasses", "storageclasses", "persistentvolumes", "csidrivers", "csinodes",
    "volumeattachments", "runtimeclasses",
]  # fmt: skip


@pytest.mark.parametrize("version", ["1.31", "1.33"])
def test_kubectl_creates_and_deletes_the_storage_network_and_legacy_kinds(
    envtest: APIServer, kubectl: Kubectl, ns: str, version: str
) -> None:
    other = Kubectl(kubectl_binary(f"kubectl.{version}"), kubectl.kubeconfig)
    manifest = MORE_KINDS.replace("NS", ns)
    names = [n.replace("NS", ns) for n in MORE_NAMES]
    out = other("create", "-n", ns, *_validate_flag(envtest), "-f", "-", input=manifest)
    assert [line.split()[0] for line in out.splitlines()] == names
    try:
        got = other("get", *names, "-n", ns, "-o", "name").split()
        assert got == names
        resources = {line.split()[0] for line in other("api-resources").splitlines()[1:]}
        assert set(MORE_PLURALS) <= resources
        everything = other("get", "all", "-n", ns, "-o", "name").split()
        assert "replicationcontroller/legacy" in everything
    finally:
        other("delete", "-n", ns, "--wait=false", "-f", "-", input=manifest)
    assert other.run("get", names[-1], check=False).returncode != 0


def test_delete_with_server_dry_run_keeps_the_object(kubectl: Kubectl, ns: str) -> None:
    kubectl("create", "configmap", "keep", "-n", ns, "--from-literal=a=b")
    out = kubectl("delete", "configmap", "keep", "-n", ns, "--dry-run=server")
    assert "(server dry run)" in out
    assert kubectl("get", "configmap", "keep", "-n", ns, "-o", "jsonpath={.data.a}") == "b"


def test_auth_whoami_and_can_i(
    envtest: APIServer, kubectl: Kubectl, ns: str, tmp_path: pathlib.Path
) -> None:
    who = kubectl("auth", "whoami", "-o", "json")
    info = json.loads(who)["status"]["userInfo"]
    assert "system:authenticated" in info["groups"] and info["username"]
    assert kubectl("auth", "can-i", "create", "configmaps", "-n", ns).strip() == "yes"

    path = tmp_path / "read-only"
    path.write_text(yaml.safe_dump(envtest.kubeconfig(read_only=True)))
    reader = Kubectl(kubectl.binary, path)
    assert reader("auth", "can-i", "list", "configmaps", "-n", ns).strip() == "yes"
    denied = reader.run("auth", "can-i", "create", "configmaps", "-n", ns, check=False)
    assert denied.returncode == 1 and denied.stdout.startswith("no")


def test_as_impersonates_and_view_is_there_to_bind(kubectl: Kubectl, ns: str) -> None:
    """``--as`` checks what a controller's service account may do before it runs; the
    bootstrap ``view`` role is what a read-only controller is bound to."""
    who = json.loads(kubectl("auth", "whoami", "--as=jane", "--as-group=devs", "-o", "json"))
    assert who["status"]["userInfo"] == {
        "username": "jane",
        "groups": ["devs", "system:authenticated"],
    }
    robot = f"--as=system:serviceaccount:{ns}:robot"
    can_i = kubectl.run("auth", "can-i", "list", "configmaps", "-n", ns, robot, check=False)
    assert (can_i.returncode, can_i.stdout.strip()) == (1, "no")
    denied = kubectl.run("get", "configmaps", "-n", ns, robot, check=False)
    assert f'User "system:serviceaccount:{ns}:robot" cannot list' in denied.stderr
    kubectl(
        "create", "rolebinding", "robot-view", "--clusterrole=view",
        f"--serviceaccount={ns}:robot", "-n", ns,
    )  # fmt: skip
    assert kubectl("auth", "can-i", "list", "configmaps", "-n", ns, robot).strip() == "yes"
    assert kubectl.run("auth", "can-i", "get", "secrets", "-n", ns, robot, check=False).returncode
    kubectl("get", "configmaps", "-n", ns, robot)


@pytest.mark.parametrize("binary", ["kubectl", "kubectl.1.33"])
def test_create_token_and_rbac_for_a_service_account(
    envtest: APIServer, kubectl: Kubectl, ns: str, tmp_path: pathlib.Path, binary: str
) -> None:
    # kubectl 1.33 sends the TokenRequest in protobuf, the older one in JSON
    admin = Kubectl(kubectl_binary(binary), kubectl.kubeconfig)
    admin("create", "serviceaccount", "robot", "-n", ns)
    token = admin("create", "token", "robot", "-n", ns, "--duration", "20m").strip()
    config = envtest.kubeconfig()
    config["users"][0]["user"] = {"token": token}
    path = tmp_path / "robot"
    path.write_text(yaml.safe_dump(config))
    robot = Kubectl(kubectl_binary(binary), path)

    info = json.loads(robot("auth", "whoami", "-o", "json"))["status"]["userInfo"]
    assert info["username"] == f"system:serviceaccount:{ns}:robot"
    denied = robot.run("get", "configmaps", "-n", ns, check=False)
    assert denied.returncode == 1
    assert f'User "system:serviceaccount:{ns}:robot" cannot list resource "configmaps"' in (
        denied.stderr
    )
    assert robot.run("auth", "can-i", "list", "configmaps", "-n", ns, check=False).returncode == 1

    admin("create", "role", "reader", "--verb=get,list", "--resource=configmaps", "-n", ns)
    admin(
        "create", "rolebinding", "robot", "--role=reader", f"--serviceaccount={ns}:robot", "-n", ns
    )
    assert robot("auth", "can-i", "list", "configmaps", "-n", ns).strip() == "yes"
    rows = robot("auth", "can-i", "--list", "-n", ns).splitlines()
    verbs = {row.split()[0]: row.split("[]")[-1].strip() for row in rows if row.strip()}
    assert verbs["configmaps"] == "[get list]" and "secrets" not in verbs
    assert "kube-root-ca.crt" in robot("get", "configmaps", "-n", ns, "-o", "name")
    assert (
        robot.run("delete", "configmap", "kube-root-ca.crt", "-n", ns, check=False).returncode == 1
    )


@pytest.mark.parametrize(("binary", "version"), [("kubectl", "v1"), ("kubectl.1.33", "v2")])
def test_autoscale_through_either_hpa_version(
    kubectl: Kubectl, ns: str, binary: str, version: str
) -> None:
    # kubectl 1.33 creates autoscaling/v2 HPAs, older ones autoscaling/v1: one object either way
    tool = Kubectl(kubectl_binary(binary), kubectl.kubeconfig)
    _deployment(kubectl, ns)
    tool("autoscale", "deployment", "web", "--max=4", "--cpu-percent=60", "-n", ns)
    for resource in ("hpa", "horizontalpodautoscalers.v1.autoscaling"):
        rows = _rows(kubectl("get", resource, "-n", ns))
        assert rows["web"][1:6] == ["Deployment/web", "cpu:", "<unknown>/60%", "1", "4"], rows
    v1 = json.loads(
        kubectl("get", "horizontalpodautoscalers.v1.autoscaling", "web", "-n", ns, "-o", "json")
    )
    assert v1["spec"]["targetCPUUtilizationPercentage"] == 60
    v2 = json.loads(
        kubectl("get", "horizontalpodautoscalers.v2.autoscaling", "web", "-n", ns, "-o", "json")
    )
    assert v2["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"] == 60, version


@pytest.mark.parametrize("binary", ["kubectl", "kubectl.1.33"])
def test_certificate_approve_issues_a_client_certificate_that_logs_in(
    envtest: APIServer, kubectl: Kubectl, ns: str, tmp_path: pathlib.Path, binary: str
) -> None:
    # kubectl 1.33 sends the approval in protobuf, the older one in JSON
    import base64

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    admin = Kubectl(kubectl_binary(binary), kubectl.kubeconfig)
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, f"{ns}-devs"),
            x509.NameAttribute(NameOID.COMMON_NAME, f"{ns}-jane"),
        ]
    )
    request = (
        x509.CertificateSigningRequestBuilder().subject_name(subject).sign(key, hashes.SHA256())
    )
    pem = base64.b64encode(request.public_bytes(serialization.Encoding.PEM)).decode()
    manifest = {
        "apiVersion": "certificates.k8s.io/v1",
        "kind": "CertificateSigningRequest",
        "metadata": {"name": f"{ns}-jane"},
        "spec": {
            "request": pem,
            "signerName": "kubernetes.io/kube-apiserver-client",
            "usages": ["client auth"],
            "expirationSeconds": 86400,
        },
    }
    denied = {**manifest, "metadata": {"name": f"{ns}-denied"}}
    admin("create", "-f", "-", input=yaml.safe_dump_all([manifest, denied]))
    try:
        row = _rows(admin("get", "csr", f"{ns}-jane"))[f"{ns}-jane"]
        assert row[2:] == [
            "kubernetes.io/kube-apiserver-client",
            "kubernetes-admin",
            "24h",
            "Pending",
        ]
        admin("certificate", "approve", f"{ns}-jane")
        admin("certificate", "deny", f"{ns}-denied")
        rows = _rows(admin("get", "csr", f"{ns}-jane", f"{ns}-denied"))
        assert rows[f"{ns}-jane"][-1] == "Approved,Issued"
        assert rows[f"{ns}-denied"][-1] == "Denied"

        cert = admin("get", "csr", f"{ns}-jane", "-o", "jsonpath={.status.certificate}")
        key_pem = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        config = envtest.kubeconfig()
        config["users"][0]["user"] = {
            "client-certificate-data": cert,
            "client-key-data": base64.b64encode(key_pem).decode(),
        }
        path = tmp_path / "jane"
        path.write_text(yaml.safe_dump(config))
        jane = Kubectl(kubectl_binary(binary), path)
        info = json.loads(jane("auth", "whoami", "-o", "json"))["status"]["userInfo"]
        assert info["username"] == f"{ns}-jane" and f"{ns}-devs" in info["groups"]
        refused = jane.run("get", "configmaps", "-n", ns, check=False)
        assert f'User "{ns}-jane" cannot list resource "configmaps"' in refused.stderr
    finally:
        admin("delete", "csr", f"{ns}-jane", f"{ns}-denied")


class _Node:
    """A node of the test's own and pods on it, made in-process; the pods' status is what
    their kubelet would write (Running and Ready), so their budgets apply to them. The drain
    tests use a token kubeconfig of their own: a drain does the same with a certificate."""

    def __init__(self, envtest: APIServer, ns: str) -> None:
        from kubernetes import client, config

        self.ns, self.name = ns, f"{ns}-node"
        self.api = config.new_client_from_config_dict(envtest.kubeconfig())
        self.core = client.CoreV1Api(self.api)
        self.apps = client.AppsV1Api(self.api)
        self.policy = client.PolicyV1Api(self.api)
        self.core.create_node({"metadata": {"name": self.name}})
        template = {
            "metadata": {"labels": {"app": "web"}},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]},
        }
        spec = {"selector": {"matchLabels": {"app": "web"}}, "template": template}
        # as JSON: the typed models want the status fields a controller would have written
        rs = self.apps.create_namespaced_replica_set(
            ns, {"metadata": {"name": "web"}, "spec": spec}, _preload_content=False
        )
        ds = self.apps.create_namespaced_daemon_set(
            ns, {"metadata": {"name": "agent"}, "spec": spec}, _preload_content=False
        )
        self.owners = {
            kind: [
                {
                    "apiVersion": "apps/v1",
                    "kind": kind,
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                }
            ]
            for kind, meta in (
                ("ReplicaSet", json.loads(rs.data)["metadata"]),
                ("DaemonSet", json.loads(ds.data)["metadata"]),
            )
        }

    def pod(
        self, name: str, labels: dict[str, str], owner: str = "ReplicaSet", **spec: object
    ) -> None:
        meta = {"name": name, "labels": labels, "ownerReferences": self.owners[owner]}
        spec = {"nodeName": self.name, "containers": [{"name": "c", "image": "nginx"}], **spec}
        self.core.create_namespaced_pod(self.ns, {"metadata": meta, "spec": spec})
        ready = {"type": "Ready", "status": "True"}
        status = {"phase": "Running", "conditions": [ready]}
        self.core.patch_namespaced_pod_status(name, self.ns, {"status": status})

    def budget(self, name: str, app: str, allowed: int, healthy: int) -> None:
        spec = {"minAvailable": healthy - allowed, "selector": {"matchLabels": {"app": app}}}
        self.policy.create_namespaced_pod_disruption_budget(
            self.ns, {"metadata": {"name": name}, "spec": spec}
        )
        # what the disruption controller of a real cluster would write (envtest runs none)
        status = {
            "observedGeneration": 1,
            "disruptionsAllowed": allowed,
            "currentHealthy": healthy,
            "desiredHealthy": healthy - allowed,
            "expectedPods": healthy,
        }
        self.policy.patch_namespaced_pod_disruption_budget_status(name, self.ns, {"status": status})

    def pods(self) -> list[str]:
        listed = self.core.list_namespaced_pod(self.ns, field_selector=f"spec.nodeName={self.name}")
        return sorted(p.metadata.name for p in listed.items)

    def unschedulable(self) -> bool:
        return bool(self.core.read_node(self.name).spec.unschedulable)

    def close(self) -> None:
        self.core.delete_node(self.name)
        self.api.close()


@pytest.fixture
def node(envtest: APIServer, ns: str) -> Iterator[_Node]:
    made = _Node(envtest, ns)
    try:
        yield made
    finally:
        made.close()


@pytest.mark.parametrize("binary", ["kubectl", "kubectl.1.33"])
def test_drain_cordons_the_node_and_evicts_its_pods(
    envtest: APIServer, node: _Node, tmp_path: pathlib.Path, binary: str
) -> None:
    # both send their Evictions as JSON (a protobuf one, as client-go clientsets send it, is
    # in tests/conformance/test_eviction.py); each checks discovery for pods/eviction first
    admin = Kubectl(kubectl_binary(binary), envtest.write_kubeconfig(tmp_path / "config"))
    node.pod("web-1", {"app": "web"})
    node.pod("web-2", {"app": "web"})
    node.pod("cache", {"app": "cache"}, volumes=[{"name": "tmp", "emptyDir": {}}])
    node.pod("agent", {"app": "agent"}, owner="DaemonSet")
    node.budget("web", "web", allowed=2, healthy=2)
    out = admin.run(
        "drain", node.name, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=30s"
    )
    assert f"node/{node.name} cordoned" in out.stdout
    for name in ("web-1", "web-2", "cache"):
        assert f"pod/{name} evicted" in out.stdout
    assert f"node/{node.name} drained" in out.stdout
    assert "ignoring DaemonSet-managed Pods" in out.stderr
    assert node.unschedulable()
    assert node.pods() == ["agent"]  # the DaemonSet's pod stays
    pdb = node.policy.read_namespaced_pod_disruption_budget("web", node.ns).status
    assert pdb.disruptions_allowed == 0 and sorted(pdb.disrupted_pods) == ["web-1", "web-2"]
    assert f"node/{node.name} uncordoned" in admin("uncordon", node.name)
    assert not node.unschedulable()


def test_drain_is_refused_by_a_budget_allowing_no_disruption(
    envtest: APIServer, node: _Node, tmp_path: pathlib.Path
) -> None:
    # kubectl retries a refused eviction every 5 s until its --timeout: with 1 s, it asks once
    admin = Kubectl(kubectl_binary("kubectl.1.33"), envtest.write_kubeconfig(tmp_path / "config"))
    node.pod("db-0", {"app": "db"})
    node.pod("web-1", {"app": "web"})
    node.budget("db", "db", allowed=0, healthy=1)
    out = admin.run(
        "drain", node.name, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=1s",
        check=False,
    )  # fmt: skip
    assert out.returncode != 0, out.stdout
    assert (
        f'error when evicting pods/"db-0" -n "{node.ns}" (will retry after 5s): '
        "Cannot evict pod as it would violate the pod's disruption budget."
    ) in out.stderr
    assert "global timeout reached: 1s" in out.stderr
    assert "pod/web-1 evicted" in out.stdout
    assert node.unschedulable()
    assert node.pods() == ["db-0"]
    admin("uncordon", node.name)
    assert not node.unschedulable()


def _lines(out: str) -> list[list[str]]:
    return [line.split() for line in out.strip().splitlines()]


def test_get_shows_the_kubernetes_service_its_endpoints_and_their_columns(
    kubectl: Kubectl, envtest: APIServer
) -> None:
    # what kube-apiserver keeps in default: the Service in-cluster clients resolve
    svc = _lines(kubectl("get", "service", "kubernetes", "-n", "default"))
    assert svc[1][:5] == ["kubernetes", "ClusterIP", "10.96.0.1", "<none>", "443/TCP"]
    ep = _lines(kubectl("get", "endpoints", "kubernetes", "-n", "default"))
    assert ep[0] == ["NAME", "ENDPOINTS", "AGE"]
    assert ep[1][:2] == ["kubernetes", f"127.0.0.1:{envtest.port}"]
    es = _lines(kubectl("get", "endpointslices", "-n", "default"))
    assert es[0] == ["NAME", "ADDRESSTYPE", "PORTS", "ENDPOINTS", "AGE"]
    assert es[1][:4] == ["kubernetes", "IPv4", str(envtest.port), "127.0.0.1"]
