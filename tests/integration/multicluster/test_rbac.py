"""A cluster whose credentials may not list what a controller watches: the operator's most common
mistake. It waits, named in one warning, without holding up the other clusters, and joins by
itself once a binding grants the rights.

The cluster's credentials are a service account's token, authorized by envtest's RBAC as
kube-apiserver's RBAC authorizer would.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any

import pytest

import mcruntime
from mcruntime.cluster import Cluster
from mcruntime.envtest import wait_for
from mcruntime.errors import AlreadyExists, Forbidden, NotFound
from mcruntime.providers import clusters
from mcruntime.reconcile import Result
from tests._logs import logged
from tests.integration.manager._http import get
from tests.integration.multicluster._mc_helpers import (
    CM,
    Recorder,
    cluster_of,
    configmap,
    configmap_controller,
    create_cms,
    running,
    threads_for,
)

pytestmark = pytest.mark.timeout(60)

RBAC = "rbac.authorization.k8s.io/v1"


def grant_configmaps(admin: Cluster) -> None:
    rules = [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]}]
    admin.client.create(
        {"apiVersion": RBAC, "kind": "ClusterRole", "metadata": {"name": "cm"}, "rules": rules}
    )
    admin.client.create(
        {
            "apiVersion": RBAC,
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "cm"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "cm",
            },
            "subjects": [{"kind": "ServiceAccount", "name": "operator", "namespace": "default"}],
        }
    )


def test_a_cluster_without_list_rights_waits_named_once_and_joins_when_granted(
    make_envtest_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    ok, denied = make_envtest_server("ok"), make_envtest_server("denied")
    create_cms(ok, ["o1"])
    create_cms(denied, ["d1"])
    admin = cluster_of(denied, "admin-of-denied")
    provider = clusters.Provider()
    provider.add("ok", cluster_of(ok, "ok"))
    config = denied.kubeconfig(service_account="default/operator")  # no rights yet
    sa_token = config["users"][0]["user"]["token"]
    provider.add("denied", Cluster.from_kubeconfig(config, name="denied"))
    mgr = mcruntime.Manager(provider=provider)
    rec = Recorder()
    configmap_controller(mgr, rec)
    caplog.set_level(logging.DEBUG, logger="mcruntime.cache")

    def about_denied(level: int, text: str) -> list[str]:
        return [
            r.getMessage()
            for r in caplog.records
            if r.levelno == level and "cluster=denied" in r.getMessage() and text in r.getMessage()
        ]

    try:
        with running(mgr):
            # the other cluster is served at once
            wait_for(lambda: rec.saw("ok", "default/o1"), what="the healthy cluster's reconcile")
            # the informer keeps trying with backoff; the streak is logged once, as a warning
            wait_for(
                lambda: about_denied(logging.DEBUG, "still failing (3)"),
                what="three failed lists",
            )
            warnings = about_denied(logging.WARNING, "is forbidden")
            assert len(warnings) == 1, warnings
            assert (
                'User "system:serviceaccount:default:operator" cannot list resource "configmaps"'
                in warnings[0]
            )
            assert "denied" not in mgr.engaged_clusters() and rec.count("denied") == 0

            grant_configmaps(admin)
            wait_for(
                lambda: rec.saw("denied", "default/d1"), what="the cluster to join once granted"
            )
            assert "denied" in mgr.engaged_clusters()
            # the informer says so after its list, which may be after the reconcile it fed
            wait_for(
                lambda: about_denied(logging.INFO, "listing and watching works again after"),
                what="the recovery said once",
            )
            secrets = (denied.token, ok.token, sa_token)
            assert not any(s in r.getMessage() for r in caplog.records for s in secrets)
        wait_for(lambda: not threads_for("denied"), what="the cluster's threads to stop")
    finally:
        admin.stop()


def test_a_binding_revoked_mid_run_is_a_refusal_in_readyz_and_its_restoration_recovers(
    make_envtest_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A security team deletes the operator's ClusterRoleBinding while it runs, and restores
    it later. The informer's next watch is refused: one warning, and ``/readyz`` lists the
    cluster as refusing (not "unreachable": it answers), without failing; once the binding is
    back, the informer recovers by itself, said in one line, and the cluster reads ok."""
    server = make_envtest_server("revoked")
    create_cms(server, ["c1"])
    admin = cluster_of(server, "admin-of-revoked")
    grant_configmaps(admin)
    provider = clusters.Provider()
    config = server.kubeconfig(service_account="default/operator")
    provider.add("revoked", Cluster.from_kubeconfig(config, name="revoked"))
    mgr = mcruntime.Manager(
        provider=provider,
        options=mcruntime.ManagerOptions(health_probe_bind_address="127.0.0.1:0"),
    )
    rec = Recorder()
    configmap_controller(mgr, rec)
    caplog.set_level(logging.INFO, logger="mcruntime.cache")
    informer = "cluster=revoked informer kind=v1/ConfigMap: listing and watching "

    def readyz() -> str:
        return get(mgr.health_probe_address, "/readyz?verbose")[1]

    binding = "rbac.authorization.k8s.io/v1/ClusterRoleBinding"
    try:
        with running(mgr):
            wait_for(lambda: rec.saw("revoked", "default/c1"), what="the first reconcile")
            kept = admin.uncached_client.get(binding, "cm")
            admin.client.delete(binding, "cm")
            server.drop_watches()  # (a watch ends every 5 to 10 minutes: its next is refused)
            wait_for(
                lambda: (
                    "[!]cluster/revoked refused: [cluster revoked] configmaps is forbidden"
                    in readyz()
                ),
                what="readyz saying the cluster refuses",
            )
            status, _ = get(mgr.health_probe_address, "/readyz")
            assert status == 200
            (warning,) = logged(caplog, logging.WARNING, starting=f"{informer}failed: ")
            assert 'cannot watch resource "configmaps"' in warning

            admin.client.create(
                {k: v for k, v in kept.items() if k != "metadata"} | {"metadata": {"name": "cm"}}
            )
            wait_for(lambda: "[+]cluster/revoked ok" in readyz(), what="the cluster ok again")
            assert len(logged(caplog, logging.INFO, starting=f"{informer}works again")) == 1
            assert len(logged(caplog, logging.WARNING, starting=informer)) == 1
    finally:
        admin.stop()


