"""The real ``kubectl`` against envtest: apply (client- and server-side), create, edit, explain.

These need the OpenAPI documents (client-side validation, ``explain``, patch
metadata) and server-side apply. They skip when no ``kubectl`` is installed.
"""

from __future__ import annotations

import http.client
import os
import shutil
import stat
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from mcruntime.envtest import APIServer, wait_for

pytestmark = pytest.mark.timeout(60)

KUBECTL = shutil.which("kubectl")
if KUBECTL is None:  # pragma: no cover - depends on the machine
    pytest.skip("no kubectl binary on PATH", allow_module_level=True)

_HOP = frozenset({"connection", "keep-alive", "transfer-encoding", "host", "content-length"})


class _AuthProxy(ThreadingHTTPServer):
    """Adds the server's bearer token to plain-HTTP requests (kubectl sends tokens over
    HTTPS only); used only while envtest serves plain HTTP."""

    daemon_threads = True

    def __init__(self, target: str, token: str) -> None:
        super().__init__(("127.0.0.1", 0), _ProxyHandler)
        parts = urlsplit(target)
        self.target = (parts.hostname or "127.0.0.1", parts.port or 80)
        self.token = token


class _ProxyHandler(BaseHTTPRequestHandler):
    server: _AuthProxy
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _forward(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else None
        headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
        headers["Authorization"] = f"Bearer {self.server.token}"
        conn = http.client.HTTPConnection(*self.server.target, timeout=30)
        try:
            conn.request(self.command, self.path, body=body, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
        finally:
            conn.close()
        self.send_response(resp.status)
        for k, v in resp.getheaders():
            if k.lower() not in _HOP:
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _forward


class Kubectl:
    """Runs kubectl with ``--kubeconfig`` only."""

    def __init__(self, kubeconfig: Path, tmp: Path) -> None:
        self.kubeconfig = kubeconfig
        self.tmp = tmp

    def __call__(
        self,
        *args: str,
        stdin: str | None = None,
        check: bool = True,
        env: dict[str, str] | None = None,
    ) -> subprocess.CompletedProcess[str]:
        cmd = [str(KUBECTL), "--kubeconfig", str(self.kubeconfig), *args]
        proc = subprocess.run(
            cmd,
            input=stdin,
            capture_output=True,
            text=True,
            timeout=45,
            env={**os.environ, "KUBECACHEDIR": str(self.tmp / "cache"), **(env or {})},
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"{' '.join(args)} failed ({proc.returncode}):\n{proc.stderr}")
        return proc

    def get(self, *args: str) -> Any:
        return yaml.safe_load(self("get", "-o", "yaml", *args).stdout)

    def file(self, name: str, text: str) -> str:
        path = self.tmp / name
        path.write_text(textwrap.dedent(text))
        return str(path)


@pytest.fixture(scope="module")
def kubectl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kubectl]:
    tmp = tmp_path_factory.mktemp("kubectl")
    server = APIServer("kubectl").start()
    proxy: _AuthProxy | None = None
    try:
        config = server.kubeconfig()
        cluster = config["clusters"][0]["cluster"]
        if cluster["server"].startswith("http://"):
            proxy = _AuthProxy(cluster["server"], server.token)
            threading.Thread(
                target=proxy.serve_forever, name="mcruntime/test-proxy/kubectl", daemon=True
            ).start()
            cluster["server"] = f"http://127.0.0.1:{proxy.server_address[1]}"
            config["users"][0]["user"] = {}
        path = tmp / "kubeconfig"
        path.write_text(yaml.safe_dump(config))
        yield Kubectl(path, tmp)
    finally:
        if proxy is not None:
            proxy.shutdown()
            proxy.server_close()
        server.close()


DEPLOYMENT = """\
    apiVersion: apps/v1
    kind: Deployment
    metadata:
      name: {name}
      namespace: default
      labels:
        app: {name}
    spec:
      replicas: 2
      selector:
        matchLabels:
          app: {name}
      template:
        metadata:
          labels:
            app: {name}
        spec:
          containers:
          - name: web
            image: nginx:1.27
            ports:
            - containerPort: 80
    """

GIZMO_CRD = """\
    apiVersion: apiextensions.k8s.io/v1
    kind: CustomResourceDefinition
    metadata:
      name: gizmos.kubectl.mcruntime.io
    spec:
      group: kubectl.mcruntime.io
      scope: Namespaced
      names: {plural: gizmos, singular: gizmo, kind: Gizmo}
      versions:
      - name: v1
        served: true
        storage: true
        schema:
          openAPIV3Schema:
            type: object
            description: A gizmo for the kubectl tests.
            properties:
              spec:
                type: object
                description: What the gizmo should be.
                properties:
                  size:
                    type: integer
                    description: How big the gizmo is.
    """


@pytest.fixture(scope="module")
def gizmo_crd(kubectl: Kubectl) -> str:
    kubectl("apply", "-f", kubectl.file("crd.yaml", GIZMO_CRD))
    established = '{.status.conditions[?(@.type=="Established")].status}'
    wait_for(
        lambda: (
            kubectl(
                "get", "crd/gizmos.kubectl.mcruntime.io", "-o", f"jsonpath={established}"
            ).stdout
            == "True"
        ),
        timeout=20,
        interval=0.1,
        what="the CRD to be Established",
    )
    return "gizmos.kubectl.mcruntime.io"


def test_create_validates_against_the_openapi_schema(kubectl: Kubectl) -> None:
    good = kubectl.file("good.yaml", DEPLOYMENT.format(name="created"))
    kubectl("create", "-f", good)
    assert kubectl.get("deployment", "created", "-n", "default")["spec"]["replicas"] == 2
    bad = DEPLOYMENT.format(name="typo").replace("replicas: 2", "replicas: 2\n      replicaz: 3")
    proc = kubectl("create", "-f", kubectl.file("bad.yaml", bad), check=False)
    assert proc.returncode != 0
    assert 'unknown field "replicaz"' in proc.stderr or "replicaz" in proc.stderr, proc.stderr
    assert kubectl("get", "deployment", "typo", "-n", "default", check=False).returncode != 0


def test_client_side_apply_removes_a_field_dropped_from_the_file(kubectl: Kubectl) -> None:
    text = DEPLOYMENT.format(name="csa").replace(
        "  labels:\n        app: csa\n", "  labels:\n        app: csa\n        tier: web\n"
    )
    kubectl("apply", "-f", kubectl.file("csa.yaml", text))
    obj = kubectl.get("deployment", "csa", "-n", "default")
    assert obj["metadata"]["labels"] == {"app": "csa", "tier": "web"}
    assert "kubectl.kubernetes.io/last-applied-configuration" in obj["metadata"]["annotations"]
    kubectl("apply", "-f", kubectl.file("csa.yaml", DEPLOYMENT.format(name="csa")))
    obj = kubectl.get("deployment", "csa", "-n", "default")
    assert obj["metadata"]["labels"] == {"app": "csa"}
    assert [c["name"] for c in obj["spec"]["template"]["spec"]["containers"]] == ["web"]


def test_server_side_apply_conflicts_and_force_conflicts(kubectl: Kubectl) -> None:
    path = kubectl.file("ssa.yaml", DEPLOYMENT.format(name="ssa"))
    kubectl("apply", "--server-side", "--field-manager=team-a", "-f", path)
    changed = kubectl.file(
        "ssa-b.yaml", DEPLOYMENT.format(name="ssa").replace("replicas: 2", "replicas: 5")
    )
    proc = kubectl("apply", "--server-side", "--field-manager=team-b", "-f", changed, check=False)
    assert proc.returncode != 0
    assert "conflict" in proc.stderr and "team-a" in proc.stderr and ".spec.replicas" in proc.stderr
    kubectl("apply", "--server-side", "--field-manager=team-b", "--force-conflicts", "-f", changed)
    obj = kubectl.get("deployment", "ssa", "-n", "default", "--show-managed-fields")
    assert obj["spec"]["replicas"] == 5
    managers = {e["manager"]: e for e in obj["metadata"]["managedFields"]}
    assert "f:replicas" in managers["team-b"]["fieldsV1"]["f:spec"]
    assert "f:replicas" not in managers["team-a"]["fieldsV1"]["f:spec"]


def test_edit_through_editor(kubectl: Kubectl) -> None:
    cm = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: edited, namespace: default}\ndata: {color: red}\n"
    kubectl("create", "-f", kubectl.file("edited.yaml", cm))
    editor = kubectl.tmp / "editor.py"
    editor.write_text(
        "import sys\n"
        "p = sys.argv[-1]\n"
        "text = open(p).read().replace('color: red', 'color: blue')\n"
        "open(p, 'w').write(text)\n"
    )
    editor.chmod(editor.stat().st_mode | stat.S_IEXEC)
    kubectl(
        "edit",
        "configmap",
        "edited",
        "-n",
        "default",
        env={"EDITOR": f"{sys.executable} {editor}", "KUBE_EDITOR": f"{sys.executable} {editor}"},
    )
    assert kubectl.get("configmap", "edited", "-n", "default")["data"] == {"color": "blue"}


