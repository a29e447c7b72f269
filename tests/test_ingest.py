"""`rocketlake ingest` is all or nothing: a bad line anywhere leaves every file of the store byte
for byte as it was, and re-running the fixed input stores each line once."""
from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rocketlake.jobs.cli import main
from rocketlake.store import MessageStore

SMALL = ["--set", "mappedFileSizeCommitLog=4096", "--set", "mappedFileSizeConsumeQueue=200",
         "--set", "maxHashSlotNum=16", "--set", "maxIndexNum=20"]
REPO = Path(__file__).resolve().parent.parent


def _good(i: int) -> str:
    return json.dumps({"topic": "orders", "body": f"m{i}", "keys": f"k{i}"})


# a third line that is bad, and the text the error must name besides "line 3"
BAD_LINES = [
    ('{"topic": "orders", "body": ', "Expecting value"),
    ('["not", "an", "object"]', "JSON object"),
    ('{"topic": "orders", "body": "x", "colour": "red"}', "colour"),
    (json.dumps({"topic": "orders", "body": "x", "flag": 2 ** 31}), "flag"),
    (json.dumps({"topic": "orders", "body": "x", "reconsume_times": 2 ** 31}), "reconsume_times"),
    (json.dumps({"topic": "orders", "body": "x", "born_timestamp": 2 ** 63}), "born_timestamp"),
    (json.dumps({"topic": "orders", "body": "x", "store_timestamp": -1}), "store_timestamp"),
    (json.dumps({"topic": "orders", "body": "x", "born_host": "10.0.0.1:70000"}), "70000"),
    (json.dumps({"topic": "orders", "body": "x", "tags": 5}), "tags"),
    (json.dumps({"topic": "orders", "body": "x", "keys": {"a": "b"}}), "keys"),
    (json.dumps({"topic": "orders", "body": "x", "flag": True}), "flag"),
    (json.dumps({"topic": None, "body": "x"}), "topic"),
    (json.dumps({"topic": "bad topic", "body": "x"}), "topic"),
    (b'{"topic": "orders", "body": "\xff"}', "utf-8"),
]


