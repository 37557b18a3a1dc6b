"""pytest fixtures for tests against embedded API servers or a real cluster.

Registered as the ``pytest11`` entry point ``mcruntime``, so installing
mcruntime makes these fixtures available to any test suite:

``envtest_server``
    A started [`APIServer`][mcruntime.envtest.APIServer] for one test, closed after it.
``envtest_fleet``
    A started [`Fleet`][mcruntime.envtest.Fleet] of three servers
    (``cluster-0`` .. ``cluster-2``) for one test, stopped after it.
``make_envtest_server(**kwargs)`` / ``make_envtest_fleet(n=3, **kwargs)``
    Factories for servers/fleets with other options (``make_envtest_fleet(names=[...])``
    names the clusters); everything they started is stopped when the test ends.
``kube_backend`` (session)
    The cluster a backend-neutral suite (``tests/conformance``) runs against, a
    [`KubeBackend`][mcruntime.envtest.pytest_plugin.KubeBackend], chosen by environment:

    - default: one embedded API server for the whole session;
    - ``MCRUNTIME_TEST_KUBECONFIG=path`` (and optionally ``MCRUNTIME_TEST_CONTEXT``):
      an existing cluster;
    - ``MCRUNTIME_TEST_BACKEND=k3s``: k3s started through ``testcontainers``;
      skipped, with the reason, when no Docker engine answers.
``kube_api_client``
    A new ``kubernetes.client.ApiClient`` for ``kube_backend``, closed after the test.
``kube_namespace``
    A freshly created namespace with a random name, deleted after the test, so
    suites can share a real cluster.

A test that used ``make_envtest_server``, ``make_envtest_fleet`` (or the fixtures built
on them), ``kube_backend`` or ``kube_api_client`` and whose body started mcruntime threads that outlive it and its fixtures (a
manager or cluster it never stopped) gets a
[`LeakedThreadsWarning`][mcruntime.envtest.pytest_plugin.LeakedThreadsWarning] naming
them: left alone they go on running, and logging, through the tests after it.

Markers ``docker`` (needs a Docker engine) and ``slow`` are registered.
"""

from __future__ import annotations

import contextlib
import copy
import os
import threading
import time
import uuid
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from kubernetes.client import ApiClient

    from mcruntime.envtest import APIServer, Fleet

__all__ = [
    "BACKEND_ENV",
    "CONTEXT_ENV",
    "FAULT_INJECTION_SKIP",
    "KUBECONFIG_ENV",
    "KubeBackend",
    "LeakedThreadsWarning",
    "backend_from_env",
    "docker_unavailable_reason",
    "start_embedded_backend",
    "start_k3s_backend",
    "start_kubeconfig_backend",
]

BACKEND_ENV = "MCRUNTIME_TEST_BACKEND"
KUBECONFIG_ENV = "MCRUNTIME_TEST_KUBECONFIG"
CONTEXT_ENV = "MCRUNTIME_TEST_CONTEXT"
FAULT_INJECTION_SKIP = "needs the embedded server's fault injection"
DEFAULT_DOCKER_HOST = "unix:///var/run/docker.sock"
DOCKER_PING_TIMEOUT = 3
K3S_IMAGE = "rancher/k3s:v1.31.4-k3s1"
#: seconds a test's threads get to end after it, before they count as leaked (a test that
#: leaks spends that much longer in teardown)
LEAK_GRACE = 5.0

_MARKERS = (
    "docker: needs a Docker engine (skipped with the reason when none answers)",
    "slow: long-running tests",
)