def test_explain_a_built_in_field(kubectl: Kubectl) -> None:
    out = kubectl("explain", "deployment.spec.replicas").stdout
    assert "replicas" in out and "integer" in out
    assert "Number of desired pods" in out


def test_explain_a_custom_resource(kubectl: Kubectl, gizmo_crd: str) -> None:
    out = kubectl("explain", "gizmos.spec").stdout
    assert "What the gizmo should be." in out
    assert "size" in out and "How big the gizmo is." in out


def test_explain_a_custom_resource_describes_its_type_and_object_metadata(
    kubectl: Kubectl, gizmo_crd: str
) -> None:
    # as kube-apiserver publishes every CRD: TypeMeta's apiVersion and kind, ObjectMeta described
    out = kubectl("explain", "gizmos").stdout
    fields = " ".join(out.split("FIELDS:", 1)[1].split())  # kubectl wraps the descriptions
    assert "APIVersion defines the versioned schema of this representation of an object" in fields
    assert "Kind is a string value representing the REST resource this object represents" in fields
    assert "Standard object's metadata. More info:" in fields, out
    assert "<no description>" not in fields.split("spec", 1)[0], out
    meta = " ".join(kubectl("explain", "gizmos.metadata.name").stdout.split())
    assert "Name must be unique within a namespace" in meta, meta