def _snapshot(root: Path) -> dict[str, str]:
    """sha256 of every file under the store (checkpoint, abort and lock included)."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def _write(path: Path, lines: list[str | bytes]) -> Path:
    path.write_bytes(b"".join((line if isinstance(line, bytes) else line.encode()) + b"\n" for line in lines))
    return path


def _stored_bodies(store: Path) -> list[bytes]:
    with MessageStore(store, read_only=True, **dict(s.split("=") for s in SMALL[1::2])) as ms:
        return [r.body for r in ms.commitlog.walk_records()]


@pytest.fixture()
def store(tmp_path, capsys) -> Path:
    """A store already holding one ingested message."""
    root = tmp_path / "store"
    first = _write(tmp_path / "first.jsonl", [_good(0)])
    assert main(["ingest", "--store", str(root), "--create", *SMALL, str(first)]) == 0
    capsys.readouterr()
    return root


@pytest.mark.parametrize("bad,problem", BAD_LINES, ids=[f"{i}-{b[1]}" for i, b in enumerate(BAD_LINES)])
def test_a_bad_line_leaves_the_store_byte_for_byte_as_it_was(tmp_path, store, capsys, bad, problem):
    before = _snapshot(store)
    src = _write(tmp_path / "in.jsonl", [_good(1), "", _good(2), bad, _good(3)])
    assert main(["ingest", "--store", str(store), *SMALL, str(src)]) == 2
    err = capsys.readouterr().err
    assert "line 4" in err and problem.lower() in err.lower() and "Traceback" not in err
    assert _snapshot(store) == before
    fixed = _write(tmp_path / "fixed.jsonl", [_good(1), "", _good(2), _good(3)])
    assert main(["ingest", "--store", str(store), *SMALL, str(fixed)]) == 0
    assert json.loads(capsys.readouterr().out)["messages"] == 3
    assert _stored_bodies(store) == [b"m0", b"m1", b"m2", b"m3"]


def test_a_bad_line_after_many_batches_stores_nothing(tmp_path, store, capsys):
    """Over two batches of 1000 good lines go by before the bad one."""
    before = _snapshot(store)
    lines = [_good(i) for i in range(1, 2501)]
    bad = json.dumps({"topic": "orders", "body": "x", "flag": -2 ** 31 - 1})
    src = _write(tmp_path / "in.jsonl", lines + [bad])
    assert main(["ingest", "--store", str(store), *SMALL, str(src)]) == 2
    assert "line 2501: flag" in capsys.readouterr().err
    assert _snapshot(store) == before
    assert main(["ingest", "--store", str(store), *SMALL, str(_write(src, lines))]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert (summary["messages"], summary["queues"], summary["topics"]) == (2500, 1, 1)
    assert _stored_bodies(store) == [f"m{i}".encode() for i in range(2501)]


def test_bad_input_does_not_even_create_the_store(tmp_path, capsys):
    src = _write(tmp_path / "in.jsonl", [_good(1), "{"])
    assert main(["ingest", "--store", str(tmp_path / "new"), "--create", str(src)]) == 2
    assert "line 2" in capsys.readouterr().err
    assert not (tmp_path / "new").exists()


def test_stdin_bad_line_leaves_the_store_as_it_was(store, capsys, monkeypatch):
    before = _snapshot(store)
    text = "\n".join([_good(1), _good(2), json.dumps({"topic": "orders", "body": "x", "tags": 5})])
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text.encode())))
    assert main(["ingest", "--store", str(store), *SMALL, "-"]) == 2
    assert "line 3: tags must be a string, got 5" in capsys.readouterr().err
    assert _snapshot(store) == before
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO("\n".join([_good(1), _good(2)]).encode())))
    assert main(["ingest", "--store", str(store), *SMALL, "-"]) == 0
    assert json.loads(capsys.readouterr().out)["messages"] == 2
    assert _stored_bodies(store) == [b"m0", b"m1", b"m2"]


def test_stdin_through_a_real_process(tmp_path, store):
    before = _snapshot(store)
    env = {**os.environ,
           "PYTHONPATH": os.pathsep.join(filter(None, [os.environ.get("PYTHONPATH"), str(REPO)]))}
    cmd = [sys.executable, "-m", "rocketlake.jobs.cli", "ingest", "--store", str(store), *SMALL, "-"]
    bad = "\n".join([_good(1), json.dumps({"topic": "orders", "body": "x", "born_host": "1.2.3.4:65536"})])
    p = subprocess.run(cmd, input=bad.encode(), capture_output=True, env=env, cwd=REPO, timeout=120)
    assert p.returncode == 2
    assert b"line 2: born_host '1.2.3.4:65536': port 65536 is outside [0, 65535]" in p.stderr
    assert p.stdout == b"" and _snapshot(store) == before
    p = subprocess.run(cmd, input=_good(1).encode(), capture_output=True, env=env, cwd=REPO, timeout=120)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["messages"] == 1
    assert _stored_bodies(store) == [b"m0", b"m1"]


def _events(n: int) -> list[dict]:
    """Plain events with fixed times (so two stores written from them are byte-identical)."""
    return [{"topic": ("orders", "pay")[i % 2], "body": f"m{i}", "queue_id": i % 3,
             "tags": ("A", None)[i % 2], "keys": [f"k{i}", "c"],
             "born_timestamp": 1_732_000_000_000 + i, "store_timestamp": 1_732_000_000_000 + 10 * i}
            for i in range(n)]


def _commitlog(store: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted((store / "commitlog").iterdir()))


def test_json_lines_parquet_and_put_store_the_same_bytes(tmp_path, capsys):
    """The pyarrow JSON path, the Parquet path and the line-by-line path (an event with
    properties) write what put writes for the same events."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from rocketlake.store import Message
    events = _events(60)
    with_props = [*events, {**events[0], "properties": {"b": "2", "a": "1"}}]
    jsonl = _write(tmp_path / "in.jsonl", [json.dumps(e) for e in events])
    props = _write(tmp_path / "props.jsonl", [json.dumps(e) for e in with_props])
    table = pa.table({k: [e[k] for e in events] for k in events[0]})
    table = table.set_column(1, "body", pa.array([e["body"].encode() for e in events], pa.binary()))
    pq.write_table(table, tmp_path / "in.parquet", row_group_size=7)
    for name, src in [("json", jsonl), ("parquet", tmp_path / "in.parquet"), ("lines", props)]:
        assert main(["ingest", "--store", str(tmp_path / name), "--create", *SMALL, str(src)]) == 0
        stored = json.loads(capsys.readouterr().out)["messages"]
        assert stored == len(with_props if name == "lines" else events)
    for name, evs in [("put", events), ("put-props", with_props)]:
        with MessageStore(tmp_path / name, **dict(s.split("=") for s in SMALL[1::2])) as ms:
            for e in evs:
                ms.put(Message(**{**e, "body": e["body"].encode()}))
    assert _commitlog(tmp_path / "json") == _commitlog(tmp_path / "parquet") == _commitlog(tmp_path / "put")
    assert _commitlog(tmp_path / "lines") == _commitlog(tmp_path / "put-props")
    with MessageStore(tmp_path / "lines", read_only=True, **dict(s.split("=") for s in SMALL[1::2])) as ms:
        assert list(ms.commitlog.walk_records())[-1].properties_string.startswith("b\x012\x02a\x011")


