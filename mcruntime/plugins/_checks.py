"""Checks of the names a provider's options carry (labels, selectors, object names), each in
kube-apiserver's words, so a provider refuses a bad option when it is built rather than
failing at every request to its hub."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from mcruntime import _selectors

__all__ = [
    "did_you_mean",
    "dns_label_problems",
    "dns_subdomain_problems",
    "label_key_problems",
    "label_selector_problem",
    "label_value_problems",
]


def label_key_problems(key: str) -> list[str]:
    """Why ``key`` is no label key (apimachinery's ``IsQualifiedName``); empty when it is one."""
    return _selectors.qualified_name_problems(key)


def label_value_problems(value: str) -> list[str]:
    """Why ``value`` is no label value (``IsValidLabelValue``); empty when it is one."""
    return _selectors.label_value_problems(value)


def dns_label_problems(name: str) -> list[str]:
    """Why ``name`` is no DNS label (``IsDNS1123Label``: a namespace's name); empty when it
    is one."""
    return _selectors.dns_label_problems(name)


def dns_subdomain_problems(name: str) -> list[str]:
    """Why ``name`` is no DNS subdomain (``IsDNS1123Subdomain``: most objects' names, a
    namespace's excepted); empty when it is one."""
    return _selectors.subdomain_problems(name)


def label_selector_problem(selector: str) -> str | None:
    """Why ``selector`` is no label selector (``labels.Parse``), saying where; None when it
    parses."""
    try:
        _selectors.LabelSelector.parse(selector)
    except _selectors.SelectorError as exc:
        return str(exc)
    return None


def did_you_mean(wrong: str, known: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` for the one of ``known`` closest to ``wrong`` (a misspelled
    name), or ``""`` when none is close."""
    close = difflib.get_close_matches(wrong, list(known), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""