class KubeBackend:
    """A cluster to test against: an embedded API server, a kubeconfig, or k3s.

    ``name`` is ``"embedded"``, ``"kubeconfig"`` or ``"k3s"``; ``server`` is the
    [`APIServer`][mcruntime.envtest.APIServer] for the embedded backend and ``None``
    otherwise. Fault-injection helpers skip the calling test on real clusters.
    """

    def __init__(
        self,
        name: str,
        kubeconfig: dict[str, Any],
        *,
        context: str | None = None,
        server: APIServer | None = None,
        close: Callable[[], None] | None = None,
    ) -> None:
        self.name = name
        self.server = server
        self.context = context
        self._kubeconfig = kubeconfig
        self._close = close

    def __repr__(self) -> str:
        return f"KubeBackend({self.name!r})"

    @property
    def embedded(self) -> bool:
        """True when the backend is mcruntime's embedded API server."""
        return self.server is not None

    def kubeconfig(self) -> dict[str, Any]:
        """A copy of the kubeconfig (dict) that reaches the backend."""
        return copy.deepcopy(self._kubeconfig)

    def api_client(self) -> ApiClient:
        """A new ``ApiClient`` for the backend; the caller closes it.

        Loaded as mcruntime's own clients are: a client certificate and key stay in memory,
        never in the temporary files the ``kubernetes`` loader writes (and leaves behind
        when the process is killed).
        """
        return _api_client(self.kubeconfig(), self.context)

    def client_with_token(self, token: str | None) -> ApiClient:
        """An ``ApiClient`` for the backend with the kubeconfig's credentials
        replaced by bearer ``token`` (``None``: no credentials at all)."""
        cfg = self.kubeconfig()
        user = _context_user(cfg, self.context)
        user.clear()
        if token is not None:
            user["token"] = token
        client = _api_client(cfg, self.context)
        if token is None:
            client.configuration.api_key.pop("authorization", None)
        return client

    def require_server(self, reason: str = FAULT_INJECTION_SKIP) -> APIServer:
        """The embedded server; skips the calling test on other backends."""
        if self.server is None:
            pytest.skip(f"{reason} (backend: {self.name})")
        return self.server

    def read_only_client(self) -> ApiClient:
        """An ``ApiClient`` with the embedded server's read-only token (skips elsewhere)."""
        server = self.require_server("needs the embedded server's read-only token")
        return _api_client(server.kubeconfig(read_only=True), None)

    def close(self) -> None:
        """Stop whatever the backend started (idempotent)."""
        close, self._close = self._close, None
        if close is not None:
            close()


def _api_client(kubeconfig: dict[str, Any], context: str | None) -> ApiClient:
    """An ``ApiClient`` for ``context`` of ``kubeconfig``, its certificates and keys
    handed to ssl from memory (mcruntime's own loader), never written to the temp dir."""
    from kubernetes.client import ApiClient

    from mcruntime._kubeconfig import load_config

    return ApiClient(load_config(config_dict=kubeconfig, context=context))


def _context_user(cfg: dict[str, Any], context: str | None) -> dict[str, Any]:
    name = context or cfg.get("current-context")
    ctx = next((c for c in cfg.get("contexts") or [] if c.get("name") == name), None)
    if ctx is None:
        raise ValueError(f"kubeconfig has no context {name!r}")
    user_name = ctx.get("context", {}).get("user")
    for entry in cfg.get("users") or []:
        if entry.get("name") == user_name:
            user: dict[str, Any] = entry.setdefault("user", {})
            return user
    raise ValueError(f"kubeconfig context {name!r} names unknown user {user_name!r}")


def start_embedded_backend(**server_kwargs: Any) -> KubeBackend:
    """Start one embedded API server and wrap it as a backend."""
    from mcruntime.envtest import APIServer

    server = APIServer("envtest", **server_kwargs).start()
    return KubeBackend("embedded", server.kubeconfig(), server=server, close=server.close)


def start_kubeconfig_backend(path: str, context: str | None = None) -> KubeBackend:
    """Use the existing cluster that kubeconfig ``path`` (and ``context``) names."""
    import yaml

    try:
        with open(path, encoding="utf-8") as f:
            cfg = yaml.safe_load(f)
    except OSError as e:
        raise pytest.UsageError(f"{KUBECONFIG_ENV}={path}: cannot read: {e.strerror}") from None
    if not isinstance(cfg, dict) or not cfg.get("contexts"):
        raise pytest.UsageError(f"{KUBECONFIG_ENV}={path}: not a kubeconfig with contexts")
    return KubeBackend("kubeconfig", cfg, context=context or None)


def docker_unavailable_reason() -> str | None:
    """``None`` if a Docker engine answers a ping, else why not (quick)."""
    host = os.environ.get("DOCKER_HOST") or DEFAULT_DOCKER_HOST
    try:
        import docker
    except ImportError as e:
        return f"the docker SDK is not installed ({e}); install mcruntime[test]"
    try:
        client = docker.from_env(timeout=DOCKER_PING_TIMEOUT)
        try:
            client.ping()
        finally:
            client.close()
    except Exception as e:
        return f"no Docker engine answers at {host}: {_short_error(e)}"
    return None


def _short_error(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0] if text else ''}"[:300]


def start_k3s_backend(image: str | None = None) -> KubeBackend:
    """Start k3s in Docker through testcontainers; skips when Docker is absent."""
    reason = docker_unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    import yaml

    try:
        from testcontainers.community.k3s import K3SContainer
    except ImportError:
        from testcontainers.k3s import K3SContainer

    container = K3SContainer(image or os.environ.get("MCRUNTIME_TEST_K3S_IMAGE") or K3S_IMAGE)
    container.start()
    try:
        cfg = yaml.safe_load(container.config_yaml())
    except BaseException:
        container.stop()
        raise
    return KubeBackend("k3s", cfg, close=container.stop)


