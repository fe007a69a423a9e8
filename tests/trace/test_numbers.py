import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workbench.trace.numbers import NA_INT, NumberError, to_int64_values, us_text_to_ns
from tests.support.synthetic import us_text


@pytest.mark.parametrize(
    "text, ns",
    [
        (b"1712345678901234.567", 1_712_345_678_901_234_567),
        (b"0", 0),
        (b"68.0", 68_000),
        (b"-5.5", -5_500),
        (b"12.34567", 12_346),
        (b"12.3454", 12_345),
        (b"1.5e3", 1_500_000),
        (b".5", 500),
        (b"0.0005", 1),
        (b"-0.0005", -1),
        (b"00012.100", 12_100),
        (b"9000000000000000.999", 9_000_000_000_000_000_999),
    ],
)
def test_exact_decimal_to_ns(text, ns):
    assert us_text_to_ns([b"1", text]).tolist() == [1_000, ns]


@pytest.mark.parametrize(
    "text", [b'"12"', b"null", b"-", b"1.2.3", b"99999999999999999999", b"", b"1e400", b"NaN"]
)
def test_not_a_number_names_the_index(text):
    with pytest.raises(NumberError) as info:
        us_text_to_ns([b"1", b"2", text])
    assert info.value.index == 2


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-(10**18), 9 * 10**18), min_size=1, max_size=50))
def test_round_trip_of_any_ns(values):
    texts = [us_text(v).encode() for v in values]
    assert us_text_to_ns(texts).tolist() == values


def test_int64_array_tolerates_varying_types():
    arr = to_int64_values([1, NA_INT, "0x10", "12", 3.0, 2.5, True, None, "abc"])
    assert arr.dtype == np.int64
    assert arr.tolist() == [1, NA_INT, 16, 12, 3, NA_INT, NA_INT, NA_INT, NA_INT]  # NA_INT: absent
    assert to_int64_values([1, 2]).dtype == np.int64
    assert to_int64_values([NA_INT]).tolist() == [NA_INT]