def test_a_bad_parquet_row_is_named_and_nothing_is_stored(tmp_path, store, capsys):
    import pyarrow as pa
    import pyarrow.parquet as pq
    before = _snapshot(store)
    table = pa.table({"topic": ["orders"] * 5, "body": [b"a"] * 5,
                      "queue_id": pa.array([0, 1, 2, -3, 4], pa.int32())})
    pq.write_table(table, tmp_path / "bad.parquet", row_group_size=2)
    assert main(["ingest", "--store", str(store), *SMALL, str(tmp_path / "bad.parquet")]) == 2
    assert "row 3: queue_id must be an int in [0, 2147483647], got -3" in capsys.readouterr().err
    assert _snapshot(store) == before
    pq.write_table(table.slice(0, 3), tmp_path / "good.parquet")
    assert main(["ingest", "--store", str(store), *SMALL, str(tmp_path / "good.parquet")]) == 0
    assert json.loads(capsys.readouterr().out)["queues"] == 3
    assert _stored_bodies(store) == [b"m0", b"a", b"a", b"a"]


def test_base64_bodies_and_a_bad_one(tmp_path, store, capsys):
    import base64
    lines = [json.dumps({"topic": "orders", "body_b64": base64.b64encode(bytes([i, 0, 255])).decode()})
             for i in range(1, 4)]
    before = _snapshot(store)
    bad = _write(tmp_path / "bad.jsonl", [*lines, json.dumps({"topic": "orders", "body_b64": "AA=A"})])
    assert main(["ingest", "--store", str(store), *SMALL, str(bad)]) == 2
    assert "line 4: 'body_b64' is not valid base64" in capsys.readouterr().err
    assert _snapshot(store) == before
    assert main(["ingest", "--store", str(store), *SMALL, str(_write(tmp_path / "ok.jsonl", lines))]) == 0
    assert _stored_bodies(store) == [b"m0", *(bytes([i, 0, 255]) for i in range(1, 4))]


# --- a store is created only when asked; every bad line up to 10 is named ----------------------
def test_a_missing_store_is_created_only_with_create(tmp_path, capsys):
    src = _write(tmp_path / "in.jsonl", [_good(1)])
    typo = tmp_path / "stroe"
    assert main(["ingest", "--store", str(typo), *SMALL, str(src)]) == 2
    assert capsys.readouterr().err == (f"rocketlake ingest: error: {typo}: no such store directory "
                                       f"(ingest --create makes a new store there)\n")
    assert not typo.exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["ingest", "--store", str(empty), *SMALL, str(src)]) == 2
    assert "(ingest --create makes a new store there)" in capsys.readouterr().err
    assert list(empty.iterdir()) == []
    for root in (typo, empty):
        assert main(["ingest", "--store", str(root), "--create", *SMALL, str(src)]) == 0
        assert json.loads(capsys.readouterr().out)["messages"] == 1
        assert _stored_bodies(root) == [b"m1"]


