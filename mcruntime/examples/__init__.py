"""Runnable examples: ``python -m mcruntime.examples.<name>``; each needs no cluster by default.

- ``configmaps``: the uniform reconciler over a fleet; clusters join and leave while it runs
- ``sync_local_to_remote``: copies labelled ConfigMaps from the local cluster to every
  provider cluster, with a finalizer that removes the copies when the source goes
- ``namespaces``: each namespace of one cluster reconciled as a cluster of its own
- ``crd_status``: a custom resource that runs a Job in every cluster and rolls their
  states up into its status
- ``tenants``: a kubebuilder-shaped operator in every cluster: owned children written
  with server-side apply, a finalizer, conditions, events, a field index, a webhook
"""
