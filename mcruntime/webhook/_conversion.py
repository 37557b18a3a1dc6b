"""Conversion: ``apiextensions.k8s.io/v1`` ConversionReview and hub-and-spoke converters.

One version of a kind is the hub; every other version (a spoke) converts to
and from the hub, so N versions need N-1 pairs of functions, as in
controller-runtime. A conversion from spoke A to spoke B goes A -> hub -> B.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from mcruntime._callables import refuse_coroutine_function
from mcruntime._patch import copy_json

__all__ = [
    "CONVERSION_API_VERSION",
    "ConversionError",
    "ConversionRequest",
    "Converter",
    "Spoke",
]

CONVERSION_API_VERSION = "apiextensions.k8s.io/v1"

Convert = Callable[[dict[str, Any]], dict[str, Any]]


class ConversionError(ValueError):
    """A conversion that cannot be done; its message reaches the API server's client."""


@runtime_checkable
class Spoke(Protocol):
    """One non-hub version: ``to_hub(obj)`` and ``from_hub(obj)`` convert whole objects (dicts).

    Both get a copy they may change and return the converted object;
    ``apiVersion`` is set afterwards by the converter.
    """

    def to_hub(self, obj: dict[str, Any], /) -> dict[str, Any]: ...

    def from_hub(self, obj: dict[str, Any], /) -> dict[str, Any]: ...


@dataclass(frozen=True)
class _FuncSpoke:
    to: Convert
    back: Convert

    def to_hub(self, obj: dict[str, Any]) -> dict[str, Any]:
        return self.to(obj)

    def from_hub(self, obj: dict[str, Any]) -> dict[str, Any]:
        return self.back(obj)


@dataclass(frozen=True)
class ConversionRequest:
    """One ConversionReview request and the cluster that sent it."""

    cluster_name: str
    uid: str
    desired_api_version: str
    objects: list[dict[str, Any]]

    @classmethod
    def from_review(cls, review: Any, cluster_name: str = "") -> ConversionRequest:
        if not isinstance(review, dict):
            raise ValueError("the body is not a JSON object")
        if review.get("apiVersion") != CONVERSION_API_VERSION or review.get("kind") != (
            "ConversionReview"
        ):
            raise ValueError(
                f"expected apiVersion {CONVERSION_API_VERSION} kind ConversionReview, got "
                f"{review.get('apiVersion')!r} {review.get('kind')!r}"
            )
        req = review.get("request")
        if not isinstance(req, dict) or not isinstance(req.get("uid"), str) or not req["uid"]:
            raise ValueError("the ConversionReview has no request uid")
        desired = req.get("desiredAPIVersion")
        if not isinstance(desired, str) or "/" not in desired:
            raise ValueError(f"bad desiredAPIVersion {desired!r}")
        objects = req.get("objects") or []
        if not isinstance(objects, list) or not all(isinstance(o, dict) for o in objects):
            raise ValueError("request.objects must be a list of objects")
        return cls(cluster_name, req["uid"], desired, objects)


def conversion_review(
    uid: str, converted: list[dict[str, Any]] | None, error: str | None = None
) -> dict[str, Any]:
    """The ConversionReview answering ``uid``: the converted objects, or a failure message."""
    resp: dict[str, Any] = {"uid": uid}
    if error is None:
        resp["convertedObjects"] = converted or []
        resp["result"] = {"status": "Success"}
    else:
        resp["convertedObjects"] = []
        resp["result"] = {"status": "Failure", "message": error}
    return {"apiVersion": CONVERSION_API_VERSION, "kind": "ConversionReview", "response": resp}


class Converter:
    """Converts the objects of one group and kind between its versions through a hub version.

    ``spokes`` maps each other version to a [`Spoke`][mcruntime.webhook.Spoke]
    or a pair of functions ``(to_hub, from_hub)``.
    """

    def __init__(
        self, group: str, kind: str, hub: str, spokes: Mapping[str, Spoke | tuple[Convert, Convert]]
    ) -> None:
        if not hub or "/" in hub:
            raise ValueError(f"hub must be a version name such as 'v2', got {hub!r}")
        if hub in spokes:
            raise ValueError(f"version {hub!r} is the hub; it cannot also be a spoke")
        self.group, self.kind, self.hub = group, kind, hub
        self.spokes: dict[str, Spoke] = {}
        for version, spoke in spokes.items():
            if isinstance(spoke, tuple) and len(spoke) == 2:
                self.spokes[version] = _FuncSpoke(*spoke)
            elif isinstance(spoke, Spoke):
                self.spokes[version] = spoke
            else:
                raise TypeError(
                    f"spoke {version!r}: give an object with to_hub/from_hub "
                    "or a pair of functions (to_hub, from_hub)"
                )
            s = self.spokes[version]
            pair: tuple[Any, Any] = (
                (s.to, s.back)
                if isinstance(s, _FuncSpoke)
                else (
                    s.to_hub,
                    s.from_hub,
                )
            )
            for fn, what in zip(pair, ("to_hub", "from_hub"), strict=True):
                refuse_coroutine_function(
                    fn,
                    f"spoke {version!r}: the {what}",
                    "the webhook server converts on a thread of its own and answers with what "
                    "it returns: pass a plain function (def)",
                )

    @property
    def versions(self) -> list[str]:
        return [self.hub, *self.spokes]

    def convert(self, obj: dict[str, Any], desired_api_version: str) -> dict[str, Any]:
        """``obj`` in ``desired_api_version``; ConversionError for unknown versions or kinds."""
        group, _, to = desired_api_version.rpartition("/")
        api_version = obj.get("apiVersion")
        if not isinstance(api_version, str) or "/" not in api_version:
            raise ConversionError(f"object has no group apiVersion: {api_version!r}")
        ogroup, _, frm = api_version.rpartition("/")
        if group != self.group or ogroup != self.group or obj.get("kind") != self.kind:
            raise ConversionError(
                f"this converter serves {self.kind}.{self.group}, not "
                f"{obj.get('kind')} {api_version} -> {desired_api_version}"
            )
        for v in (frm, to):
            if v != self.hub and v not in self.spokes:
                raise ConversionError(f"unknown version {v!r} of {self.kind}.{self.group}")
        if frm == to:
            return obj
        out = copy_json(obj)
        if frm != self.hub:
            out = self.spokes[frm].to_hub(out)
        if to != self.hub:
            out = {**out, "apiVersion": f"{self.group}/{self.hub}"}
            out = self.spokes[to].from_hub(out)
        return {**out, "apiVersion": desired_api_version, "kind": self.kind}
