"""The webhook server over real HTTPS: reviews, errors, timeouts, certificates, threads."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import re
import ssl
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from mcruntime._threads import mcruntime_threads
from mcruntime.envtest import WaitTimeout, wait_for
from mcruntime.webhook import (
    AdmissionRequest,
    Denied,
    ValidatingHandler,
    WebhookServer,
    WebhookServerOptions,
    generate_certificates,
    patched,
)
from tests._slow_client import trickle_until_closed

pytestmark = pytest.mark.timeout(30)


def review(name: str = "a", uid: str = "u-1", **obj: Any) -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "operation": "CREATE",
            "name": name,
            "object": {"metadata": {"name": name}, **obj},
        },
    }


def post(server: WebhookServer, path: str, body: Any, ctype: str = "application/json") -> Any:
    ctx = ssl.create_default_context(cadata=server.ca_bundle.decode())
    conn = http.client.HTTPSConnection("127.0.0.1", server.port, context=ctx, timeout=10)
    try:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        conn.request("POST", path, body=data, headers={"Content-Type": ctype})
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read())
    finally:
        conn.close()


@pytest.fixture
def server() -> Iterator[WebhookServer]:
    s = WebhookServer(WebhookServerOptions(host="127.0.0.1", port=0, request_timeout=0.5))
    release = threading.Event()

    def handle(req: AdmissionRequest) -> Any:
        if req.name == "denied":
            raise Denied("names may not be 'denied'", code=422, reason="Invalid")
        if req.name == "boom":
            raise RuntimeError("kaputt")
        if req.name == "slow":
            release.wait(5)
        assert req.obj is not None
        obj = {
            **req.obj,
            "metadata": {**req.obj["metadata"], "labels": {"cluster": req.cluster_name}},
        }
        return patched(req.obj, obj, warnings=["w1"])

    s.register("/hook", handle)
    s.start()
    try:
        yield s
    finally:
        release.set()
        s.stop()


def test_a_mutation_comes_back_as_a_json_patch_and_the_cluster_comes_from_the_path(
    server: WebhookServer,
) -> None:
    import base64

    for path, cluster in (("/hook", ""), ("/clusters/eu%2F1/hook", "eu/1")):
        status, answer = post(server, path, review())
        resp = answer["response"]
        assert (status, resp["uid"], resp["allowed"], resp["patchType"]) == (
            200,
            "u-1",
            True,
            "JSONPatch",
        )
        assert json.loads(base64.b64decode(resp["patch"])) == [
            {"op": "add", "path": "/metadata/labels", "value": {"cluster": cluster}}
        ]
        assert resp["warnings"] == ["w1"]


def test_denied_and_exceptions_are_refusals_a_timeout_an_http_error_and_the_server_keeps_serving(
    server: WebhookServer,
) -> None:
    resp = post(server, "/hook", review("denied"))[1]["response"]
    assert resp["allowed"] is False
    assert resp["status"] == {
        "code": 422,
        "message": "names may not be 'denied'",
        "reason": "Invalid",
        "status": "Failure",
    }
    resp = post(server, "/hook", review("boom"))[1]["response"]
    assert (resp["allowed"], resp["status"]["code"]) == (False, 500)
    assert "RuntimeError: kaputt" in resp["status"]["message"]
    began = time.monotonic()
    # a timeout is an HTTP error, not a refusal: the API server's failurePolicy decides
    status, body = post(server, "/hook", review("slow"))
    assert time.monotonic() - began < 3
    assert (status, body["kind"], body["code"], body["reason"]) == (504, "Status", 504, "Timeout")
    assert body["message"] == "webhook /hook timed out after 0.5s"
    assert post(server, "/hook", review("fine"))[1]["response"]["allowed"] is True


def test_the_warnings_of_a_denial_reach_the_api_server_with_it() -> None:
    class Validator:
        def validate_create(self, request: AdmissionRequest, obj: Any) -> list[str] | None:
            raise Denied("spec.size: too big", code=422, warnings=["spec.size is deprecated"])

        def validate_update(self, request: AdmissionRequest, old: Any, new: Any) -> None:
            return None

        def validate_delete(self, request: AdmissionRequest, obj: Any) -> None:
            return None

    s = WebhookServer(WebhookServerOptions(host="127.0.0.1", port=0))
    s.register("/hook", ValidatingHandler("example.com/v1/Widget", Validator()))
    s.start()
    try:
        resp = post(s, "/hook", review())[1]["response"]
        assert (resp["allowed"], resp["status"]["message"], resp["status"]["code"]) == (
            False,
            "spec.size: too big",
            422,
        )
        assert resp["warnings"] == ["spec.size is deprecated"]
    finally:
        s.stop()


def test_a_handler_has_the_time_its_api_server_says_it_waits() -> None:
    # kube-apiserver tells every admission webhook how long it waits (the hook's
    # timeoutSeconds, ``?timeout=10s``): the handler has that long, not request_timeout
    s = WebhookServer(WebhookServerOptions(host="127.0.0.1", port=0, request_timeout=0.3))
    release = threading.Event()

    def handle(req: AdmissionRequest) -> Any:
        if req.name == "slow":
            release.wait(0.8)  # past request_timeout, within what the API server waits
        elif req.name == "hung":
            release.wait(10)
        return patched(req.obj or {}, req.obj or {})

    s.register("/hook", handle)
    s.start()
    try:
        status, body = post(s, "/hook?timeout=5s", review("slow"))
        assert (status, body["response"]["allowed"]) == (200, True)
        status, body = post(s, "/clusters/eu-1/hook?timeout=1s", review("hung"))
        assert (status, body["message"]) == (504, "webhook /hook timed out after 1s")
        # a request that says nothing (or nothing that is a duration) has request_timeout
        for query in ("", "?timeout=soon", "?timeout=0s"):
            status, body = post(s, f"/hook{query}", review("slow"))
            assert (status, body["message"]) == (504, "webhook /hook timed out after 0.3s")
    finally:
        release.set()
        s.stop()


def test_a_handler_hung_for_one_cluster_holds_a_quarter_of_the_workers_at_most(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # a thread past its deadline cannot be stopped: it keeps its worker. The calls of a
    # cluster whose handler runs are overdue on max_workers // 4 workers are answered at
    # once, so the other clusters keep the rest; said once per streak, not once per call
    s = WebhookServer(
        WebhookServerOptions(host="127.0.0.1", port=0, request_timeout=0.3, max_workers=4)
    )
    release = threading.Event()

    def handle(req: AdmissionRequest) -> Any:
        if req.cluster_name == "hung":
            release.wait(10)
        return patched(req.obj, req.obj)

    s.register("/hook", handle)
    s.start()
    try:
        with caplog.at_level("INFO", logger="mcruntime.webhook"):
            for _ in range(6):
                status, body = post(s, "/clusters/hung/hook", review())
                assert (status, body["reason"]) == (504, "Timeout")
            assert body["message"] == (
                "webhook /hook: 1 earlier call for cluster hung still runs past the 0.3s "
                "deadline; answered at once until one ends"
            )
            for _ in range(4):  # every worker but the one the hung handler holds serves them
                began = time.monotonic()
                status, body = post(s, "/clusters/ok/hook", review())
                assert (status, body["response"]["allowed"]) == (200, True)
                assert time.monotonic() - began < 0.25
            # the cluster leaves and comes back: nothing of its first engagement holds it back
            s.disengage("hung", cast(Any, None))
            status, body = post(s, "/clusters/hung/hook", review())
            assert body["message"] == "webhook /hook timed out after 0.3s"
            release.set()
            wait_for(
                lambda: post(s, "/clusters/hung/hook", review())[0] == 200,
                timeout=5,
                what="the hung cluster served once its handler returned",
            )
        # one per engagement's streak
        warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
        assert len(warnings) == 2, warnings
        assert warnings[0] == warnings[1]
        assert warnings[0].startswith(
            "cluster=hung webhook: /hook: admission failed: webhook /hook timed out after 0.3s; "
            "answered 504 (its failurePolicy decides)"
        ), warnings[0]
        assert [r.getMessage() for r in caplog.records if "works again" in r.getMessage()]
    finally:
        release.set()
        s.stop()


@pytest.mark.parametrize(
    ("body", "ctype", "why"),
    [
        (b"{not json", "application/json", "not JSON"),
        ({"apiVersion": "v1", "kind": "Pod"}, "application/json", "expected apiVersion"),
        (
            {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"},
            "application/json",
            "no request",
        ),
        (review(), "text/plain", "content type"),
        ({**review(), "request": {**review()["request"], "kind": 5}}, "application/json", "kind"),
        (
            {**review(), "request": {**review()["request"], "userInfo": 7}},
            "application/json",
            "userInfo",
        ),
        ({**review(), "request": {**review()["request"], "name": []}}, "application/json", "name"),
    ],
)
def test_bad_requests_get_an_admission_review_error(
    server: WebhookServer, body: Any, ctype: str, why: str
) -> None:
    status, answer = post(server, "/hook", body, ctype)
    assert status == 200 and answer["kind"] == "AdmissionReview"
    assert answer["response"]["allowed"] is False
    assert answer["response"]["status"]["code"] == 400
    assert why in answer["response"]["status"]["message"]


def raw_post(
    server: WebhookServer, head: str, body: bytes = b"", *, trickle: int = 0, path: str = "/hook"
) -> bytes:
    """Send ``head`` (the lines after the request line) and ``body`` over TLS to ``path``, then
    up to ``trickle`` more bytes of body while the server reads; returns what the server
    answered before closing the connection."""
    import socket

    ctx = ssl.create_default_context(cadata=server.ca_bundle.decode())
    with (
        socket.create_connection(("127.0.0.1", server.port), timeout=10) as raw,
        ctx.wrap_socket(raw, server_hostname="127.0.0.1") as conn,
    ):
        conn.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\n{head}\r\n".encode() + body)
        chunk = b"x" * 65536
        with contextlib.suppress(OSError):
            for _ in range(trickle // len(chunk)):
                conn.sendall(chunk)
        answer = b""
        with contextlib.suppress(OSError):
            while data := conn.recv(65536):
                answer += data
        return answer


@pytest.mark.parametrize(
    ("head", "status"),
    [
        ("Content-Length: -1\r\n", 400),
        ("Content-Length: abc\r\n", 400),
        ("Content-Length: +5\r\n", 400),
        ("Content-Length: 5\r\nContent-Length: 6\r\n", 400),
        ("Transfer-Encoding: chunked\r\n", 501),
        ("Expect: 100-continue\r\n", 411),
    ],
)
def test_a_body_of_unknown_length_is_refused_at_once_not_read_until_the_client_stops(
    server: WebhookServer, head: str, status: int
) -> None:
    # 64 MiB more offered: a server reading until EOF would take it all (MAX_BODY is 8 MiB)
    started = time.monotonic()
    answer = raw_post(server, "Content-Type: application/json\r\n" + head, trickle=64 << 20)
    assert answer.startswith(f"HTTP/1.1 {status} ".encode()), answer[:200]
    assert time.monotonic() - started < 5


def test_an_admission_request_over_its_limit_is_refused_and_said_once_per_streak(
    server: WebhookServer, caplog: pytest.LogCaptureFixture
) -> None:
    # (the body declared, not sent: the server answers before reading it)
    head = f"Content-Type: application/json\r\nContent-Length: {(8 << 20) + 1}\r\n"
    with caplog.at_level("INFO", logger="mcruntime.webhook"):
        for _ in range(2):
            answer = raw_post(server, head, path="/clusters/eu-1/hook")
            assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]
            assert answer.endswith(f'larger than {8 << 20} bytes"}}'.encode()), answer
        assert post(server, "/clusters/eu-1/hook", review())[0] == 200
    said = [r.getMessage() for r in caplog.records if r.levelname in ("WARNING", "INFO")]
    assert len(said) == 2, said
    assert said[0].startswith("cluster=eu-1 webhook: /hook: admission failed: request body of ")
    assert "answered 413" in said[0]
    assert "works again" in said[1]


def test_a_request_trickled_after_the_handshake_is_cut_at_the_read_deadline(
    server: WebhookServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    import socket

    import mcruntime._serving

    monkeypatch.setattr(mcruntime._serving, "READ_TIMEOUT", 0.5)
    ctx = ssl.create_default_context(cadata=server.ca_bundle.decode())
    with (
        socket.create_connection(("127.0.0.1", server.port), timeout=5) as raw,
        ctx.wrap_socket(raw, server_hostname="127.0.0.1") as conn,
    ):
        conn.sendall(b"POST /hook HTTP/1.1\r\nContent-Length: 100\r\n\r\n")
        assert trickle_until_closed(conn, 2.5) < 2.5


def test_unknown_paths_are_404(server: WebhookServer) -> None:
    assert post(server, "/nothing-here", review())[0] == 404


def test_stop_ends_every_thread_of_the_server() -> None:
    s = WebhookServer(WebhookServerOptions(host="127.0.0.1", port=0))
    s.register("/hook", lambda req: patched(req.obj, req.obj))
    s.start()
    post(s, "/hook", review())
    assert any(t.name.startswith("mcruntime/webhook/") for t in mcruntime_threads())
    s.stop()
    with contextlib.suppress(WaitTimeout):  # the assertion below names the threads left
        wait_for(
            lambda: not any(t.name.startswith("mcruntime/webhook/") for t in mcruntime_threads()),
            timeout=5,
        )
    assert not [t.name for t in mcruntime_threads() if t.name.startswith("mcruntime/webhook/")]


def test_stop_does_not_wait_for_a_hung_handler_and_says_it_still_runs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # a thread cannot be stopped: the hung handler keeps its worker until it returns, but
    # nothing else waits for it (stop, the connection's thread), and the stop says so
    s = WebhookServer(WebhookServerOptions(host="127.0.0.1", port=0, request_timeout=20))
    entered, release = threading.Event(), threading.Event()

    def hang(req: AdmissionRequest) -> Any:
        entered.set()
        release.wait(20)
        return patched(req.obj or {}, req.obj or {})

    s.register("/hook", hang)
    s.start()
    caller = threading.Thread(target=_post_quietly, args=(s,), name="test/caller")
    caller.start()
    try:
        assert entered.wait(10)
        with caplog.at_level("INFO", logger="mcruntime.webhook"):
            began = time.monotonic()
            s.stop()
            assert time.monotonic() - began < 2
        said = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
        assert said == [
            "webhook server stopping with 1 handler still running (/hook for cluster eu-1); "
            "its thread ends when it returns"
        ]
        wait_for(
            lambda: (
                not [t for t in mcruntime_threads() if t.name == "mcruntime/webhook/local/conn"]
            ),
            timeout=2,
            what="the connection's thread ended",
        )
        assert not [r for r in caplog.records if "timed out" in r.getMessage()]
    finally:
        release.set()
        caller.join(10)
    wait_for(
        lambda: not [t for t in mcruntime_threads() if t.name.startswith("mcruntime/webhook/")],
        timeout=5,
        what="the handler's thread ended once it returned",
    )


def _post_quietly(s: WebhookServer) -> None:
    """Post a review for cluster eu-1, whatever comes of it (the server stops meanwhile)."""
    with contextlib.suppress(OSError, http.client.HTTPException, ValueError):
        post(s, "/clusters/eu-1/hook", review())


@pytest.mark.parametrize("host", ["webhooks.example.internal", "127.0.0.2", "::2"])
def test_a_generated_certificate_is_valid_for_the_host_of_the_url(host: str) -> None:
    # the installer sends every API server to ``url``: the certificate generated without
    # cert_dir must be valid for its host, not only for the default hosts
    import socket

    netloc = f"[{host}]" if ":" in host else host
    s = WebhookServer(WebhookServerOptions(host="127.0.0.1", port=0, url=f"https://{netloc}:9443"))
    s.register("/hook", lambda req: patched(req.obj, req.obj))
    s.start()
    try:
        ctx = ssl.create_default_context(cadata=s.ca_bundle.decode())
        with (
            socket.create_connection(("127.0.0.1", s.port), timeout=5) as raw,
            ctx.wrap_socket(raw, server_hostname=host) as conn,
        ):
            assert conn.version() is not None  # the name verified
    finally:
        s.stop()


def test_certificates_from_files_are_reloaded_when_they_change(tmp_path: Path) -> None:
    first = generate_certificates(["127.0.0.1"])
    first.write(tmp_path)
    s = WebhookServer(WebhookServerOptions(host="127.0.0.1", port=0, cert_dir=str(tmp_path)))
    s.register("/hook", lambda req: patched(req.obj, req.obj))
    s.start()
    try:
        assert s.ca_bundle == first.ca_pem
        assert post(s, "/hook", review())[0] == 200
        second = generate_certificates(["127.0.0.1"])
        second.write(tmp_path)
        os.utime(tmp_path / "tls.crt", (time.time() + 5, time.time() + 5))
        ctx = ssl.create_default_context(cadata=second.ca_pem.decode())

        def served_by_second() -> bool:
            conn = http.client.HTTPSConnection("127.0.0.1", s.port, context=ctx, timeout=5)
            try:
                conn.connect()
                return True
            except ssl.SSLError:
                return False
            finally:
                conn.close()

        wait_for(served_by_second, timeout=10, interval=0.1, what="the new certificate picked up")
    finally:
        s.stop()


def test_a_generated_ca_bundle_is_written_where_asked(tmp_path: Path) -> None:
    target = tmp_path / "ca" / "bundle.pem"
    target.parent.mkdir()
    s = WebhookServer(WebhookServerOptions(host="127.0.0.1", port=0, ca_bundle_file=str(target)))
    s.start()
    try:
        assert target.read_bytes() == s.ca_bundle
        assert s.ca_bundle.startswith(b"-----BEGIN CERTIFICATE-----")
    finally:
        s.stop()


def test_a_request_names_the_version_it_was_made_in_and_the_one_it_is_sent_in() -> None:
    """``matchPolicy: Equivalent``: the API server sends the webhook's version (``kind``)
    and names the one written in (``request_kind``); without them, they are the same."""
    from mcruntime.webhook import AdmissionRequest

    v1 = {"group": "example.com", "version": "v1", "kind": "Gadget"}
    v2 = {**v1, "version": "v2"}
    request = {
        "uid": "u",
        "operation": "CREATE",
        "kind": v1,
        "resource": {"group": "example.com", "version": "v1", "resource": "gadgets"},
        "requestKind": v2,
        "requestResource": {"group": "example.com", "version": "v2", "resource": "gadgets"},
        "object": {"apiVersion": "example.com/v1", "kind": "Gadget"},
    }
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    req = AdmissionRequest.from_review(review)
    assert (req.kind, req.request_kind) == (v1, v2)
    assert req.request_resource["version"] == "v2"
    for member in ("requestKind", "requestResource"):
        del request[member]
    req = AdmissionRequest.from_review(review)
    assert (req.request_kind, req.request_resource) == (req.kind, req.resource)
    assert req.request_sub_resource == ""


@pytest.mark.parametrize(
    ("returned", "said"),
    [
        # ported from Go: return admission.Warnings{"w"}, nil
        ((["w"], None), "a tuple, not a list of warnings or None (not Go's (warnings, error) pair"),
        (False, "a bool, not a list of warnings or None"),  # it allowed the object
        ("w", "a str, not a list of warnings or None"),  # it warned once per letter
    ],
)
def test_a_validator_that_returns_other_than_warnings_is_an_error(returned: Any, said: str) -> None:
    from mcruntime.webhook import ValidatingHandler

    class Validator:
        def validate_create(self, request: AdmissionRequest, obj: Any) -> Any:
            return returned if obj["metadata"]["name"] == "bad" else ["fine"]

        def validate_update(self, request: AdmissionRequest, old: Any, new: Any) -> Any:
            return None

        def validate_delete(self, request: AdmissionRequest, obj: Any) -> Any:
            return None

    handler = ValidatingHandler("v1/ConfigMap", Validator())
    good = handler.handle(AdmissionRequest.from_review(review("good")))
    assert (good.allowed, good.warnings) == (True, ["fine"])
    with pytest.raises(TypeError, match=re.escape(f"the validator of CREATE returned {said}")):
        handler.handle(AdmissionRequest.from_review(review("bad")))


def test_an_object_a_typed_handler_cannot_read_is_refused_naming_the_field_not_its_value() -> None:
    from typing import ClassVar

    from pydantic import BaseModel, Field

    from mcruntime.client import Resource
    from mcruntime.webhook import ValidatingHandler

    class Spec(BaseModel):
        replicas: int = Field(1, le=3)

    class Widget(Resource):
        api_version: ClassVar[str] = "example.com/v1"
        kind: ClassVar[str] = "Widget"
        spec: Spec = Spec()

    class Validator:
        def validate_create(self, request: AdmissionRequest, obj: Any) -> None:
            return None

        def validate_update(self, request: AdmissionRequest, old: Any, new: Any) -> None:
            return None

        def validate_delete(self, request: AdmissionRequest, obj: Any) -> None:
            return None

    handler = ValidatingHandler(Widget, Validator())
    body = review("big", apiVersion="example.com/v1", kind="Widget", spec={"replicas": 9876})
    with pytest.raises(ValueError) as refused:
        handler.handle(AdmissionRequest.from_review(body))
    said = str(refused.value)
    assert said.startswith("the object is not a valid ")
    assert "spec.replicas: Input should be less than or equal to 3" in said
    assert "9876" not in said and "pydantic.dev" not in said


def test_a_refusal_is_forbidden_by_default_as_controller_runtime_s(server: WebhookServer) -> None:
    # kubectl then says "Error from server (Forbidden): admission webhook ... denied ..."
    from mcruntime.webhook import denied

    assert Denied("no").reason == denied("no").reason == "Forbidden"
    assert Denied("no", code=422).reason == ""
    assert Denied("no", code=422, reason="Invalid").reason == "Invalid"
    server.register("/forbid", lambda req: denied("not here"))
    resp = post(server, "/forbid", review())[1]["response"]
    assert resp["status"] == {
        "code": 403,
        "message": "not here",
        "reason": "Forbidden",
        "status": "Failure",
    }
