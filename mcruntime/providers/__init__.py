"""Built-in cluster providers; each module registers itself in the ``mcruntime.providers`` entry-point group.

- ``single``: one named cluster
- ``clusters``: a set you add to and remove from code
- ``file``: kubeconfig files, directories and globs, watched for changes
- ``namespace``: each namespace of one cluster as a virtual cluster
- ``multi``: several providers under name prefixes (``<prefix>#<cluster>``)
- ``nop``: no clusters
- ``embedded``: a fleet of in-process API servers (the zero-set-up default)
"""
