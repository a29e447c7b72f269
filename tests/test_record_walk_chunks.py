"""The walk's threads walk and dispatch a chunk of rows at a time (``record_walk.CHUNK_ROWS``):
their batches and dispatch columns are those of the whole batch computed at once."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from rocketlake.store import Message, MessageStore
from rocketlake.store.config import load_config
from rocketlake.store.record_walk import CHUNK_ROWS, RecordBatch
from rocketlake.store.store_files import StoreFiles


def test_chunked_dispatch_is_the_whole_batchs(tmp_path: Path) -> None:
    root = tmp_path / "s"
    n = 2 * CHUNK_ROWS + 77  # three chunks, the last one short
    keys = ["", "a", "a b", "  é x ", "k😀 z", "   "]
    with MessageStore(root) as ms:
        ms.put_batch([Message("t" if i % 3 else "u", b"x" * (i % 50), i % 4,
                              tags=f"g{i % 7}" if i % 5 else None, keys=keys[i % len(keys)] or None)
                      for i in range(n)])
    cfg = load_config({})
    levels = cfg.delay_levels_ms
    with StoreFiles(root.resolve(), cfg, sizes_from_files=True) as files:
        log = files.commitlog
        batches = list(log.walk(delay_levels_ms=levels))
        assert sum(len(b) for b in batches) == n
        for b in batches:
            got = b.dispatch(levels)
            want = RecordBatch(b.buf, b.raw.copy()).dispatch(levels)  # computed at once
            for name in ("tags_code", "to_queue", "key_counts", "key_hashes", "property_spans"):
                assert np.array_equal(getattr(got, name), getattr(want, name)), name
            assert int(got.key_counts.sum()) == got.key_hashes.size
        # index keys per record (no UNIQ_KEY here): none, "a", "a b", "  é x ", "k😀 z", "   "
        counts = np.concatenate([b.dispatch(levels).key_counts for b in batches])
        assert counts[:6].tolist() == [0, 1, 2, 2, 2, 0]
