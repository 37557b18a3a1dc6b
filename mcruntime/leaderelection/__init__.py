"""Leader election on a coordination.k8s.io/v1 Lease, with client-go's semantics.

[`LeaderElector`][mcruntime.leaderelection.LeaderElector] elects one leader among replicas; the Lease helpers
([`LeaseClient`][mcruntime.leaderelection.LeaseClient], [`LeaseHolder`][mcruntime.leaderelection.LeaseHolder], [`LeaseObserver`][mcruntime.leaderelection.LeaseObserver]) are the one
place mcruntime reads, writes and times Leases, reused by the sharded
coordinator. A [`Manager`][mcruntime.Manager] with ``leader_election=True`` runs
an elector on its local cluster (the manager's own glue, in `mcruntime.manager`, as
controller-runtime runs leader election inside its manager).
"""

from mcruntime._exports import publish
from mcruntime.leaderelection._elector import (
    DEFAULT_LEASE_DURATION,
    DEFAULT_RENEW_DEADLINE,
    DEFAULT_RETRY_PERIOD,
    LeaderElectionLost,
    LeaderElector,
    default_identity,
    default_namespace,
)
from mcruntime.leaderelection._lease import (
    LEASE_KIND,
    LeaseClient,
    LeaseHolder,
    LeaseObserver,
    LeaseRecord,
    micro_time,
)
from mcruntime.leaderelection._watchdog import Watchdog

__all__ = [
    "DEFAULT_LEASE_DURATION",
    "DEFAULT_RENEW_DEADLINE",
    "DEFAULT_RETRY_PERIOD",
    "LEASE_KIND",
    "LeaderElectionLost",
    "LeaderElector",
    "LeaseClient",
    "LeaseHolder",
    "LeaseObserver",
    "LeaseRecord",
    "Watchdog",
    "default_identity",
    "default_namespace",
    "micro_time",
]

publish(__name__, globals(), __all__)