def test_a_cache_of_one_named_object_needs_only_that_name(make_envtest_server: Any) -> None:
    """Least privilege: a Role naming one ConfigMap (``resourceNames``) is enough for an
    informer that selects it by name, as on kube-apiserver."""
    from mcruntime.cache import ByKind, CacheOptions

    server = make_envtest_server("one")
    create_cms(server, ["settings", "other"])
    admin = cluster_of(server, "admin-of-one")
    admin.client.create(
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": "operator", "namespace": "default"},
        }
    )
    rule = {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["settings"]}
    rule["verbs"] = ["get", "list", "watch"]
    admin.client.create(
        {
            "apiVersion": RBAC,
            "kind": "Role",
            "metadata": {"name": "settings", "namespace": "default"},
            "rules": [rule],
        }
    )
    admin.client.create(
        {
            "apiVersion": RBAC,
            "kind": "RoleBinding",
            "metadata": {"name": "settings", "namespace": "default"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": "settings",
            },
            "subjects": [{"kind": "ServiceAccount", "name": "operator", "namespace": "default"}],
        }
    )
    only = ByKind(namespaces=["default"], field_selector="metadata.name=settings")
    operator = Cluster.from_kubeconfig(
        server.kubeconfig(service_account="default/operator"),
        name="operator",
        cache_options=CacheOptions(by_kind={"v1/ConfigMap": only}),
    )
    operator.start()
    try:
        cm = operator.client.get("v1/ConfigMap", "settings", "default")  # from the cache
        assert cm["metadata"]["name"] == "settings"
        admin.client.patch(
            "v1/ConfigMap",
            "settings",
            {"data": {"k": "v"}},
            namespace="default",
        )
        wait_for(
            lambda: (
                operator.client.get("v1/ConfigMap", "settings", "default").get("data") or {}
            ).get("k"),
            10,
            "the update through the watch",
        )
        assert [o["metadata"]["name"] for o in operator.cache.list("v1/ConfigMap")] == ["settings"]
    finally:
        operator.stop()
        admin.stop()


