from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict

from mcruntime.multicluster import PROVIDER_API_VERSION, Provider


class ProviderOptions(BaseModel):
    """Base of every provider's options: unknown options are errors, strings are coerced."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)


@dataclass(frozen=True)
class ProviderSpec:
    """What a plugin declares about one provider."""

    name: str
    options: type[BaseModel]
    #: builds the provider from the validated options (an instance of ``options``)
    factory: Callable[[Any], Provider]
    description: str = ""
    api_version: str = PROVIDER_API_VERSION
