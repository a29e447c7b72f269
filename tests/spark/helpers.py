"""Shared helpers of the Spark tests: the library-written store's settings and messages, and a
byte snapshot of a store tree. Test modules import this (``from .helpers import ...``); fixtures
stay in conftest.py."""
from __future__ import annotations

import os
import struct
import subprocess
import sys
from pathlib import Path

from goldens import GOLDEN

from rocketlake.store import TRANSACTION_COMMIT, TRANSACTION_PREPARED, TRANSACTION_ROLLBACK, Message, codec

#: Small files so a few hundred messages span several CommitLog, ConsumeQueue and index files.
SMALL = {"mappedFileSizeCommitLog": 65536, "mappedFileSizeConsumeQueue": 600,
         "maxHashSlotNum": 64, "maxIndexNum": 200}

#: Store time of the first message of :func:`library_messages`.
BASE_TS = 1_763_800_000_000


def library_messages() -> list[Message]:
    """Messages covering the dispatch cases: tags, keys, UNIQ_KEY, transactions, delays, IPv6.
    The first 240 share one store time (index files opened in the same ms get bumped names),
    then store times step 1.5 s every 60 messages (timeDiffs differ)."""
    out = []
    for i in range(420):
        tx = (0, TRANSACTION_PREPARED, TRANSACTION_COMMIT, TRANSACTION_ROLLBACK)[i % 11 % 4] \
            if i % 11 < 4 else 0
        out.append(Message(
            topic=("orders", "payments", "audit-log")[i % 3], body=f"body-{i}".encode() * (1 + i % 7),
            queue_id=i % 4, tags=None if i % 5 == 0 else f"tag-{i % 6}",
            keys=f"cust-{i % 9} order-{i}" if i % 4 else None,
            properties={"UNIQ_KEY": f"{i:032X}"} if i % 3 == 0 else None,
            delay_level=(i % 20) if i % 13 == 0 else 0, sys_flag=tx,
            born_host="[fe80::1]:1234" if i % 7 == 0 else "10.0.0.7:4321",
            store_host="[2001:db8::5]:10911" if i % 17 == 0 else None,
            store_timestamp=BASE_TS + max(0, i // 60 - 3) * 1500))
    return out


def sets(settings: dict) -> list[str]:
    """``settings`` as ``--set NAME=VALUE`` arguments."""
    return [a for k, v in settings.items() for a in ("--set", f"{k}={v}")]


def rocketlake(*args: str) -> subprocess.CompletedProcess:
    """The ``rocketlake`` command of this environment, run as a process."""
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    return subprocess.run([str(Path(sys.executable).parent / "rocketlake"), *args], env=env,
                          capture_output=True, text=True, timeout=600)


def tree_bytes(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` by relative path."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def v2_record() -> bytes:
    """RocketMQ's first record of tests/golden/rocketmq-pr3535 turned into a v2 record: MAGIC_V2,
    a 2-byte TOPICLENGTH, TOTALSIZE + 1 (docs/FORMAT.md §2)."""
    src = GOLDEN / "rocketmq-pr3535" / "store" / "commitlog" / "00000000000000000000"
    v1 = bytearray(src.read_bytes()[:172])
    body_len = struct.unpack_from(">i", v1, 84)[0]
    t = 88 + body_len
    v2 = v1[:t] + struct.pack(">h", v1[t]) + v1[t + 1:]
    struct.pack_into(">ii", v2, 0, len(v2), codec.MAGIC_V2)
    return bytes(v2)
