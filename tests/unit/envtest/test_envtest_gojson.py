"""`_gojson`: Go's ``json.Unmarshal`` errors into a ``map[string]interface{}``, as
kube-apiserver quotes them for a docker configuration Secret (the scanner's syntax error
first, anywhere in the input; then a document that is not an object)."""

from __future__ import annotations

import pytest

from mcruntime.envtest._gojson import unmarshal_object_error

_MAP = "map[string]interface {}"


@pytest.mark.parametrize(
    "data",
    [b"{}", b' {"auths": {"r": {"auth": "eDp5"}}} \n', b"null", b'{"a": [1, -2.5e+3, true]}'],
)
def test_an_object_or_null_unmarshals(data: bytes) -> None:
    assert unmarshal_object_error(data) is None


@pytest.mark.parametrize(
    ("data", "error"),
    [
        (b"", "unexpected end of JSON input"),
        (b"  ", "unexpected end of JSON input"),
        (b'{"a": 1', "unexpected end of JSON input"),
        (b"x", "invalid character 'x' looking for beginning of value"),
        (b"{,}", "invalid character ',' looking for beginning of object key string"),
        (b'{"a" 1}', "invalid character '1' after object key"),
        (b'{"a": 1 "b"}', "invalid character '\"' after object key:value pair"),
        (b'{"a": [1 2]}', "invalid character '2' after array element"),
        (b"{} []", "invalid character '[' after top-level value"),
        (b'{"a": "\x01"}', "invalid character '\\x01' in string literal"),
        (b'{"a": "\\q"}', "invalid character 'q' in string escape code"),
        (b'{"a": "\\u12g4"}', "invalid character 'g' in \\u hexadecimal character escape"),
        (b'{"a": -x}', "invalid character 'x' in numeric literal"),
        (b'{"a": 1.}', "invalid character '}' after decimal point in numeric literal"),
        (b'{"a": 1e}', "invalid character '}' in exponent of numeric literal"),
        (b'{"a": nul}', "invalid character '}' in literal null (expecting 'l')"),
        # cut short: the scanner's end of input is a space
        (b"fals", "invalid character ' ' in literal false (expecting 'e')"),
        (b"{'a': 1}", "invalid character '\\'' looking for beginning of object key string"),
        (b"[]", f"json: cannot unmarshal array into Go value of type {_MAP}"),
        (b' "x"', f"json: cannot unmarshal string into Go value of type {_MAP}"),
        (b"-1.5", f"json: cannot unmarshal number into Go value of type {_MAP}"),
        (b"false", f"json: cannot unmarshal bool into Go value of type {_MAP}"),
    ],
)
def test_what_go_says_of_what_does_not_unmarshal(data: bytes, error: str) -> None:
    assert unmarshal_object_error(data) == error


def test_nesting_beyond_go_s_limit_is_refused() -> None:
    assert unmarshal_object_error(b"[" * 10001) == "invalid character '[' exceeded max depth"
