import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from workbench.trace import intervals as iv

spans = st.lists(st.tuples(st.integers(0, 60), st.integers(0, 20)), max_size=12)


def covered(pairs):
    points = set()
    for s, d in pairs:
        points.update(range(s, s + d))
    return points


def as_set(intervals):
    return covered([(int(s), int(e - s)) for s, e in zip(*intervals)])


def build(pairs):
    starts = np.array([s for s, _ in pairs], dtype=np.int64)
    return iv.merge(starts, starts + np.array([d for _, d in pairs], dtype=np.int64))


@settings(max_examples=200, deadline=None)
@given(a=spans, b=spans)
def test_set_operations_match_brute_force(a, b):
    A, B = build(a), build(b)
    assert as_set(A) == covered(a) and iv.length(A) == len(covered(a))
    assert as_set(iv.intersect(A, B)) == covered(a) & covered(b)
    assert as_set(iv.subtract(A, B)) == covered(a) - covered(b)
    assert np.all(A[0][1:] > A[1][:-1])  # disjoint, not touching


@settings(max_examples=100, deadline=None)
@given(a=spans, windows=st.lists(st.tuples(st.integers(0, 80), st.integers(0, 30)), max_size=5))
def test_overlap_with_windows(a, windows):
    A = build(a)
    starts = np.array([s for s, _ in windows], dtype=np.int64)
    ends = starts + np.array([d for _, d in windows], dtype=np.int64)
    got = iv.overlap_with_windows(A, starts, ends)
    want = [len(covered(a) & set(range(s, e))) for s, e in zip(starts, ends)]
    assert got.tolist() == want


def test_union_length_counts_overlap_once():
    assert iv.union_length([0, 5, 20], [10, 15, 25]) == 20
