"""What verify needs of walked records' store times, in one compiled pass per batch
(``verify.StoreTimes``): the newest, and the records stored at a time outside a range (the
times the index can name a file by, ``codec.index_time``)."""
from __future__ import annotations

import numpy as np
import numpy.typing as npt

from rocketlake.store.kernels import kernel
from rocketlake.store.kernels.records import STORE_TS


@kernel
def outside(raw: npt.NDArray[np.int64], lo: int, hi: int) -> tuple[int, int, int]:
    """Of the walked rows ``raw`` (``kernels.records`` rows, at least one): (the newest store
    time, how many store times are outside ``[lo, hi]``, the first such row or -1)."""
    newest = raw[0, STORE_TS]
    odd, first = 0, -1
    for i in range(raw.shape[0]):
        ts = raw[i, STORE_TS]
        newest = max(newest, ts)
        if ts < lo or ts > hi:
            if first < 0:
                first = i
            odd += 1
    return newest, odd, first
