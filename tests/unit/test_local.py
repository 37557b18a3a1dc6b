"""The local cluster is named ``""`` and reads ``local`` wherever a name is shown."""

from __future__ import annotations

from mcruntime._threads import thread_name
from mcruntime.multicluster import LOCAL, display_name


def test_the_local_cluster_reads_local_and_others_read_their_name():
    assert LOCAL == ""
    assert display_name(LOCAL) == "local"
    assert display_name("eu-1") == "eu-1"
    assert thread_name("engage", LOCAL) == "mcruntime/engage/local"
    # a thread working for no one cluster names none (it is not the local cluster's)
    assert thread_name("manager", None, "stop") == "mcruntime/manager/stop"
    assert thread_name("health") == "mcruntime/health"


def test_a_name_with_control_characters_reads_escaped_on_one_line_and_others_unchanged():
    """A kubeconfig context name is free text: one with a newline or a terminal escape must
    not split a log line, a thread name or an error's ``[cluster ...]`` prefix in two."""
    forged = "x\nWARNING mcruntime.manager: cluster=prod FORGED\x1b[2J\u2028"
    shown = display_name(forged)
    assert shown == repr(forged)
    assert len(f"cluster={shown} added".splitlines()) == 1
    assert "\x1b" not in shown
    assert len(thread_name("engage", forged).splitlines()) == 1
    for name in ("eu-1", "/k/a.yaml+ctx@user", "prod eu", "café", "a\\nb"):
        assert display_name(name) == name
