"""ManagerOptions' numbers are checked when given: a NaN, infinite, negative or zero number
of seconds (say read with ``float(os.getenv(...))``), or a fractional engagement bound, is
refused naming the option and the value, as controller-runtime's options are refused when
the manager is made, instead of being met later as a hang or a tight loop."""

from __future__ import annotations

import math

import pytest

import mcruntime
from mcruntime.manager import ManagerOptions
from mcruntime.providers.clusters import Provider

pytestmark = pytest.mark.timeout(10)


@pytest.mark.parametrize(
    ("option", "value", "wanted"),
    [
        ("engage_sync_timeout", -5, "more than 0"),
        ("graceful_shutdown_timeout", math.nan, "0 or more"),
        ("graceful_shutdown_timeout", math.inf, "0 or more"),
        ("cluster_health_interval", 0, "more than 0"),
        ("cluster_health_timeout", "5", "more than 0"),
        ("cluster_health_retry_interval", 0, "more than 0"),
        ("lease_duration", -1.0, "more than 0"),
    ],
)
def test_a_bad_number_of_seconds_is_refused_naming_the_option_and_value(
    option: str, value: object, wanted: str
) -> None:
    with pytest.raises(ValueError) as err:
        ManagerOptions(**{option: value})  # type: ignore[arg-type]
    assert str(err.value) == (
        f"ManagerOptions.{option} must be a number of seconds, {wanted}, got {value!r}"
    )


@pytest.mark.parametrize("value", [0, 2.5, True])
def test_max_concurrent_engagements_must_be_a_whole_number(value: object) -> None:
    with pytest.raises(ValueError, match=rf"max_concurrent_engagements .* got {value!r}$"):
        ManagerOptions(max_concurrent_engagements=value)  # type: ignore[arg-type]


def test_an_option_set_after_it_was_made_is_checked_by_the_manager() -> None:
    options = ManagerOptions()
    options.engage_sync_timeout = math.nan
    with pytest.raises(ValueError, match=r"^ManagerOptions\.engage_sync_timeout .* got nan$"):
        mcruntime.Manager(provider=Provider(), options=options)


def test_zero_graceful_shutdown_and_the_defaults_are_accepted() -> None:
    ManagerOptions(graceful_shutdown_timeout=0, max_concurrent_engagements=4)


def test_the_cluster_health_check_names_its_bad_setting() -> None:
    from mcruntime.manager._health import ClusterHealth

    with pytest.raises(ValueError, match=r"^cluster health retry_interval .* got 0$"):
        ClusterHealth(retry_interval=0)
