"""A store of 10,000 ConsumeQueues is read, written and recovered by processes allowed 256 open
descriptors: ConsumeQueue files are mapped only while in use, never one descriptor per file.

The store is written here, independently of the library, from SPEC.md's formats (§2 record
layout, §6 units): sparse files of the default sizes, so it takes seconds and little disk.
"""
from __future__ import annotations

import base64
import json
import resource
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest

from rocketlake.store.lazy_maps import LAZY_MAPS, LazyMappedFile

TOPICS, QUEUES, PER_QUEUE = 1000, 10, 2
COMMITLOG_FILE, CQ_FILE = 1073741824, 6000000  # SPEC.md §1 defaults
MAGIC_V1 = 0xDAA320A7
STORE_TS = 1_764_000_000_000
DESCRIPTORS = 256
WRITTEN = 250  # queues a writer adds one message to (a multiple of QUEUES)
REPO = Path(__file__).resolve().parents[2]


def _topic(t: int) -> str:
    return f"t{t:03d}"


def _record(offset: int, topic: str, queue_id: int, queue_offset: int, store_ts: int,
            body: bytes) -> bytes:
    """One CommitLog record, magic v1, IPv4 hosts (SPEC.md §2), tags "x"."""
    props, tb = b"TAGS\x01x", topic.encode()
    size = 91 + len(body) + len(tb) + len(props)
    host = bytes([127, 0, 0, 1])
    head = struct.pack(">iiiiiqqiq4siq4siiq", size, MAGIC_V1 - (1 << 32),
                       zlib.crc32(body) & 0x7FFFFFFF, queue_id, 0, queue_offset, offset, 0,
                       store_ts, host, 5000, store_ts, host, 10911, 0, 0)
    return (head + struct.pack(">i", len(body)) + body + struct.pack(">b", len(tb)) + tb
            + struct.pack(">h", len(props)) + props)


def _body(topic: str, queue_id: int, k: int) -> str:
    return f"{topic}/{queue_id}/{k}"


def _write_store(root: Path, topics: int = TOPICS, queues: int = QUEUES, per_queue: int = PER_QUEUE,
                 cq_file: int = CQ_FILE) -> None:
    """``topics`` x ``queues`` queues of ``per_queue`` messages each, stored round-robin over the
    queues, in ConsumeQueue files of ``cq_file`` bytes (``benchmarks/bench_many_queues.py`` writes
    its stores with it too)."""
    log = bytearray()
    units: dict[tuple[str, int], list[bytes]] = {}
    i = 0
    for k in range(per_queue):
        for t in range(topics):
            for q in range(queues):
                topic = _topic(t)
                rec = _record(len(log), topic, q, k, STORE_TS + i, _body(topic, q, k).encode())
                units.setdefault((topic, q), []).append(
                    struct.pack(">qiq", len(log), len(rec), _java_hash("x")))
                log += rec
                i += 1
    (root / "commitlog").mkdir(parents=True)
    with open(root / "commitlog" / f"{0:020d}", "wb") as f:
        f.write(log)
        f.truncate(COMMITLOG_FILE)
    last_ts = STORE_TS + i - 1  # SPEC.md §8: physic, logics, index timestamps
    (root / "checkpoint").write_bytes(struct.pack(">qqq", last_ts, last_ts, last_ts).ljust(4096, b"\0"))
    for (topic, q), us in units.items():
        qdir = root / "consumequeue" / topic / str(q)
        qdir.mkdir(parents=True)
        with open(qdir / f"{0:020d}", "wb") as f:
            f.write(b"".join(us))
            f.truncate(cq_file)


def _java_hash(s: str) -> int:
    h = 0
    for ch in s:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def _few_descriptors() -> None:
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (DESCRIPTORS, hard))


def _run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    p = subprocess.run([sys.executable, "-m", "rocketlake.jobs.cli", *args], input=stdin,
                       capture_output=True, text=True, cwd=REPO, timeout=120,
                       preexec_fn=_few_descriptors)
    assert p.returncode == 0, f"rocketlake {args[0]} exited {p.returncode}: {p.stderr[-2000:]}"
    return p


def _get(store: Path, topic: str, queue_id: int, offset: int) -> tuple[dict, list[str]]:
    out = _run("get", "--store", str(store), "--topic", topic, "--queue", str(queue_id),
               "--offset", str(offset), "--format", "json").stdout.splitlines()
    return json.loads(out[0]), [base64.b64decode(json.loads(line)["body_b64"]).decode()
                                for line in out[1:]]


