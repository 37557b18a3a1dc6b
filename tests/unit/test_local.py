"""The local cluster is named ``""`` and reads ``local`` wherever a name is shown."""

from __future__ import annotations

from mcruntime._threads import thread_name
from mcruntime.multicluster import LOCAL, display_name


def test_the_local_cluster_reads_local_and_others_read_their_name():
    assert LOCAL == ""
    assert display_name(LOCAL) == "local"
    assert display_name("eu-1") == "eu-1"
    assert thread_name("engage", LOCAL) == "mcruntime/engage/local"