def test_reconciles_a_cluster_refuses_are_one_warning_per_streak_without_a_traceback(
    make_envtest_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A cluster whose credentials may read what the controller watches but not write what it
    writes: every request of it fails with 403 and is retried with backoff. That is said once,
    without a traceback, not as an error at every retry of every request; the other cluster
    is reconciled as usual, and the streak ends in one line once a write is allowed."""
    ok, denied = make_envtest_server("ok"), make_envtest_server("denied")
    create_cms(ok, ["o1", "o2"])
    create_cms(denied, ["d1", "d2", "d3", "quiet"])
    admin = cluster_of(denied, "admin-of-denied")
    grant_configmaps(admin)  # get, list, watch: no create
    provider = clusters.Provider()
    provider.add("ok", cluster_of(ok, "ok"))
    config = denied.kubeconfig(service_account="default/operator")
    provider.add("denied", Cluster.from_kubeconfig(config, name="denied"))
    mgr = mcruntime.Manager(provider=provider)

    def write_a_copy(req: Any) -> Result | None:
        if req.name == "quiet":  # succeeds without a call: says nothing of the cluster
            return Result(requeue_after=0.02)
        if req.name.startswith("copy-"):
            return None
        client = mgr.get_cluster(req.cluster_name).client
        copy = {"apiVersion": "v1", "kind": "ConfigMap"}
        copy["metadata"] = {"name": f"copy-{req.name}", "namespace": req.namespace}
        with contextlib.suppress(AlreadyExists):
            client.create(copy)
        return None

    rec = Recorder(write_a_copy)
    configmap_controller(mgr, rec)
    caplog.set_level(logging.DEBUG, logger="mcruntime.controller")
    streak = "cluster=denied controller=configmaps: reconciling "

    def lines(level: int, text: str = "") -> list[logging.LogRecord]:
        return [
            r
            for r in caplog.records
            if r.name == "mcruntime.controller"
            and r.levelno == level
            and "denied" in r.getMessage()
            and text in r.getMessage()
        ]

    try:
        with running(mgr):
            wait_for(lambda: rec.count("denied") >= 40, what="retries of the refused requests")
            assert rec.saw("ok", "default/o1") and rec.saw("ok", "default/o2")
            assert lines(logging.ERROR) == [], [r.getMessage() for r in lines(logging.ERROR)]
            (warning,) = lines(logging.WARNING)
            message = warning.getMessage()
            assert message.startswith(f"{streak}failed: [cluster denied] configmaps is forbidden")
            assert "(request default/d" in message and "each request is retried" in message
            assert warning.exc_info is None
            assert len(lines(logging.DEBUG, f"{streak}still failing")) >= 8
            grant(admin, "cm-create", ["create"])
            wait_for(lambda: lines(logging.INFO, f"{streak}works again after "), timeout=30)
            assert len(lines(logging.WARNING)) == 1
    finally:
        admin.stop()


def test_objects_deleted_while_their_cluster_refuses_do_not_end_its_streak(
    make_envtest_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Objects with generated names come and go on a cluster that refuses the controller's
    writes the whole time: each deleted object's last reconcile (read from the cache, no
    call) is no sign that the cluster works again. One warning for the whole outage, no
    request of a deleted object kept, and the streak ends at a write the cluster accepts."""
    denied = make_envtest_server("denied")
    admin = cluster_of(denied, "admin-of-denied")
    grant_configmaps(admin)  # get, list, watch: no create
    provider = clusters.Provider()
    config = denied.kubeconfig(service_account="default/operator")
    provider.add("denied", Cluster.from_kubeconfig(config, name="denied"))
    mgr = mcruntime.Manager(provider=provider)
    outcomes: dict[str, list[str]] = {}

    def write_a_copy(req: Any) -> None:
        if req.name.startswith("copy-"):
            return
        client = mgr.get_cluster(req.cluster_name).client
        try:
            client.get("v1/ConfigMap", req.name, req.namespace)
        except NotFound:
            outcomes.setdefault(req.name, []).append("gone")
            return
        copy = {"apiVersion": "v1", "kind": "ConfigMap"}
        copy["metadata"] = {"name": f"copy-{req.name}", "namespace": req.namespace}
        try:
            client.create(copy)
        except Forbidden:
            outcomes.setdefault(req.name, []).append("refused")
            raise
        outcomes.setdefault(req.name, []).append("copied")

    ctrl = configmap_controller(mgr, Recorder(write_a_copy))
    caplog.set_level(logging.INFO, logger="mcruntime.controller")
    works_again = "cluster=denied controller=configmaps: reconciling works again after "
    try:
        with running(mgr):
            for i in range(10):
                name = f"job-{i}"
                admin.client.create(configmap(name))
                wait_for(lambda n=name: "refused" in outcomes.get(n, ()), what=f"{name} refused")
                admin.client.delete(CM, name, "default")
                wait_for(lambda n=name: "gone" in outcomes.get(n, ()), what=f"{name} gone")
            assert len(logged(caplog, logging.WARNING, containing="reconciling failed")) == 1
            assert not logged(caplog, logging.INFO, containing=works_again)
            assert ctrl._refusing.get("denied") == set()  # noqa: SLF001 - none kept
            grant(admin, "cm-create", ["create"])
            admin.client.create(configmap("after"))
            wait_for(lambda: logged(caplog, logging.INFO, containing=works_again), timeout=30)
            assert outcomes["after"] == ["copied"]
            assert len(logged(caplog, logging.WARNING, containing="reconciling failed")) == 1
    finally:
        admin.stop()


def grant(admin: Cluster, name: str, verbs: list[str]) -> None:
    """Grant the operator ``verbs`` on ConfigMaps, through ClusterRole(Binding) ``name``."""
    rules = [{"apiGroups": [""], "resources": ["configmaps"], "verbs": verbs}]
    admin.client.create(
        {"apiVersion": RBAC, "kind": "ClusterRole", "metadata": {"name": name}, "rules": rules}
    )
    admin.client.create(
        {
            "apiVersion": RBAC,
            "kind": "ClusterRoleBinding",
            "metadata": {"name": name},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": name,
            },
            "subjects": [{"kind": "ServiceAccount", "name": "operator", "namespace": "default"}],
        }
    )


