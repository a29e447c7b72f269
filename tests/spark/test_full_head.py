"""The range parser's full head (for the archive) agrees with the library decoder on RocketMQ's
own golden CommitLog (IPv4 and IPv6 hosts, transactions, delays)."""
from __future__ import annotations

import json

import numpy as np
from goldens import GOLDEN_498

from rocketlake.store.commitlog import CommitLog
from rocketlake.store.config import load_config
from rocketlake.transforms.commitlog_batch import parse_range


def test_full_head_fields_match_the_library_decoder():
    cfg = load_config(json.loads((GOLDEN_498 / "settings.json").read_text()))
    log = CommitLog(GOLDEN_498 / "store", cfg)
    log.files.load()
    want = {r.commitlog_offset: r for r in log.scan()}
    log.close()
    rows = []
    for f in sorted((GOLDEN_498 / "store/commitlog").iterdir()):
        buf = np.memmap(f, dtype=np.uint8, mode="r")
        rows += parse_range(buf, int(f.name), 0, buf.size, with_body=True, full_head=True).to_pylist()
    assert len(rows) == len(want) == 400
    assert sum("[" in r["born_host"] for r in rows) == 21 and sum("[" in r["store_host"] for r in rows) == 18
    for row in rows:
        r = want[row["commitlog_offset"]]
        assert (row["magic"], row["body_crc"], row["flag"], row["born_host"], row["store_host"],
                row["store_addr"], row["store_port"], row["reconsume_times"],
                row["prepared_transaction_offset"], row["body"]) == (
            r.magic & 0xFFFFFFFF, r.body_crc, r.flag, r.born_host, r.store_host, r.store_addr,
            r.store_port, r.reconsume_times, r.prepared_transaction_offset, r.body)
