"""Quantities written as apimachinery's ``Quantity.String()`` writes them, and the decoder's errors."""

from __future__ import annotations

import pytest

from mcruntime.envtest._quantity import FORMAT_ERROR, _parse, canonical, parse

pytestmark = pytest.mark.timeout(10)


@pytest.mark.parametrize(
    ("written", "stored"),
    [
        # decimal: the largest exponent of three that leaves a whole mantissa
        ("0.5", "500m"),
        ("0.25", "250m"),
        ("1.25", "1250m"),
        ("2000m", "2"),
        ("1500", "1500"),
        ("2000", "2k"),
        ("1200000", "1200k"),
        ("1000M", "1G"),
        ("0.1m", "100u"),
        ("+1", "1"),
        ("-1.5", "-1500m"),
        # kept to the nano, rounded away from zero
        ("0.0000000001", "1n"),
        ("-0.0000000001", "-1n"),
        # binary: whole and at least 1024, else written in decimal
        ("1.5Gi", "1536Mi"),
        ("1024Mi", "1Gi"),
        ("512Ki", "512Ki"),
        ("1.5Ki", "1536"),
        ("0.5Ki", "512"),
        ("0.5Mi", "512Ki"),
        # an exponent stays one
        ("1e3", "1e3"),
        ("1E3", "1e3"),
        ("129e6", "129e6"),
        ("1.5e3", "1500"),
        ("1e-3", "1e-3"),
        ("1E", "1E"),
        # zero in any form, and JSON numbers
        ("0", "0"),
        ("0Gi", "0"),
        (1, "1"),
        (1.5, "1500m"),
        ("123456789012345678901234567890", "123456789012345678901234567890"),
    ],
)
def test_a_quantity_is_written_canonical(written: object, stored: str) -> None:
    assert canonical(written) == stored


@pytest.mark.parametrize(
    ("written", "why"),
    [
        ("1Gb", FORMAT_ERROR),
        ("abc", FORMAT_ERROR),
        ("", FORMAT_ERROR),
        ("512Gu", "unable to parse quantity's suffix"),
        ("1e", "unable to parse quantity's suffix"),
        ("1.2.3", "unable to parse numeric part of quantity"),
        ("1e999999999", "unable to parse numeric part of quantity"),
    ],
)
def test_what_is_not_a_quantity_says_why(written: str, why: str) -> None:
    assert parse(written) is None and canonical(written) is None
    assert _parse(written) == why