@pytest.mark.skipif(resource.getrlimit(resource.RLIMIT_NOFILE)[1] < DESCRIPTORS,
                    reason="hard descriptor limit below the one the test sets")
def test_ten_thousand_queues_within_256_descriptors(tmp_path: Path) -> None:
    store = tmp_path / "store"
    _write_store(store)
    n_queues, n_records = TOPICS * QUEUES, TOPICS * QUEUES * PER_QUEUE

    report = json.loads(_run("verify", "--store", str(store), "--json").stdout)
    assert (report["records"], report["units"], report["problems"]) == (n_records, n_records, [])

    rows = [json.loads(line) for line in
            _run("topic-status", "--store", str(store), "--json").stdout.splitlines()]
    assert len(rows) == n_queues
    assert {(r["min_offset"], r["max_offset"]) for r in rows} == {(0, PER_QUEUE)}
    last = max(rows, key=lambda r: (r["topic"], r["queue_id"]))
    assert (last["topic"], last["queue_id"]) == (_topic(TOPICS - 1), QUEUES - 1)

    topic, qid = _topic(TOPICS - 1), QUEUES - 1
    status, bodies = _get(store, topic, qid, PER_QUEUE - 1)
    assert (status["status"], bodies) == ("FOUND", [_body(topic, qid, PER_QUEUE - 1)])

    # a writer open (normal recovery) writing one message to each of the last WRITTEN queues,
    # four times more than may be mapped at once (a quarter of the descriptors): written maps
    # are unmapped before they are flushed; then an open after a crash (abort left: abnormal
    # recovery)
    written = [(_topic(t), q) for t in range(TOPICS - WRITTEN // QUEUES, TOPICS) for q in range(QUEUES)]
    lines = "\n".join(json.dumps({"topic": t, "queue_id": q, "body": f"after {t}/{q}"})
                      for t, q in written)
    assert json.loads(_run("ingest", "--store", str(store), "-", stdin=lines).stdout)["messages"] == WRITTEN
    (store / "abort").touch()
    line = json.dumps({"topic": topic, "queue_id": qid, "body": "after-crash"})
    assert json.loads(_run("ingest", "--store", str(store), "-", stdin=line).stdout)["messages"] == 1
    assert not (store / "abort").exists()

    status, bodies = _get(store, topic, qid, 0)
    assert (status["status"], status["max_offset"]) == ("FOUND", PER_QUEUE + 2)
    assert bodies == [_body(topic, qid, k) for k in range(PER_QUEUE)] + [f"after {topic}/{qid}",
                                                                          "after-crash"]
    report = json.loads(_run("verify", "--store", str(store), "--json").stdout)
    assert (report["records"], report["units"], report["problems"]) == \
        (n_records + WRITTEN + 1, n_records + WRITTEN + 1, [])


def test_lazy_maps_stay_within_their_limit_and_keep_a_map_in_use(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Five files written through a cache of two live maps: at most two stay mapped, every
    write reads back (from the map or from the file once unmapped); a file whose mapping a
    numpy view holds stays mapped until the view goes."""
    monkeypatch.setattr(LAZY_MAPS, "limit", 2)
    files = [LazyMappedFile(tmp_path / f"{i * 40:020d}", i * 40, 40, create=True) for i in range(5)]
    try:
        view = np.frombuffer(files[0].mm, dtype=np.uint8)  # pins file 0's map
        for i, mf in enumerate(files):
            mf.write(0, bytes([i + 1]) * 40)
            assert len(LAZY_MAPS) <= 3  # the limit, and the pinned map
        assert view[0] == 1 and files[0].mapped
        del view
        for i in (1, 2):  # two maps made again: the one no view holds any more goes too
            files[i].write(0, bytes([i + 1]) * 40)
        assert not files[0].mapped
        assert len(LAZY_MAPS) == 2
        for i, mf in enumerate(files):
            out = np.empty(40, dtype=np.uint8)
            mf.read_into(0, out)
            assert bytes(out) == bytes([i + 1]) * 40
            assert (tmp_path / f"{i * 40:020d}").read_bytes() == bytes([i + 1]) * 40
    finally:
        for mf in files:
            mf.close()
    assert len(LAZY_MAPS) == 0