def test_create_validates_a_custom_resource(kubectl: Kubectl, gizmo_crd: str) -> None:
    good = "apiVersion: kubectl.mcruntime.io/v1\nkind: Gizmo\nmetadata: {name: g1, namespace: default}\nspec: {size: 3}\n"
    kubectl("create", "-f", kubectl.file("g1.yaml", good))
    bad = good.replace("g1", "g2").replace("size: 3", "size: 3, colour: red")
    proc = kubectl("create", "-f", kubectl.file("g2.yaml", bad), check=False)
    # kubectl leaves custom resources to the server's strict field validation, as with
    # kube-apiserver: the server's words
    assert proc.returncode != 0
    assert (
        'Gizmo in version "v1" cannot be handled as a Gizmo: strict decoding error: '
        'unknown field "spec.colour"' in proc.stderr
    ), proc.stderr
    # --validate=warn: created without the field, and the server's warning printed
    warned = kubectl("create", "-f", kubectl.file("g2.yaml", bad), "--validate=warn", check=False)
    assert warned.returncode == 0, warned.stderr
    assert 'Warning: unknown field "spec.colour"' in warned.stderr


DEPRECATED_CRD = """\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: sprockets.kubectl.mcruntime.io}
spec:
  group: kubectl.mcruntime.io
  names: {plural: sprockets, singular: sprocket, kind: Sprocket}
  scope: Namespaced
  versions:
  - {name: v2, served: true, storage: true, schema: {openAPIV3Schema: {type: object}}}
  - {name: v1, served: true, storage: false, deprecated: true,
     schema: {openAPIV3Schema: {type: object}}}
"""


