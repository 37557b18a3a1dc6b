"""`Result` says what is wrong with it when it is made, not when the controller reads it."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest

from mcruntime import RequeueAfter, Result


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"requeue_after": "5"}, "Result.requeue_after must be seconds (a number) or a timedelta"),
        ({"requeue_after": True}, "Result.requeue_after must be seconds"),
        ({"requeue_after": float("nan")}, "Result.requeue_after must be seconds"),
        # "never" computed as inf once killed every worker of the controller in the queue
        (
            {"requeue_after": float("inf")},
            "not inf (a finite number: for no requeue, leave it None)",
        ),
        ({"requeue_after": float("-inf")}, "Result.requeue_after must be seconds"),
        ({"requeue": "yes"}, "Result.requeue must be a bool, not 'yes'"),
        ({"priority": 1.5}, "Result.priority must be an int, not 1.5"),
    ],
)
def test_a_result_of_the_wrong_type_is_refused_when_made(
    fields: dict[str, Any], message: str
) -> None:
    with pytest.raises(TypeError, match=re.escape(message)):
        Result(**fields)


@pytest.mark.parametrize(
    "fields",
    [
        {},
        {"requeue": True, "priority": 10},
        {"requeue_after": 5},
        {"requeue_after": 0.25},
        {"requeue_after": timedelta(minutes=1)},
        {"requeue_after": -3.0},  # a computed delay that has passed: nothing, as in Go
    ],
)
def test_results_of_the_right_types_are_made(fields: dict[str, Any]) -> None:
    assert Result(**fields) == Result(**fields)


def test_a_far_but_finite_delay_is_a_result() -> None:
    """``timedelta.max`` is finite (the work queue copes with it): made, not refused."""
    assert Result(requeue_after=timedelta.max).requeue_after == timedelta.max
    assert RequeueAfter(timedelta.max).delay == timedelta.max.total_seconds()