def backend_from_env(environ: dict[str, str] | None = None) -> KubeBackend:
    """The backend the environment asks for (see the module docstring)."""
    env = os.environ if environ is None else environ
    kind = (env.get(BACKEND_ENV) or "").strip().lower()
    path = env.get(KUBECONFIG_ENV)
    if kind in ("", "embedded") and not path:
        # like a real cluster: kube-root-ca.crt in every namespace
        return start_embedded_backend(root_ca_configmap=True)
    if kind in ("", "kubeconfig") and path:
        return start_kubeconfig_backend(path, env.get(CONTEXT_ENV))
    if kind == "kubeconfig":
        raise pytest.UsageError(f"{BACKEND_ENV}=kubeconfig needs {KUBECONFIG_ENV}=<path>")
    if kind == "k3s":
        return start_k3s_backend()
    raise pytest.UsageError(
        f"{BACKEND_ENV}={kind!r}: expected 'embedded', 'kubeconfig' or 'k3s'"
        + (f" (or unset it to use {KUBECONFIG_ENV})" if path else "")
    )


_PRESTARTED = pytest.StashKey["KubeBackend | BaseException"]()


def pytest_configure(config: pytest.Config) -> None:
    registered = "\n".join(config.getini("markers"))
    for line in _MARKERS:
        if f"{line.split(':', 1)[0]}:" not in registered:
            config.addinivalue_line("markers", line)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start k3s before the first test, so its slow start counts against no test's timeout."""
    if (os.environ.get(BACKEND_ENV) or "").strip().lower() != "k3s":
        return
    if not any("kube_backend" in getattr(item, "fixturenames", ()) for item in session.items):
        return
    try:
        session.config.stash[_PRESTARTED] = start_k3s_backend()
    except BaseException as e:
        if not isinstance(e, (pytest.skip.Exception, Exception)):
            raise
        session.config.stash[_PRESTARTED] = e


def pytest_sessionfinish(session: pytest.Session) -> None:
    started = session.config.stash.get(_PRESTARTED, None)
    if isinstance(started, KubeBackend):
        started.close()


class LeakedThreadsWarning(pytest.PytestWarning):
    """A test left mcruntime threads running: a manager or cluster it started and never
    stopped. Turn it into a failure with ``-W error::mcruntime.envtest.pytest_plugin.LeakedThreadsWarning``
    (or ``filterwarnings``)."""


def _test_threads() -> set[threading.Thread]:
    """mcruntime's threads a test may have started (the envtest servers' loop is shared)."""
    from mcruntime._threads import mcruntime_threads

    return {t for t in mcruntime_threads() if not t.name.startswith("mcruntime/envtest/")}


def _leak_report(leaked: list[threading.Thread]) -> str:
    counts = Counter(t.name for t in leaked)
    names = ", ".join(f"{n} (x{c})" if c > 1 else n for n, c in sorted(counts.items()))
    return (
        f"the test left {len(leaked)} mcruntime thread(s) running: {names}. Stop what it "
        "started before it ends (a Manager: `with mgr:` or mgr.stop(); a Cluster: "
        "cluster.stop()), or they go on running, and logging, through the tests after it"
    )


_THREADS_BEFORE = pytest.StashKey[set[threading.Thread]]()
#: the fixtures whose tests are checked for threads left running
_CHECKED_FIXTURES = frozenset(
    {"make_envtest_server", "make_envtest_fleet", "kube_backend", "kube_api_client"}
)


def _runs_threads(value: object) -> bool:
    """Whether ``value`` is a mcruntime object that may start threads of its own during a
    test (a Manager, a Cluster, a provider); envtest's servers and fleets run theirs in the
    shared envtest loop, which the check leaves out."""
    module = type(value).__module__ or ""
    return module.split(".")[0] == "mcruntime" and not module.startswith("mcruntime.envtest")


def _envtest_object(value: object) -> bool:
    """Whether ``value`` is an envtest server or fleet (a test that uses one is checked)."""
    return (type(value).__module__ or "").startswith("mcruntime.envtest")


def _holds(value: object, kind: Callable[[object], bool]) -> bool:
    """Whether a fixture's value is of ``kind`` or holds one directly: an item of a tuple,
    list, set or dict, an attribute."""
    if kind(value):
        return True
    if isinstance(value, dict):
        parts: list[object] = [*value.values()]
    elif isinstance(value, (list, tuple, set, frozenset)):
        parts = [*value]
    else:
        parts = [*(getattr(value, "__dict__", None) or {}).values()]
    return any(kind(p) for p in parts)