def test_a_deprecated_version_prints_the_servers_warning(kubectl: Kubectl) -> None:
    kubectl("apply", "-f", kubectl.file("sprockets.yaml", DEPRECATED_CRD))
    wait_for(
        lambda: kubectl("get", "sprockets.v1.kubectl.mcruntime.io", check=False).returncode == 0,
        timeout=20,
        interval=0.1,
        what="the CRD served",
    )
    proc = kubectl("get", "sprockets.v1.kubectl.mcruntime.io", "-n", "default")
    assert (
        "Warning: kubectl.mcruntime.io/v1 Sprocket is deprecated; use kubectl.mcruntime.io/v2 "
        "Sprocket" in proc.stderr
    ), proc.stderr
    assert "Warning" not in kubectl("get", "sprockets.v2.kubectl.mcruntime.io").stderr


PRUNE_SET = """\
    apiVersion: v1
    kind: ConfigMap
    metadata: {{name: keep, namespace: {ns}, labels: {{set: prune}}}}
    data: {{a: b}}
    {dropped}"""
DROPPED = """---
    apiVersion: v1
    kind: ConfigMap
    metadata: {{name: dropped, namespace: {ns}, labels: {{set: prune}}}}
    data: {{a: b}}
    """


def test_apply_prune_with_kubectls_default_allowlist(kubectl: Kubectl) -> None:
    # kubectl's default allowlist names ReplicationControllers and PersistentVolumes among
    # others: it resolves each through discovery before it prunes anything
    ns = "prune"
    kubectl("create", "namespace", ns)
    both = PRUNE_SET.format(ns=ns, dropped=DROPPED.format(ns=ns))
    kubectl("apply", "-f", kubectl.file("both.yaml", both), "-l", "set=prune", "--prune")
    names = kubectl("get", "configmaps", "-n", ns, "-l", "set=prune", "-o", "name").stdout
    assert names.split() == ["configmap/dropped", "configmap/keep"]
    one = PRUNE_SET.format(ns=ns, dropped="")
    proc = kubectl("apply", "-f", kubectl.file("one.yaml", one), "-l", "set=prune", "--prune")
    assert "configmap/dropped pruned" in proc.stdout, proc.stdout
    names = kubectl("get", "configmaps", "-n", ns, "-l", "set=prune", "-o", "name").stdout
    assert names.split() == ["configmap/keep"]


STORAGE_AND_NETWORK = """\
    apiVersion: storage.k8s.io/v1
    kind: StorageClass
    metadata:
      name: fast
      annotations: {storageclass.kubernetes.io/is-default-class: "true"}
    provisioner: example.com/disk
    allowVolumeExpansion: true
    ---
    apiVersion: v1
    kind: PersistentVolume
    metadata: {name: data}
    spec:
      capacity: {storage: 5Gi}
      accessModes: [ReadWriteOnce, ReadOnlyMany]
      storageClassName: fast
      hostPath: {path: /tmp/data}
      claimRef: {namespace: default, name: data-claim}
    ---
    apiVersion: networking.k8s.io/v1
    kind: NetworkPolicy
    metadata: {name: web-only, namespace: default}
    spec:
      podSelector: {matchLabels: {app: web}}
    ---
    apiVersion: networking.k8s.io/v1
    kind: IngressClass
    metadata: {name: nginx}
    spec:
      controller: k8s.io/ingress-nginx
      parameters: {apiGroup: k8s.example.com, kind: IngressParameters, name: external-lb}
    """


def _table(out: str) -> list[list[str]]:
    return [line.split() for line in out.strip().splitlines()]


