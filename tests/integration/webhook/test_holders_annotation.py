"""The ``webhook.mcruntime.io/holders`` annotation is written by whoever may edit the
installed configuration (a member cluster's admin): a hold that is not as an installer
writes it (a pid too large for ``os.kill``, negative, not a number, ``true``) is ignored
with one warning naming the cluster, so a tenant can neither stop the installer from
putting back its configuration nor keep it installed after the manager stops."""

from __future__ import annotations

import json
import logging
import socket
from typing import Any

import pytest

import mcruntime
from mcruntime.envtest import wait_for
from mcruntime.manager import ManagerOptions
from mcruntime.webhook import AdmissionResponse, WebhookServer, WebhookServerOptions
from tests._logs import logged

pytestmark = pytest.mark.timeout(60)

VALIDATING = "admissionregistration.k8s.io/v1/ValidatingWebhookConfiguration"
NAME = "mcruntime-webhooks"
HOLDERS = "webhook.mcruntime.io/holders"
RULES = [
    {"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}
]


@pytest.mark.parametrize("pid", [10**30, -5, 0, "1", True, 1.5])
def test_a_crafted_hold_neither_stops_the_put_back_nor_the_removal_at_stop(
    envtest_server: Any, caplog: pytest.LogCaptureFixture, pid: Any
) -> None:
    caplog.set_level(logging.WARNING, "mcruntime.webhook")
    ws = WebhookServer(
        WebhookServerOptions(host="127.0.0.1", port=0, install=True, install_resync=60)
    )
    ws.register("/validate", lambda r: AdmissionResponse(True), rules=RULES)
    mgr = mcruntime.Manager(envtest_server.kubeconfig(), options=ManagerOptions(webhook_server=ws))
    tenant = mcruntime.Cluster.from_kubeconfig(
        envtest_server.kubeconfig(), name="tenant"
    ).uncached_client
    mgr.start()
    try:
        wait_for(ws.installed_clusters, 10, "the configuration installed")
        vwc = tenant.get(VALIDATING, NAME)
        held = json.loads(vwc["metadata"]["annotations"][HOLDERS])
        held["intruder"] = {
            "host": socket.gethostname(),
            "pid": pid,
            "expires": "2999-01-01T00:00:00Z",
        }
        vwc["metadata"]["annotations"][HOLDERS] = json.dumps(held)
        vwc["webhooks"][0]["failurePolicy"] = "Ignore"  # a change the installer puts back
        tenant.update(vwc)

        def put_back() -> bool:
            got = tenant.get(VALIDATING, NAME)
            return bool(got["webhooks"][0]["failurePolicy"] == "Fail")

        wait_for(put_back, 10, "the failurePolicy put back")
        wait_for(
            lambda: (
                "intruder" not in tenant.get(VALIDATING, NAME)["metadata"]["annotations"][HOLDERS]
            ),
            10,
            "the malformed hold dropped",
        )
    finally:
        mgr.stop()
    with pytest.raises(mcruntime.errors.NotFound):
        tenant.get(VALIDATING, NAME)  # removed at stop: nobody else holds it
    said = logged(caplog, logging.WARNING, containing=HOLDERS)
    assert len(said) == 1, said
    assert said[0].startswith("cluster=local webhook: 1 hold of annotation")
    assert not logged(caplog, logging.WARNING, containing="failed")
