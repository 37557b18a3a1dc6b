"""A finalizer registry: keys added to new objects, cleanups run and keys removed on delete.

After controller-runtime's ``pkg/finalizer``. Register each finalizer key with
its cleanup on a `Finalizers` (a method or a decorator), call
`Finalizers.finalize` in the reconciler and write what the `FinalizeResult`
says changed, with the client of the request's cluster. Works on plain dicts,
pydantic [`Resource`][mcruntime.client.Resource] views and ``kubernetes`` models.
"""

from mcruntime._exports import publish
from mcruntime.finalizer._finalizers import (
    FinalizeError,
    Finalizer,
    FinalizeResult,
    FinalizerFailed,
    Finalizers,
)

__all__ = ["FinalizeError", "FinalizeResult", "Finalizer", "FinalizerFailed", "Finalizers"]

publish(__name__, globals(), __all__)