def _shares_longer_lived_fixtures(item: pytest.Item) -> bool:
    """Whether ``item`` uses a fixture of the suite's own that outlives it (module, class,
    package or session scope) and whose value is (or directly holds) a mcruntime object
    that runs threads: what it runs (a manager shared by a module's tests) may start threads
    during the test, on first use, that are not the test's. Another (an autouse one setting
    log levels, a shared Fleet) does not turn the check off."""
    info = getattr(item, "_fixtureinfo", None)
    values = getattr(item, "funcargs", None) or {}
    for name, defs in getattr(info, "name2fixturedefs", {}).items():
        for fixture in defs:
            module = getattr(getattr(fixture, "func", None), "__module__", "") or ""
            if fixture.scope == "function" or module.startswith(("_pytest", __name__)):
                continue
            if name not in values or _holds(values[name], _runs_threads):
                return True  # (a value not seen: as before, not checked)
    return False


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """Note mcruntime's threads before the test body (the fixtures' are set up by then)."""
    values = getattr(item, "funcargs", None) or {}
    uses_envtest = _CHECKED_FIXTURES & set(getattr(item, "fixturenames", ())) or any(
        _holds(v, _envtest_object) for v in values.values()
    )
    if uses_envtest and not _shares_longer_lived_fixtures(item):
        item.stash[_THREADS_BEFORE] = _test_threads()
    return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    """Once every fixture of the test is torn down: warn of the threads its body left."""
    result = yield
    before = item.stash.get(_THREADS_BEFORE, None)
    if before is not None:
        deadline = time.monotonic() + LEAK_GRACE
        while True:  # threads being stopped get a moment to end
            leaked = [t for t in _test_threads() - before if t.is_alive()]
            if not leaked or time.monotonic() >= deadline:
                break
            time.sleep(0.05)
        if leaked:
            warnings.warn(LeakedThreadsWarning(_leak_report(leaked)), stacklevel=1)
    return result


@pytest.fixture
def make_envtest_server() -> Iterator[Callable[..., APIServer]]:
    """Factory: ``make_envtest_server(**kwargs)`` starts an APIServer, stopped at teardown."""
    from mcruntime.envtest import APIServer

    started: list[APIServer] = []

    def make(name: str = "envtest", **kwargs: Any) -> APIServer:
        server = APIServer(name, **kwargs)
        started.append(server)
        return server.start()

    yield make
    for server in reversed(started):
        with contextlib.suppress(Exception):
            server.close()


@pytest.fixture
def make_envtest_fleet() -> Iterator[Callable[..., Fleet]]:
    """Factory: ``make_envtest_fleet(n=3, **kwargs)`` starts a Fleet, stopped at teardown.

    ``names=[...]`` alone names the clusters (as many as it lists)."""
    from mcruntime.envtest import Fleet

    started: list[Fleet] = []

    def make(n: int | None = None, **kwargs: Any) -> Fleet:
        if n is None and kwargs.get("names") is None:
            n = 3
        fleet = Fleet(n, **kwargs)
        started.append(fleet)
        fleet.start()
        return fleet

    yield make
    for fleet in reversed(started):
        with contextlib.suppress(Exception):
            fleet.close()


@pytest.fixture
def envtest_server(make_envtest_server: Callable[..., APIServer]) -> APIServer:
    """A started embedded API server for one test."""
    return make_envtest_server()


@pytest.fixture
def envtest_fleet(make_envtest_fleet: Callable[..., Fleet]) -> Fleet:
    """A started fleet of three embedded API servers for one test."""
    return make_envtest_fleet(3)


@pytest.fixture(scope="session")
def kube_backend(request: pytest.FixtureRequest) -> Iterator[KubeBackend]:
    """The session's cluster (embedded, kubeconfig or k3s; see the module docstring)."""
    started = request.config.stash.get(_PRESTARTED, None)
    if isinstance(started, pytest.skip.Exception):
        pytest.skip(started.msg or "the k3s backend is unavailable")
    if isinstance(started, BaseException):
        raise RuntimeError(f"the k3s backend failed to start: {_short_error(started)}") from started
    backend = started if started is not None else backend_from_env()
    try:
        yield backend
    finally:
        backend.close()


@pytest.fixture
def kube_api_client(kube_backend: KubeBackend) -> Iterator[ApiClient]:
    """An ApiClient for ``kube_backend``, closed after the test."""
    client = kube_backend.api_client()
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def kube_namespace(kube_api_client: ApiClient) -> Iterator[str]:
    """A new namespace with a random name, deleted (not awaited) after the test."""
    from kubernetes import client

    core = client.CoreV1Api(kube_api_client)
    name = f"mcrt-{uuid.uuid4().hex[:10]}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    try:
        yield name
    finally:
        try:
            core.delete_namespace(name)
        except client.ApiException as e:
            if e.status != 404:
                raise
