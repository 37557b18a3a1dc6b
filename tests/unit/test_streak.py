"""Failure streaks: the first failure is a warning, the rest debug, the recovery one info line."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from mcruntime._streak import FailureStreaks, describe_error
from mcruntime.errors import APIError, Forbidden, Unreachable

pytestmark = pytest.mark.timeout(10)

log = logging.getLogger("mcruntime.test.streak")


def lines(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str]]:
    return [(r.levelname, r.getMessage()) for r in caplog.records if r.name == log.name]


def test_the_first_failure_warns_the_rest_are_debug_and_the_recovery_is_one_info_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger=log.name)
    streaks = FailureStreaks(log, "informer kind=v1/ConfigMap")
    assert streaks.failed("eu-1", "listing", "refused", retry="retrying with backoff")
    assert not streaks.failed("eu-1", "listing", "refused again", retry="retrying with backoff")
    assert not streaks.failed("eu-1", "listing", "still no", retry="retrying with backoff")
    assert streaks.failures(("eu-1", "listing")) == 3
    assert streaks.recovered("eu-1", "listing") == 3
    assert streaks.recovered("eu-1", "listing") == 0  # no streak: no line
    assert lines(caplog) == [
        (
            "WARNING",
            "cluster=eu-1 informer kind=v1/ConfigMap: listing failed: refused; retrying with "
            "backoff; further failures are logged at debug level until it recovers",
        ),
        (
            "DEBUG",
            "cluster=eu-1 informer kind=v1/ConfigMap: listing still failing (2): refused again",
        ),
        ("DEBUG", "cluster=eu-1 informer kind=v1/ConfigMap: listing still failing (3): still no"),
        (
            "INFO",
            "cluster=eu-1 informer kind=v1/ConfigMap: listing works again after 3 failed attempts",
        ),
    ]


def test_a_new_streak_warns_again_and_one_failure_reads_in_the_singular(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger=log.name)
    streaks = FailureStreaks(log, "recorder")
    for _ in range(2):
        streaks.failed("", "writing events", "no", retry="dropped")
        streaks.recovered("", "writing events", detail=" (their events were dropped)")
    assert lines(caplog) == 2 * [
        (
            "WARNING",
            "cluster=local recorder: writing events failed: no; dropped; further failures are "
            "logged at debug level until it recovers",
        ),
        (
            "INFO",
            "cluster=local recorder: writing events works again after 1 failed attempt "
            "(their events were dropped)",
        ),
    ]


def test_streaks_are_per_key(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger=log.name)
    streaks = FailureStreaks(log, "garbage collection")
    for _ in range(3):
        for cluster in ("a", "b"):
            for what in ("listing ConfigMap", "deleting ConfigMap"):
                streaks.failed(cluster, what, "down", retry="retrying")
    warnings = [m for level, m in lines(caplog) if level == "WARNING"]
    assert len(warnings) == 4  # one per cluster and call
    assert streaks.recovered("a", "listing ConfigMap") == 3
    assert streaks.failures(("a", "deleting ConfigMap")) == 3
    assert streaks.failures(("b", "listing ConfigMap")) == 3
    # one streak for failures told in different words: the key
    streaks.failed("a", "reviewing the token", "x", retry="r", key="reviews")
    assert not streaks.failed(
        "a", "reviewing whether u may get /metrics", "x", retry="r", key="reviews"
    )
    assert streaks.recovered("a", "reviewing scrapes", key="reviews") == 2


def test_forget_ends_a_streak_without_a_line_and_the_next_failure_warns_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger=log.name)
    streaks = FailureStreaks(log, "health")
    assert streaks.fail("eu-1") == 1
    assert streaks.fail("eu-1") == 2
    streaks.forget("eu-1")
    assert streaks.failures("eu-1") == 0
    assert streaks.succeed("eu-1") == 0
    assert streaks.failed("eu-1", "probing", "hung", retry="probing again", key="eu-1")
    assert [level for level, _ in lines(caplog)] == ["WARNING"]


def test_a_failure_not_about_one_cluster_has_no_cluster_prefix(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger=log.name)
    streaks = FailureStreaks(log, "file provider")
    streaks.failed(None, "reading kubeconfig /k/a.yaml", "YAMLError", retry="skipped")
    streaks.recovered(None, "reading kubeconfig /k/a.yaml")
    assert [m.split(":")[0] for _, m in lines(caplog)] == ["file provider", "file provider"]


def test_errors_read_as_the_library_words_them_and_others_with_their_type() -> None:
    assert describe_error("a reason") == "a reason"
    forbidden = Forbidden("configmaps is forbidden", cluster_name="eu-1")
    assert describe_error(forbidden) == "[cluster eu-1] configmaps is forbidden"
    unreachable = Unreachable("no answer within 5s", cluster_name="eu-1")
    assert describe_error(unreachable) == str(unreachable)
    assert describe_error(KeyError("uid")) == "KeyError: 'uid'"
    assert describe_error(TimeoutError()) == "TimeoutError"


def test_a_group_reads_as_its_message_and_each_of_its_errors() -> None:
    unreachable = Unreachable("no answer within 5s", cluster_name="eu-1")
    group = ExceptionGroup("copy failed", [unreachable, KeyError("uid")])
    assert describe_error(group) == f"copy failed: {unreachable}; KeyError: 'uid'"


def test_concurrent_failures_start_exactly_one_streak_and_are_all_counted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger=log.name)
    streaks = FailureStreaks(log, "metrics")
    threads, per_thread = 8, 200
    start = threading.Barrier(threads)
    firsts: list[bool] = []
    firsts_lock = threading.Lock()

    def fail() -> None:
        start.wait()
        for _ in range(per_thread):
            first = streaks.failed("", "reviewing", "hung", retry="refused", key="reviews")
            with firsts_lock:
                firsts.append(first)

    workers = [threading.Thread(target=fail, name=f"streak-test-{i}") for i in range(threads)]
    for t in workers:
        t.start()
    for t in workers:
        t.join(5)
    assert not any(t.is_alive() for t in workers)
    assert firsts.count(True) == 1
    assert streaks.recovered("", "reviewing scrapes", key="reviews") == threads * per_thread
    records = lines(caplog)
    assert [level for level, _ in records].count("WARNING") == 1
    numbers = sorted(int(m.split("(")[1].split(")")[0]) for level, m in records if level == "DEBUG")
    assert numbers == list(range(2, threads * per_thread + 1))  # every failure counted once
    assert records[-1] == (
        "INFO",
        f"cluster=local metrics: reviewing scrapes works again after {threads * per_thread} "
        "failed attempts",
    )


def test_a_success_begun_before_the_last_failure_does_not_end_the_streak(caplog):
    """Two threads doing the same thing: a call begun before a fault and answered after
    the other thread's failure was logged is not a recovery (no "works again", and the
    next failure is not a new streak's warning)."""
    caplog.set_level(logging.DEBUG)
    streaks = FailureStreaks(logging.getLogger("test.streak"), "gc")
    began = time.monotonic()
    streaks.failed("c", "listing", "refused", retry="later")  # the other thread's failure
    assert streaks.recovered("c", "listing", since=began) == 0  # the late answer
    streaks.failed("c", "listing", "refused", retry="later")
    assert [r.levelname for r in caplog.records] == ["WARNING", "DEBUG"]
    assert streaks.recovered("c", "listing", since=time.monotonic()) == 2
    assert [r.levelname for r in caplog.records] == ["WARNING", "DEBUG", "INFO"]


