"""`unique_rows` (trace/table.py) answers what numpy's row-wise unique answers: the same distinct rows in the same
order, the same dtype and each row's index, for any integer columns (negative codes, wide ranges, empty)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from tb_gpuinsight.trace.table import unique_rows

INTS = st.sampled_from([np.int8, np.int32, np.int64, np.uint16])


@settings(max_examples=200, deadline=None)
@given(INTS.flatmap(lambda dt: hnp.arrays(dt, hnp.array_shapes(min_dims=2, max_dims=2, min_side=0, max_side=40))))
def test_the_same_as_numpy_row_unique(stacked):
    want, want_inverse = np.unique(stacked, axis=0, return_inverse=True)
    got, inverse = unique_rows(stacked)
    assert got.dtype == want.dtype and got.shape == want.shape and np.array_equal(got, want)
    assert np.array_equal(inverse, want_inverse.reshape(-1))
    assert np.array_equal(got[inverse], stacked)


@pytest.mark.parametrize("stacked", [
    np.array([[2 ** 62, 0], [0, 2 ** 62], [2 ** 62, 0]], dtype=np.int64),  # ranges multiply past 2**62
    np.array([[-(2 ** 62), 5], [2 ** 61, 5]], dtype=np.int64),
    np.zeros((3, 0), dtype=np.int64),
])
def test_wide_or_empty_columns_take_numpys_way(stacked):
    want, want_inverse = np.unique(stacked, axis=0, return_inverse=True)
    got, inverse = unique_rows(stacked)
    assert np.array_equal(got, want) and np.array_equal(inverse, want_inverse.reshape(-1))
