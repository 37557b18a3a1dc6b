"""``mcruntime.cli`` as a kubebuilder author uses it in a container: the manager's flags
(``--leader-elect``, ``--metrics-bind-address``, ``--health-probe-bind-address``, durations as
Go writes them) set on the program's ManagerOptions, and bad values refused as argparse refuses
a bad flag (exit status 2, one line naming the flag)."""

from __future__ import annotations

import argparse
import logging
import threading
from pathlib import Path

import pytest
import yaml

import mcruntime
from mcruntime import cli
from mcruntime.cache import CacheOptions

pytestmark = pytest.mark.timeout(20)

#: a manager without a cluster: nothing is contacted
_NO_CLUSTER = ["--provider", "nop", "--local-cluster", "no"]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="op")
    cli.add_arguments(parser)
    cli.add_manager_arguments(parser)
    return parser


def _manager(argv: list[str], options: mcruntime.ManagerOptions | None = None) -> mcruntime.Manager:
    parser = _parser()
    return cli.manager_from_args(parser.parse_args(argv), parser=parser, options=options)


def _kubeconfig(tmp_path: Path) -> str:
    """A kubeconfig of a cluster nobody serves (a manager is made without contacting it)."""
    path = tmp_path / "config"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:1"}}],
                "users": [{"name": "u", "user": {}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "c",
            }
        )
    )
    return str(path)


def test_the_manager_flags_set_the_manager_options() -> None:
    mgr = _manager(
        [
            *_NO_CLUSTER,
            "--metrics-bind-address=:0",
            "--health-probe-bind-address",
            "127.0.0.1:0",
            "--metrics-secure",
            "--metrics-cert-path",
            "/certs",
            "--graceful-shutdown-timeout",
            "1m30s",
        ]
    )
    opts = mgr.options
    assert opts.metrics_bind_address == ":0"
    assert opts.health_probe_bind_address == "127.0.0.1:0"
    assert opts.metrics_secure is True and opts.metrics_cert_dir == "/certs"
    assert opts.graceful_shutdown_timeout == 90.0


def test_the_leader_election_flags_set_the_manager_options(tmp_path: Path) -> None:
    mgr = _manager(
        [
            "--kubeconfig",
            _kubeconfig(tmp_path),
            "--leader-elect",
            "--leader-election-id=op-lock",
            "--leader-election-namespace=ops",
            "--leader-elect-lease-duration=20s",
            "--leader-elect-renew-deadline=15000ms",
            "--leader-elect-retry-period=2.5",
        ]
    )
    opts = mgr.options
    assert opts.leader_election is True
    assert (opts.leader_election_id, opts.leader_election_namespace) == ("op-lock", "ops")
    assert (opts.lease_duration, opts.renew_deadline, opts.retry_period) == (20.0, 15.0, 2.5)


def test_flags_not_given_leave_the_programs_options_as_set(tmp_path: Path) -> None:
    """kubebuilder's main hard-codes the Lease name and takes ``--leader-elect`` from the chart."""
    program = mcruntime.ManagerOptions(
        leader_election_id="op-lock", metrics_bind_address=":9090", graceful_shutdown_timeout=5
    )
    mgr = _manager(["--kubeconfig", _kubeconfig(tmp_path), "--leader-elect"], program)
    assert mgr.options.leader_election and mgr.options.leader_election_id == "op-lock"
    assert mgr.options.metrics_bind_address == ":9090"
    assert mgr.options.graceful_shutdown_timeout == 5
    assert program.leader_election is False  # the program's own object is left alone
    # and --no-leader-elect turns off what the program turned on
    on = mcruntime.ManagerOptions(leader_election=True, leader_election_id="op-lock")
    assert not _manager(
        ["--kubeconfig", _kubeconfig(tmp_path), "--no-leader-elect"], on
    ).options.leader_election


