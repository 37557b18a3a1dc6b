"""Leader election on a coordination.k8s.io/v1 Lease, with client-go's semantics.

:class:`LeaderElector` elects one leader among replicas; the Lease helpers
(:class:`LeaseClient`, :class:`LeaseHolder`, :class:`LeaseObserver`) are the one
place mcruntime reads, writes and times Leases, reused by the sharded
coordinator. A :class:`~mcruntime.Manager` with ``leader_election=True`` runs
an elector on its local cluster (see :class:`ManagerLeadership`).
"""

from mcruntime.leaderelection._elector import (
    DEFAULT_LEASE_DURATION,
    DEFAULT_RENEW_DEADLINE,
    DEFAULT_RETRY_PERIOD,
    LeaderElectionLost,
    LeaderElector,
    default_identity,
    default_namespace,
)
from mcruntime.leaderelection._leadership import ManagerLeadership
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
    "ManagerLeadership",
    "Watchdog",
    "default_identity",
    "default_namespace",
    "micro_time",
]