def test_a_403_about_the_object_is_the_request_s_error_not_its_cluster_s(
    make_envtest_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A 403 an admission policy (or webhook, or quota) answers about the object written is
    no refusal of the controller's credentials: each request's refusal is said with its own
    message, not folded into one warning per cluster with the next at debug level."""
    server = make_envtest_server("policed")
    create_cms(server, ["a", "b"])
    admin = cluster_of(server, "admin")
    rule = {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"]}
    admin.client.create(
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": "no-copies"},
            "spec": {
                "matchConstraints": {"resourceRules": [{**rule, "resources": ["configmaps"]}]},
                "validations": [
                    {
                        "expression": "!object.metadata.name.startsWith('copy-')",
                        "messageExpression": "'no copy of ' + object.metadata.name.substring(5)",
                        "reason": "Forbidden",
                    }
                ],
            },
        }
    )
    admin.client.create(
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": "no-copies"},
            "spec": {"policyName": "no-copies", "validationActions": ["Deny"]},
        }
    )
    provider = clusters.Provider()
    provider.add("policed", cluster_of(server, "policed"))
    mgr = mcruntime.Manager(provider=provider)

    def write_a_copy(req: Any) -> None:
        if req.name.startswith("copy-"):
            return
        copy = {"apiVersion": "v1", "kind": "ConfigMap"}
        copy["metadata"] = {"name": f"copy-{req.name}", "namespace": req.namespace}
        mgr.get_cluster(req.cluster_name).client.create(copy)

    rec = Recorder(write_a_copy)
    configmap_controller(mgr, rec)
    caplog.set_level(logging.DEBUG, logger="mcruntime.controller")

    def said(text: str) -> list[logging.LogRecord]:
        return [
            r
            for r in caplog.records
            if r.name == "mcruntime.controller"
            and r.levelno >= logging.WARNING
            and text in r.getMessage()
        ]

    try:
        with running(mgr):
            wait_for(
                lambda: said("no copy of a") and said("no copy of b"),
                what="each request's refusal said with its own message",
            )
            assert said("reconciling failed") == [], "told as the cluster's refusal"
    finally:
        admin.stop()


def test_a_cluster_that_refuses_the_token_is_named_with_what_to_check(
    make_envtest_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A member whose token the API server does not accept (revoked, rotated, another
    cluster's): kube-apiserver's 401 says only `Unauthorized`. The warning says whose
    credentials were refused and where to look, never the token."""
    server = make_envtest_server("eu-3")
    config = server.kubeconfig()
    config["users"][0]["user"]["token"] = "a-revoked-token"
    provider = clusters.Provider()
    provider.add("eu-3", Cluster.from_kubeconfig(config, name="eu-3"))
    mgr = mcruntime.Manager(provider=provider)
    configmap_controller(mgr, Recorder())
    caplog.set_level(logging.INFO, logger="mcruntime")

    def warned() -> list[str]:
        return [
            r.getMessage()
            for r in caplog.records
            if r.name == "mcruntime.cache" and r.levelno == logging.WARNING
        ]

    with running(mgr):
        wait_for(warned, what="the informer's warning")
    (warning,) = warned()
    assert warning.startswith(
        "cluster=eu-3 informer kind=v1/ConfigMap: listing and watching failed: "
    )
    assert (
        "[cluster eu-3] Unauthorized: the API server does not accept this cluster's credentials"
        in warning
    )
    assert "check the kubeconfig or Secret they came from" in warning
    assert "a-revoked-token" not in caplog.text


def test_a_read_of_a_kind_a_cluster_forbids_fails_at_once_and_holds_up_no_other_cluster(
    make_envtest_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A member whose credentials may list what the controller watches but not what its
    reconciler reads through the cache (Secrets): the read fails with the cluster's 403 as
    soon as the informer's list is refused, instead of holding the controller's one worker
    for ``sync_timeout`` (30 s) at every retry while the other member's requests wait."""
    ok, denied = make_envtest_server("ok"), make_envtest_server("denied")
    create_cms(denied, ["d1"])
    admin = cluster_of(denied, "admin-of-denied")
    grant_configmaps(admin)  # no Secrets
    provider = clusters.Provider()
    provider.add("ok", cluster_of(ok, "ok"))
    config = denied.kubeconfig(service_account="default/operator")
    provider.add("denied", Cluster.from_kubeconfig(config, name="denied"))
    mgr = mcruntime.Manager(provider=provider)

    def read_secrets(req: Any) -> None:
        mgr.get_cluster(req.cluster_name).client.list("v1/Secret", namespace=req.namespace)

    rec = Recorder(read_secrets)
    configmap_controller(mgr, rec)
    caplog.set_level(logging.INFO, logger="mcruntime.controller")
    failed = "cluster=denied controller=configmaps: reconciling failed: "
    try:
        with running(mgr):
            wait_for(lambda: rec.count("denied") >= 3, what="the refused request retried")
            (warning,) = logged(caplog, logging.WARNING, starting=failed)
            assert "informer for v1/Secret" in warning
            user = 'User "system:serviceaccount:default:operator"'
            assert f'{user} cannot list resource "secrets"' in warning
            with pytest.raises(Forbidden, match='cannot list resource "secrets"') as refused:
                mgr.get_cluster("denied").client.get("v1/Secret", "any", "default")
            # a Role granting get on one Secret is not enough for a read through the cache
            assert "a cache read lists and watches its kind" in str(refused.value)
            assert "api_reader" in str(refused.value)
            # the other member's requests are not held up behind the refused one's reads
            create_cms(ok, ["o1", "o2", "o3"])
            wait_for(
                lambda: all(rec.saw("ok", f"default/o{i}") for i in (1, 2, 3)),
                timeout=10,  # well within the 30 s a read used to wait
                what="the other member's reconciles",
            )
            assert len(logged(caplog, logging.WARNING, starting=failed)) == 1
    finally:
        admin.stop()


def test_an_engagement_that_a_refused_list_holds_back_is_not_called_a_timeout(
    make_envtest_server: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """The engagement of a member that refuses the controller's list (403) fails when its
    attempt ends: the warning says the informer did not sync and why, not `TimeoutError`,
    which reads as a slow cluster."""
    server = make_envtest_server("eu-4")
    config = server.kubeconfig(service_account="default/operator")  # no rights
    provider = clusters.Provider()
    provider.add("eu-4", Cluster.from_kubeconfig(config, name="eu-4"))
    mgr = mcruntime.Manager(
        provider=provider, options=mcruntime.ManagerOptions(engage_sync_timeout=1)
    )
    configmap_controller(mgr, Recorder())
    caplog.set_level(logging.INFO, logger="mcruntime")
    engaging = "cluster=eu-4 manager: engaging every controller failed: "
    with running(mgr):
        wait_for(lambda: logged(caplog, logging.WARNING, starting=engaging), timeout=15)
    (warning,) = logged(caplog, logging.WARNING, starting=engaging)
    assert "TimeoutError" not in warning
    assert warning.startswith(
        f"{engaging}controller configmaps: informer eu-4/v1/ConfigMap not synced: "
        "[cluster eu-4] configmaps is forbidden: "
    ), warning