def test_get_prints_kube_apiservers_columns_for_storage_and_network_kinds(
    kubectl: Kubectl,
) -> None:
    kubectl("apply", "-f", kubectl.file("storage.yaml", STORAGE_AND_NETWORK))
    sc = _table(kubectl("get", "storageclass").stdout)
    assert sc[0] == [
        "NAME", "PROVISIONER", "RECLAIMPOLICY", "VOLUMEBINDINGMODE", "ALLOWVOLUMEEXPANSION", "AGE",
    ]  # fmt: skip
    assert sc[1][:6] == ["fast", "(default)", "example.com/disk", "Delete", "Immediate", "true"]
    pv = _table(kubectl("get", "pv").stdout)
    assert pv[0] == [
        "NAME", "CAPACITY", "ACCESS", "MODES", "RECLAIM", "POLICY", "STATUS", "CLAIM",
        "STORAGECLASS", "VOLUMEATTRIBUTESCLASS", "REASON", "AGE",
    ]  # fmt: skip
    assert pv[1][:8] == [
        "data", "5Gi", "RWO,ROX", "Retain", "Pending", "default/data-claim", "fast", "<unset>",
    ]  # fmt: skip
    netpol = _table(kubectl("get", "netpol", "-n", "default").stdout)
    assert netpol[0] == ["NAME", "POD-SELECTOR", "AGE"]
    assert netpol[1][:2] == ["web-only", "app=web"]
    ic = _table(kubectl("get", "ingressclass").stdout)
    assert ic[0] == ["NAME", "CONTROLLER", "PARAMETERS", "AGE"]
    assert ic[1][:3] == [
        "nginx", "k8s.io/ingress-nginx", "IngressParameters.k8s.example.com/external-lb",
    ]  # fmt: skip
    # one request for several kinds, as operators' runbooks do
    both = kubectl("get", "storageclass,pv,netpol,ingressclass", "-n", "default").stdout
    for name in ("storageclass.storage.k8s.io/fast", "persistentvolume/data"):
        assert name in both
    assert "networkpolicy.networking.k8s.io/web-only" in both
    assert "ingressclass.networking.k8s.io/nginx" in both


def test_explain_and_validate_a_storage_class(kubectl: Kubectl) -> None:
    out = kubectl("explain", "storageclass.volumeBindingMode").stdout
    assert "volumeBindingMode" in out and "string" in out
    bad = "apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {name: typo}\nprovisioner: x\nreclaimPolicee: Delete\n"
    proc = kubectl("create", "-f", kubectl.file("bad-sc.yaml", bad), check=False)
    assert proc.returncode != 0
    assert 'unknown field "reclaimPolicee"' in proc.stderr, proc.stderr


def test_scale_a_replication_controller(kubectl: Kubectl) -> None:
    rc = """\
        apiVersion: v1
        kind: ReplicationController
        metadata: {name: legacy, namespace: default}
        spec:
          template:
            metadata: {labels: {app: legacy}}
            spec:
              containers: [{name: web, image: nginx:1.27}]
        """
    kubectl("apply", "-f", kubectl.file("rc.yaml", rc))
    assert "scaled" in kubectl("scale", "rc", "legacy", "-n", "default", "--replicas=3").stdout
    table = _table(kubectl("get", "rc", "legacy", "-n", "default", "-o", "wide").stdout)
    assert table[0] == [
        "NAME", "DESIRED", "CURRENT", "READY", "AGE", "CONTAINERS", "IMAGES", "SELECTOR",
    ]  # fmt: skip
    assert table[1][:4] == ["legacy", "3", "0", "0"]
    assert table[1][5:] == ["web", "nginx:1.27", "app=legacy"]


POLICY = """\
    apiVersion: admissionregistration.k8s.io/v1
    kind: ValidatingAdmissionPolicy
    metadata:
      name: demo-policy.example.com
    spec:
      failurePolicy: Fail
      matchConstraints:
        resourceRules:
        - apiGroups: ["apps"]
          apiVersions: ["v1"]
          operations: ["CREATE", "UPDATE"]
          resources: ["deployments"]
      validations:
      - expression: "object.spec.replicas <= 5"
    ---
    apiVersion: admissionregistration.k8s.io/v1
    kind: ValidatingAdmissionPolicyBinding
    metadata:
      name: demo-binding-test.example.com
    spec:
      policyName: demo-policy.example.com
      validationActions: [Deny]
      matchResources:
        namespaceSelector:
          matchLabels:
            kubernetes.io/metadata.name: vap
    """