def test_describe_error_never_raises_on_an_exception_whose_str_fails() -> None:
    """A user's exception is logged even when its ``__str__`` raises (it reads what its
    ``__init__`` never set): the line says so, as ``traceback`` does."""

    class BadStr(Exception):
        def __str__(self) -> str:
            return self.detail  # type: ignore[attr-defined,no-any-return]

    assert describe_error(BadStr()) == "BadStr: <str() failed: AttributeError>"
    group = ExceptionGroup("members failed", [BadStr(), ValueError("x")])
    assert describe_error(group) == (
        "members failed: BadStr: <str() failed: AttributeError>; ValueError: x"
    )


def test_its_lines_carry_their_cluster_and_its_fields_as_record_attributes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger=log.name)
    streaks = FailureStreaks(log, "informer kind=v1/ConfigMap", {"kind": "v1/ConfigMap"})
    streaks.failed("eu-1", "listing and watching", Unreachable("refused"), retry="retrying")
    streaks.failed("eu-1", "listing and watching", Unreachable("refused"), retry="retrying")
    streaks.recovered("eu-1", "listing and watching")
    streaks.failed(None, "reading", "broken", retry="skipped")
    records = [r for r in caplog.records if r.name == log.name]
    assert [(r.levelname, r.cluster, r.kind) for r in records[:3]] == [  # type: ignore[attr-defined]
        ("WARNING", "eu-1", "v1/ConfigMap"),
        ("DEBUG", "eu-1", "v1/ConfigMap"),
        ("INFO", "eu-1", "v1/ConfigMap"),
    ]
    assert records[3].kind == "v1/ConfigMap" and not hasattr(records[3], "cluster")  # type: ignore[attr-defined]


def test_a_message_of_several_lines_is_logged_on_one_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A log shipper reads a line at a time: a plain-text error body (kube-apiserver's
    ``/readyz`` lists a line per check) or a user's multi-line message must not split a
    warning into lines that are no records."""
    body = "[-]etcd failed: reason withheld\n[-]informer-sync failed: reason withheld\n"
    error = APIError.from_response(503, body, cluster_name="eu-1")
    assert "\n" in str(error)  # (the error keeps its text: the health check reads its lines)
    caplog.set_level(logging.INFO, logger=log.name)
    streaks = FailureStreaks(log, "informer kind=v1/ConfigMap")
    streaks.failed("eu-1", "listing and watching", error, retry="retrying with backoff")
    ((_, warning),) = lines(caplog)
    assert warning.startswith(
        "cluster=eu-1 informer kind=v1/ConfigMap: listing and watching failed: [cluster eu-1] "
        "[-]etcd failed: reason withheld; [-]informer-sync failed: reason withheld; retrying"
    )
    assert describe_error(ValueError("2 errors\n  name: required\r\n  port: not a number\n")) == (
        "ValueError: 2 errors; name: required; port: not a number"
    )
    assert describe_error(ValueError("one line")) == "ValueError: one line"
    assert describe_error(ValueError("")) == "ValueError"
