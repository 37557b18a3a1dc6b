"""Values written as kube-apiserver's Go code writes them."""

from __future__ import annotations

from typing import Any

import pytest

from mcruntime.envtest._gofmt import go_json


@pytest.mark.parametrize(
    ("value", "written"),
    [
        # encoding/json: keys sorted, compact, HTML characters and U+2028/9 escaped
        ({"b": "<&>", "a": "é\u2028\n"}, '{"a":"é\\u2028\\n","b":"\\u003c\\u0026\\u003e"}'),
        ([True, None, [], {}], "[true,null,[],{}]"),
        # an int64 as it is; a float64 in the shortest form, exponent from 1e21 and below 1e-6
        (-(2**63), "-9223372036854775808"),
        (2**63, "9223372036854776000"),
        (12345678901234567890, "12345678901234567000"),
        (2.0, "2"),
        (1.5, "1.5"),
        (0.000012345, "0.000012345"),
        (1e20, "100000000000000000000"),
        (1e21, "1e+21"),
        (1.5e300, "1.5e+300"),
        (1e-7, "1e-7"),
        (1.25e-10, "1.25e-10"),
        (0.0, "0"),
    ],
)
def test_go_json_writes_what_gos_json_encoder_writes(value: Any, written: str) -> None:
    assert go_json(value) == written + "\n"
