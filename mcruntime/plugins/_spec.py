from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict

from mcruntime.multicluster import Provider


def _comma_separated(value: Any) -> Any:
    return [part for part in value.split(",") if part] if isinstance(value, str) else value


#: a list of strings an option also takes as one comma-separated string, as
#: ``--provider-option paths=a,b`` gives it (repeating the option gives a list too)
CommaSeparated = Annotated[list[str], BeforeValidator(_comma_separated)]


class ProviderOptions(BaseModel):
    """Base of every provider's options: unknown options are errors, strings are coerced."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)


@dataclass(frozen=True)
class ProviderSpec:
    """What a plugin declares about one provider.

    ``api_version`` is required: the provider API (``"MAJOR.MINOR"``) the plugin was
    written for, as a literal (``api_version="1.0"``), not the installed
    `PROVIDER_API_VERSION`, which would always match. A provider is refused when its
    major version differs from this mcruntime's or its minor version is newer.
    """

    name: str
    options: type[BaseModel]
    #: builds the provider from the validated options (an instance of ``options``)
    factory: Callable[[Any], Provider]
    description: str = ""
    #: the provider API the plugin was built for ("MAJOR.MINOR"), e.g. "1.0"
    api_version: str = field(kw_only=True)