def test_bad_lines_are_listed_up_to_10_and_all_counted(store, tmp_path, capsys):
    before = _snapshot(store)
    bad = json.dumps({"topic": "orders", "body": "x", "tags": 5})
    lines = [bad if i % 2 else _good(i) for i in range(30)]  # lines 2, 4, ..., 30 are bad: 15
    assert main(["ingest", "--store", str(store), *SMALL, str(_write(tmp_path / "in.jsonl", lines))]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [*(f"rocketlake ingest: line {n}: tags must be a string, got 5" for n in range(2, 21, 2)),
                   f"rocketlake ingest: error: {tmp_path / 'in.jsonl'}: 15 bad lines (the first 10 "
                   f"listed above)"]
    assert _snapshot(store) == before
    lines = [bad if i in (3, 7) else _good(i) for i in range(9)]
    assert main(["ingest", "--store", str(store), *SMALL, str(_write(tmp_path / "two.jsonl", lines))]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "rocketlake ingest: line 4: tags must be a string, got 5",
        "rocketlake ingest: line 8: tags must be a string, got 5",
        f"rocketlake ingest: error: {tmp_path / 'two.jsonl'}: 2 bad lines (all listed above)"]


# --- events naming no queue ----------------------------------------------------------------------
def _queues(store: Path) -> list[tuple[str, int, int, bytes]]:
    """(topic, queue id, queue offset, body) of every record, in CommitLog order."""
    with MessageStore(store, read_only=True, **dict(s.split("=") for s in SMALL[1::2])) as ms:
        return [(r.topic, r.queue_id, r.queue_offset, r.body) for r in ms.commitlog.walk_records()]


@pytest.mark.parametrize("path", ["json", "lines", "parquet"])
def test_events_without_queue_id_go_round_robin_over_the_topics_queues(tmp_path, capsys, caplog, path):
    """As RocketMQ's producer without a selector: each topic's next write queue in turn, 4 queues
    for a topic topics.json does not declare (defaultTopicQueueNums), its writeQueueNums for one
    it does; an event naming its queue keeps it and takes no turn."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    root = tmp_path / "s"
    first = _write(tmp_path / "one.jsonl", [json.dumps({"topic": "pay", "body": "p", "queue_id": 2})])
    assert main(["ingest", "--store", str(root), "--create", *SMALL, str(first)]) == 0
    (root / "config" / "topics.json").write_text(json.dumps({"topicConfigTable": {
        "pay": {"topicName": "pay", "readQueueNums": 3, "writeQueueNums": 3, "perm": 6}}}))
    events = [{"topic": "orders", "body": "o0"}, {"topic": "pay", "body": "p0"},
              {"topic": "orders", "body": "o1", "queue_id": 7}, {"topic": "orders", "body": "o2"},
              {"topic": "pay", "body": "p1"}, {"topic": "pay", "body": "p2"}, {"topic": "pay", "body": "p3"},
              *({"topic": "orders", "body": f"o{i}"} for i in range(3, 7))]
    if path == "lines":  # properties take the line-by-line path
        events = [{**e, "properties": {"x": "1"}} for e in events]
    src = _write(tmp_path / "in.jsonl", [json.dumps(e) for e in events])
    if path == "parquet":
        src = tmp_path / "in.parquet"
        pq.write_table(pa.table({"topic": [e["topic"] for e in events],
                                 "body": [e["body"].encode() for e in events],
                                 "queue_id": pa.array([e.get("queue_id") for e in events], pa.int64())}), src)
    capsys.readouterr()
    with caplog.at_level("INFO"):
        assert main(["ingest", "--store", str(root), *SMALL, str(src)]) == 0
    # hand-computed: orders 0,1,2,3 then 0,1 (o1 keeps 7); pay over its 3 declared queues 0,1,2,0
    assert [(t, q, b.decode()) for t, q, _, b in _queues(root)[1:]] == [
        ("orders", 0, "o0"), ("pay", 0, "p0"), ("orders", 7, "o1"), ("orders", 1, "o2"),
        ("pay", 1, "p1"), ("pay", 2, "p2"), ("pay", 0, "p3"), ("orders", 2, "o3"),
        ("orders", 3, "o4"), ("orders", 0, "o5"), ("orders", 1, "o6")]
    assert "orders: 6 over 4 queues, pay: 4 over 3 queues" in caplog.text


def test_events_naming_their_queues_are_spread_by_nobody(tmp_path, capsys, caplog):
    src = _write(tmp_path / "in.jsonl", [json.dumps(e) for e in _events(6)])
    with caplog.at_level("INFO"):
        assert main(["ingest", "--store", str(tmp_path / "s"), "--create", *SMALL, str(src)]) == 0
    assert [q for _, q, _, _ in _queues(tmp_path / "s")] == [0, 1, 2, 0, 1, 2]
    assert "round-robin" not in caplog.text
def test_bad_lines_of_every_kind_are_listed_in_line_order(store, tmp_path, capsys):
    """A line the store refuses and a line that is not JSON, in one batch and across batches
    (1,000 lines each), are named in the order of the file."""
    refused = json.dumps({"topic": "orders", "body": "x", "tags": 5})
    lines = [_good(i) for i in range(2500)]
    lines[4], lines[5], lines[1500], lines[1999], lines[2000] = refused, "{", "[]", refused, "{"
    before = _snapshot(store)
    assert main(["ingest", "--store", str(store), *SMALL, str(_write(tmp_path / "in.jsonl", lines))]) == 2
    err = capsys.readouterr().err.splitlines()
    assert [e.split(":")[0:2] for e in err[:-1]] == [
        ["rocketlake ingest", " line 5"], ["rocketlake ingest", " line 6"],
        ["rocketlake ingest", " line 1501"], ["rocketlake ingest", " line 2000"],
        ["rocketlake ingest", " line 2001"]]
    assert err[-1].endswith("5 bad lines (all listed above)")
    assert _snapshot(store) == before


def test_the_json_reader_does_not_read_through_the_line_paths_handle(tmp_path, monkeypatch):
    """pyarrow's JSON reader reads ahead in threads that may outlive it: when a block sends
    the input to the line-by-line path, that reader must not move the handle the lines are read
    from (it did: a loaded machine once read line 466 from the middle of a line)."""
    from rocketlake.jobs.cli import ingest
    monkeypatch.setattr(ingest, "JSON_BLOCK", 4096)
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"topic": "t", "body": "x" * 50, "properties": {"a": str(i)}})
                           + "\n" for i in range(2000)))
    with open(src, "rb") as f:
        with pytest.raises(ValueError, match="not a plain message block"):
            list(ingest._json_tables(f))
        assert f.tell() == 0