def test_without_the_manager_flags_the_options_are_the_programs() -> None:
    """A program that declares a flag of the same name itself keeps its own meaning."""
    parser = argparse.ArgumentParser(prog="op")
    cli.add_arguments(parser)
    parser.add_argument("--metrics-bind-address", default="0")
    args = parser.parse_args([*_NO_CLUSTER, "--metrics-bind-address", ":8080"])
    options = mcruntime.ManagerOptions()
    assert cli.manager_from_args(args, parser=parser, options=options).options is options


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (
            ["--graceful-shutdown-timeout", "3x"],
            "argument --graceful-shutdown-timeout: '3x' is no duration: write it as 30s, "
            "1m30s, 500ms or a number of seconds",
        ),
        (["--leader-elect-lease-duration", "-5s"], "argument --leader-elect-lease-duration: "),
        (
            ["--leader-elect-retry-period", "0s"],
            "argument --leader-elect-retry-period: '0s': must be more than 0",
        ),
        (
            ["--metrics-bind-address", "8080"],
            "argument --metrics-bind-address: '8080': expected host:port or :port",
        ),
        (
            ["--health-probe-bind-address", ":http"],
            "argument --health-probe-bind-address: ':http': port 'http' is not a number",
        ),
    ],
)
def test_a_bad_flag_value_is_a_usage_error_naming_the_flag(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        _parser().parse_args([*_NO_CLUSTER, *argv])
    assert exit_.value.code == 2
    assert f"op: error: {says}" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (
            ["--leader-elect"],
            "--leader-elect needs --leader-election-id: the name of the Lease every replica shares",
        ),
        (
            ["--leader-elect", "--leader-election-id", "op-lock"],
            "--leader-elect needs a local cluster to hold the Lease: give --kubeconfig or "
            "--local-cluster yes, or run in a pod",
        ),
        (["--metrics-cert-path", "/certs"], "metrics_cert_dir is set but metrics_secure is not"),
    ],
)
def test_flags_the_manager_refuses_are_a_usage_error(
    argv: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        _manager([*_NO_CLUSTER, *argv])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: op ") and f"op: error: {says}\n" in err


def test_options_the_manager_refuses_are_a_usage_error_too(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A bad address in the program's options was a ValueError traceback, not ``error: ...``."""
    with pytest.raises(SystemExit) as exit_:
        _manager(_NO_CLUSTER, mcruntime.ManagerOptions(metrics_bind_address="8080"))
    assert exit_.value.code == 2
    assert "op: error: metrics_bind_address '8080': expected host:port" in capsys.readouterr().err


def test_run_answers_1_when_a_runnable_fails_and_its_traceback_is_logged_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The manager logs a failing runnable with its traceback; ``run()`` raised it again, and
    Python printed the same traceback a second time."""
    mgr = _manager(["--provider", "clusters"])

    def database(stop: threading.Event) -> None:
        raise RuntimeError("database gone")

    mgr.add(database)
    with caplog.at_level(logging.ERROR):
        assert cli.run(mgr) == 1
    assert [r.getMessage() for r in caplog.records if r.exc_info] == [
        "runnable RunnableFunc(database) failed: stopping the manager: database gone"
    ]
    assert [r.getMessage() for r in caplog.records if r.name == "mcruntime.cli"] == [
        "manager failed: database gone; exiting with status 1"
    ]


def test_run_answers_0_once_stopped_and_raises_what_is_no_failure_of_the_manager() -> None:
    mgr = _manager(["--provider", "clusters"])
    mgr.add(lambda stop: mgr.stop())
    assert cli.run(mgr) == 0

    class Bug(Exception):
        pass

    mgr = _manager(["--provider", "clusters"])

    def start() -> mcruntime.Manager:
        raise Bug("a bug of the program: its traceback is kept")

    mgr.start = start  # type: ignore[method-assign]
    with pytest.raises(Bug):
        cli.run(mgr)


def test_a_provider_option_without_a_provider_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """It was dropped without a word: a chart that forgot ``--provider`` ran on the local
    cluster only."""
    with pytest.raises(SystemExit) as exit_:
        _manager(["--provider-option", "namespace=fleet"])
    assert exit_.value.code == 2
    assert (
        "op: error: --provider-option 'namespace=fleet' needs --provider: there is no provider "
        "to take it (--provider none)\n"
    ) in capsys.readouterr().err


def test_python_m_mcruntime_says_its_version(capsys: pytest.CaptureFixture[str]) -> None:
    from mcruntime.__main__ import main

    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out == f"mcruntime {mcruntime.__version__}\n"


def test_watch_namespace_restricts_the_caches_of_the_programs_options() -> None:
    program = mcruntime.ManagerOptions(cache=CacheOptions(default_label_selector="app=op"))
    mgr = _manager(
        [*_NO_CLUSTER, "--watch-namespace", "team-a,team-b", "--watch-namespace=team-c"],
        program,
    )
    assert mgr.options.cache is not None
    assert mgr.options.cache.default_namespaces == ["team-a", "team-b", "team-c"]
    assert mgr.options.cache.default_label_selector == "app=op"
    assert program.cache is not None and program.cache.default_namespaces is None
    # without a cache of the program's: one with the defaults and these namespaces
    mgr = _manager([*_NO_CLUSTER, "--watch-namespace", "team-a"])
    assert mgr.options.cache == CacheOptions(default_namespaces=["team-a"])


def test_a_watch_namespace_that_is_no_namespace_name_is_a_usage_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit_:
        _parser().parse_args([*_NO_CLUSTER, "--watch-namespace", "team-a,Team_B"])
    assert exit_.value.code == 2
    assert "op: error: argument --watch-namespace: 'Team_B' is no namespace: " in (
        capsys.readouterr().err
    )
