"""Admission and conversion webhooks for one cluster or a whole fleet.

The [`WebhookServer`][mcruntime.webhook.WebhookServer] (one per manager, see
[`Manager.get_webhook_server`][mcruntime.manager.Manager.get_webhook_server]) serves
``admission.k8s.io/v1`` AdmissionReviews and ``apiextensions.k8s.io/v1``
ConversionReviews over HTTPS. Every request knows its cluster: hooks are served
at ``/clusters/<name>/<path>`` for provider clusters and at ``<path>`` for the
local one, and ``request.cluster_name`` says which. Build webhooks with
[`webhook_managed_by`][mcruntime.builder.webhook_managed_by].
"""

from mcruntime._exports import publish
from mcruntime.webhook._admission import (
    ADMISSION_API_VERSION,
    AdmissionHandler,
    AdmissionRequest,
    AdmissionResponse,
    Denied,
    allowed,
    denied,
    errored,
    patched,
)
from mcruntime.webhook._certs import CertWatcher, GeneratedCertificates, generate_certificates
from mcruntime.webhook._conversion import (
    CONVERSION_API_VERSION,
    ConversionError,
    ConversionRequest,
    Converter,
    Spoke,
)
from mcruntime.webhook._defaulting import Defaulter, DefaultingHandler
from mcruntime.webhook._server import Hook, WebhookServer, WebhookServerOptions, cluster_path
from mcruntime.webhook._validating import ValidatingHandler, Validator

__all__ = [
    "ADMISSION_API_VERSION",
    "CONVERSION_API_VERSION",
    "AdmissionHandler",
    "AdmissionRequest",
    "AdmissionResponse",
    "CertWatcher",
    "ConversionError",
    "ConversionRequest",
    "Converter",
    "Defaulter",
    "DefaultingHandler",
    "Denied",
    "GeneratedCertificates",
    "Hook",
    "Spoke",
    "ValidatingHandler",
    "Validator",
    "WebhookServer",
    "WebhookServerOptions",
    "allowed",
    "cluster_path",
    "denied",
    "errored",
    "generate_certificates",
    "patched",
]

publish(__name__, globals(), __all__)
