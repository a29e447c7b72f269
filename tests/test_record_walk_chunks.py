"""The walk's threads walk and dispatch a chunk of rows at a time (``record_walk.CHUNK_ROWS``):
their batches and dispatch columns are those of the whole batch computed at once; a walk that
drops its rows hands over the same results."""
from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rocketlake.store import Message, MessageStore
from rocketlake.store.config import load_config
from rocketlake.store.kernels import records as kr
from rocketlake.store.record_walk import CHUNK_ROWS, PLAN_FIELDS, RecordBatch, Walk
from rocketlake.store.recovery import _planned
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
            for name in ("tags_code", "to_queue", "key_counts", "key_hashes"):
                assert np.array_equal(getattr(got, name), getattr(want, name)), name
            assert int(got.key_counts.sum()) == got.key_hashes.size
        # index keys per record (no UNIQ_KEY here): none, "a", "a b", "  é x ", "k😀 z", "   "
        counts = np.concatenate([b.dispatch(levels).key_counts for b in batches])
        assert counts[:6].tolist() == [0, 1, 2, 2, 2, 0]


def test_a_walk_that_drops_its_rows_hands_over_what_was_computed_from_them(tmp_path: Path) -> None:
    """``keep_rows=False`` (recovery's re-dispatch): the same batches, dispatch columns, topics,
    plan columns and ``prepare`` results as a walk that keeps its rows, and no rows (reading a
    field of them fails); a walk that would drop rows it computed nothing from is refused."""
    root = tmp_path / "s"
    n = 3 * CHUNK_ROWS + 5
    with MessageStore(root, mappedFileSizeCommitLog=1 << 20) as ms:  # several files
        ms.put_batch([Message(f"t{i % 3}", b"y" * (i % 90), i % 4, tags=f"g{i % 5}", keys=f"k{i}")
                      for i in range(n)])
    levels = load_config({}).delay_levels_ms
    prepare = partial(_planned, levels)
    with StoreFiles(root.resolve(), load_config({}), sizes_from_files=True) as files:
        log = files.commitlog
        kept = list(log.walk(delay_levels_ms=levels, prepare=prepare))
        # segments of 64 KiB: the walk threads take turns with few row buffers, many times
        walk = Walk([(mf.start, mf.size, np.frombuffer(mf.mm, dtype=np.uint8)) for mf in log.files.files],
                    log.min_offset, log.max_offset, check_crc=True, delay_levels_ms=levels,
                    segment=64 << 10, prepare=prepare, keep_rows=False)
        dropped = list(walk)
        with pytest.raises(ValueError, match="dispatch columns"):
            log.walk(keep_rows=False)
    assert all(b.raw.shape == (len(b), 0) for b in dropped)
    with pytest.raises(IndexError):
        dropped[0].column(kr.BODY_LEN)  # not a walked column: read from the rows
    with pytest.raises(ValueError, match="without its rows"):
        dropped[0].dispatch((1000,))  # other delay levels: the kernels would read no rows
    assert len(dropped) > len(kept)  # other batch bounds: compared record by record
    assert _records(dropped, levels, prepare) == _records(kept, levels, prepare)
    assert sum(map(len, kept)) == n


def _records(batches: list[RecordBatch], levels: tuple[int, ...], prepare: Any) -> dict[str, list[Any]]:
    """What a re-dispatch reads of ``batches``, record by record in CommitLog order: topic names,
    walked columns, dispatch columns, the prepared plan's units (by queue, sorted) and index
    keys, and its out-of-range offsets."""
    out: dict[str, list[Any]] = {"topic": [], "units": [], "keys": [], "odd": []}
    for b in batches:
        ids, names = b.topics
        out["topic"] += [names[i] for i in ids.tolist()]
        for f in PLAN_FIELDS:
            out.setdefault(f"field {f}", []).extend(b.column(f).tolist())
        cols = b.dispatch(levels)
        for name in ("tags_code", "to_queue", "key_counts", "key_hashes"):
            out.setdefault(name, []).extend(getattr(cols, name).tolist())
        planned, odd = b.prepare(prepare)
        for (topic, queue), lo, hi in zip(planned.queues, planned.starts, planned.ends):
            out["units"] += [(planned.topics[topic], queue, q, u) for q, u in
                             zip(planned.queue_offsets[lo:hi].tolist(), planned.units[lo:hi].tolist())]
        out["keys"] += list(zip(planned.key_hashes.tolist(), planned.key_offsets.tolist(),
                                planned.key_ts.tolist()))
        out["odd"] += odd.tolist()
    out["units"].sort()
    return out