def test_apply_a_validating_admission_policy_and_meet_it(kubectl: Kubectl) -> None:
    kubectl("create", "namespace", "vap")
    out = kubectl("apply", "-f", kubectl.file("policy.yaml", POLICY)).stdout
    assert (
        "validatingadmissionpolicy.admissionregistration.k8s.io/demo-policy.example.com created"
        in out
    )
    assert "demo-binding-test.example.com created" in out
    policies = _table(kubectl("get", "validatingadmissionpolicies").stdout)
    assert policies[0] == ["NAME", "VALIDATIONS", "PARAMKIND", "AGE"]
    assert policies[1][:3] == ["demo-policy.example.com", "1", "<unset>"]
    bindings = _table(kubectl("get", "validatingadmissionpolicybindings").stdout)
    assert bindings[0] == ["NAME", "POLICYNAME", "PARAMREF", "AGE"]
    assert bindings[1][:3] == [
        "demo-binding-test.example.com",
        "demo-policy.example.com",
        "<unset>",
    ]
    explained = kubectl("explain", "validatingadmissionpolicy.spec.validations").stdout
    assert "expression" in explained
    big = DEPLOYMENT.format(name="nginx").replace("namespace: default", "namespace: vap")
    big = big.replace("replicas: 2", "replicas: 6")
    proc = kubectl("apply", "-f", kubectl.file("big.yaml", big), check=False)
    assert proc.returncode != 0
    assert (
        'The deployments "nginx" is invalid: : ValidatingAdmissionPolicy '
        "'demo-policy.example.com' with binding 'demo-binding-test.example.com' denied "
        "request: failed expression: object.spec.replicas <= 5"
    ) in proc.stderr, proc.stderr
    # applying the same manifest again: the binding's defaults are maps, merged (the
    # policy's resourceRules are an atomic list that got a default scope: replaced)
    again = kubectl("apply", "-f", kubectl.file("policy.yaml", POLICY)).stdout
    assert "demo-binding-test.example.com unchanged" in again, again


def test_apply_of_a_known_object_with_an_unknown_field_is_the_patch_handlers_refusal(
    kubectl: Kubectl, gizmo_crd: str
) -> None:
    # kubectl 1.27+ applies with fieldValidation=Strict: an object that exists is patched
    # (a merge patch for a custom resource, a strategic one for a Deployment), and
    # kube-apiserver's patch handler refuses the unknown field as a 422 on the field "patch"
    gizmo = "apiVersion: kubectl.mcruntime.io/v1\nkind: Gizmo\nmetadata: {name: ga, namespace: default}\nspec: {size: 3}\n"
    deployment = DEPLOYMENT.format(name="applied-twice")
    for good, bad, shown in (
        (gizmo, gizmo.replace("size: 3", "size: 4, colour: red"), '"{'),
        (
            deployment,
            deployment.replace("replicas: 2", "replicas: 3\n      replicaz: 3"),
            '"map[',
        ),
    ):
        kubectl("apply", "-f", kubectl.file("good.yaml", good))
        proc = kubectl("apply", "-f", kubectl.file("bad.yaml", bad), check=False)
        assert proc.returncode != 0
        assert f"The request is invalid: patch: Invalid value: {shown}" in proc.stderr, proc.stderr
        assert "strict decoding error: unknown field" in proc.stderr, proc.stderr


def test_client_side_apply_of_a_big_crd_fails_as_on_a_cluster_and_server_side_does_not(
    kubectl: Kubectl,
) -> None:
    # prometheus-operator's and Gateway API's CRDs: the last-applied annotation of a
    # client-side apply holds the whole CRD, over the 256 KiB annotations may total
    crd = yaml.safe_load(textwrap.dedent(GIZMO_CRD))
    crd["metadata"]["name"] = "bigs.kubectl.mcruntime.io"
    crd["spec"]["names"] = {"plural": "bigs", "singular": "big", "kind": "Big"}
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["description"] = "x" * 300_000
    path = kubectl.tmp / "big-crd.yaml"
    path.write_text(yaml.safe_dump(crd))
    proc = kubectl("apply", "-f", str(path), check=False)
    assert proc.returncode == 1
    # kube-apiserver 1.31's words ("may not be more than 262144 bytes" from 1.32)
    assert (
        'The CustomResourceDefinition "bigs.kubectl.mcruntime.io" is invalid: '
        "metadata.annotations: Too long: must have at most 262144 bytes"
    ) in proc.stderr.replace("may not be more than", "must have at most")
    out = kubectl("apply", "--server-side", "-f", str(path)).stdout
    assert "customresourcedefinition.apiextensions.k8s.io/bigs.kubectl.mcruntime.io" in out
    kubectl("delete", "crd", "bigs.kubectl.mcruntime.io")
