"""Child process for the kill -9 test: writes to a store until it is killed.

    python durability_writer.py ROOT FLUSH_DISK_TYPE ROUND THREADS [retention]

Each producer thread puts messages (single puts and small batches) whose content follows from
their key (``durability_check.message_for``) and prints ``ACK key offset queue_offset`` for each
one only after ``put``/``put_batch`` returned. ``READY`` is printed once the store is open and
its table encoder loaded.
With ``retention`` every CommitLog file but the last expires at once (``fileReservedTime=0``) and a
cleaner thread deletes them (``delete_expired_files(force=True)``) every 50 ms while producers write,
printing ``DELETED`` each time it removed a file (so a test can kill after retention really ran).
"""
from __future__ import annotations

import random
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from durability_check import SETTINGS, message_for  # noqa: E402

from rocketlake.store import Message, MessageStore  # noqa: E402


def main() -> None:
    root, mode, rnd, threads = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    retention = sys.argv[5:] == ["retention"]
    ms = MessageStore(root, flushDiskType=mode, **SETTINGS, **({"fileReservedTime": 0} if retention else {}))
    out_lock = threading.Lock()

    def ack(results, keys) -> None:
        lines = "".join(f"ACK {k} {r.commitlog_offset} {r.queue_offset}\n" for k, r in zip(keys, results))
        with out_lock:
            sys.stdout.write(lines)
            sys.stdout.flush()

    def produce(t: int) -> None:
        rng = random.Random(rnd * 1000 + t)
        seq = 0
        while True:
            n = 1 if rng.random() < 0.6 else rng.randint(2, 8)
            keys = [f"r{rnd}-t{t}-s{seq + i}" for i in range(n)]
            seq += n
            msgs = []
            for k in keys:
                topic, qid, tags, body = message_for(k)
                msgs.append(Message(topic, body, queue_id=qid, tags=tags, keys=k))
            results = [ms.put(msgs[0])] if n == 1 else ms.put_batch(msgs)
            ack(results, keys)

    # a writer's open loads no write path: the first batch would import the table encoder and
    # pyarrow (0.15-0.4 s) inside the kill window after READY, which is meant to fall among writes
    _ = ms.table_encoder
    print("READY", flush=True)  # before any producer can write to stdout
    for t in range(threads):
        threading.Thread(target=produce, args=(t,), daemon=True).start()
    while retention:
        time.sleep(0.05)
        if ms.delete_expired_files(force=True).commitlog_files:
            with out_lock:
                print("DELETED", flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
