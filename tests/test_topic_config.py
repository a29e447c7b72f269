"""`config/topics.json` kept by every write path: new topics declared as a broker reads them,
merged with what a broker declared (store/topic_config.py; a real broker serving it:
tests/test_real_broker.py)."""
from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from store_helpers import kill_when_ready

from rocketlake.store import ConfigFileError, Message, MessageStore
from rocketlake.store.config_files import read_config

SMALL = dict(mappedFileSizeCommitLog=4096, mappedFileSizeConsumeQueue=200, maxHashSlotNum=16,
             maxIndexNum=20)
TOPICS_JSON = Path("config") / "topics.json"
#: what a 5.x broker writes for a topic it created with 4 queues (a 4.9 broker: no attributes)
ENTRY_A = ('\t\t"a":{\n\t\t\t"attributes":{},\n\t\t\t"order":false,\n\t\t\t"perm":6,\n'
           '\t\t\t"readQueueNums":4,\n\t\t\t"topicFilterType":"SINGLE_TAG",\n'
           '\t\t\t"topicName":"a",\n\t\t\t"topicSysFlag":0,\n\t\t\t"writeQueueNums":4\n\t\t}')


def _put(ms: MessageStore, msgs: list[Message], how: str) -> None:
    if how == "put":
        for m in msgs:
            ms.put(m)
    elif how == "put_batch":
        ms.put_batch(msgs)
    else:
        ms.put_table(pa.table({"topic": [m.topic for m in msgs], "body": [m.body for m in msgs],
                               "queue_id": [m.queue_id for m in msgs]}))


@pytest.mark.parametrize("how", ["put", "put_batch", "put_table"])
def test_a_new_queue_declares_its_topic_before_close(tmp_path: Path, how: str) -> None:
    root = tmp_path / "s"
    with MessageStore(root, **SMALL) as ms:
        _put(ms, [Message("a", b"x", queue_id=3), Message("b", b"y", queue_id=0),
                  Message("a", b"z", queue_id=1)], how)
        text = (root / TOPICS_JSON).read_text()  # already there: a kill now leaves it
    assert text.startswith('{\n\t"dataVersion":{\n\t\t"counter":')
    assert ENTRY_A in text
    table = read_config(root / TOPICS_JSON)["topicConfigTable"]
    assert {t: (tc["readQueueNums"], tc["writeQueueNums"]) for t, tc in table.items()} == \
        {"a": (4, 4), "b": (1, 1)}


def test_put_to_known_queues_and_delay_levels_do_not_rewrite_it(tmp_path: Path) -> None:
    root = tmp_path / "s"
    with MessageStore(root, **SMALL) as ms:
        ms.put_batch([Message("a", b"x", queue_id=1), Message("a", b"x", queue_id=0)])
    before = (root / TOPICS_JSON).read_text()
    with MessageStore(root, **SMALL) as ms:
        ms.put_batch([Message("a", b"x", queue_id=1), Message("a", b"y", queue_id=0)])
        # SCHEDULE_TOPIC_XXXX: every broker declares it itself (18 queues); not written
        ms.put(Message("a", b"later", queue_id=0, delay_level=3))
    assert (root / TOPICS_JSON).read_text() == before
    assert read_config(root / TOPICS_JSON)["dataVersion"]["counter"] == 1
    assert not (root / "config/topics.json.bak").exists()


def test_merges_with_what_a_broker_declared(tmp_path: Path) -> None:
    from goldens import GOLDEN
    root = tmp_path / "s"
    for d in ("commitlog", "config"):  # a broker's store that has no message yet
        (root / d).mkdir(parents=True)
    broker_text = (GOLDEN / "study/store/config/topics.json").read_text()
    broker_text = broker_text.replace('"topicName":"TopicTest",',  # a field we do not know
                                      '"topicName":"TopicTest",\n\t\t\t"future":[1,2],')
    (root / TOPICS_JSON).write_text(broker_text)
    broker = read_config(root / TOPICS_JSON)
    with MessageStore(root, **SMALL) as ms:
        ms.put_batch([Message("TopicTest", b"x", queue_id=5), Message("TopicTest", b"y", queue_id=1),
                      Message("DefaultCluster", b"z", queue_id=2), Message("new", b"n", queue_id=0)])
    now = read_config(root / TOPICS_JSON)
    table = now["topicConfigTable"]
    # TopicTest had 4 queues: raised to 6, everything else of it kept (the unknown field too)
    assert table["TopicTest"] == {**broker["topicConfigTable"]["TopicTest"],
                                  "readQueueNums": 6, "writeQueueNums": 6}
    assert table["TopicTest"]["future"] == [1, 2]
    # DefaultCluster (perm 7, 16 queues) and the other broker topics as they were
    others = {t: tc for t, tc in table.items() if t not in ("TopicTest", "new")}
    assert others == {t: tc for t, tc in broker["topicConfigTable"].items() if t != "TopicTest"}
    assert table["new"]["readQueueNums"] == 1 and table["new"]["perm"] == 6
    assert now["dataVersion"]["counter"] == 4  # the broker's 3, bumped once
    assert now["dataVersion"]["timestamp"] > broker["dataVersion"]["timestamp"]
    assert (root / "config/topics.json.bak").read_text() == broker_text


def test_a_writer_open_declares_queues_already_there(tmp_path: Path) -> None:
    root = tmp_path / "s"
    with MessageStore(root, **SMALL) as ms:
        ms.put_batch([Message("a", b"x", queue_id=2), Message("b", b"x", queue_id=0)])
    # as a store written before topics were declared: queues on disk, no topics.json
    (root / TOPICS_JSON).unlink()
    MessageStore(root, **SMALL).close()
    table = read_config(root / TOPICS_JSON)["topicConfigTable"]
    assert {t: tc["readQueueNums"] for t, tc in table.items()} == {"a": 3, "b": 1}


def test_an_unreadable_topics_json_stops_the_writer_and_is_kept(tmp_path: Path) -> None:
    root = tmp_path / "s"
    with MessageStore(root, **SMALL) as ms:
        ms.put(Message("a", b"x"))
    for name in ("topics.json", "topics.json.bak"):
        (root / "config" / name).write_text("{cut")
    with pytest.raises(ConfigFileError, match=str(root / TOPICS_JSON)):
        MessageStore(root, **SMALL)
    assert (root / TOPICS_JSON).read_text() == "{cut"


def test_a_killed_writer_leaves_every_queue_declared(tmp_path: Path) -> None:
    """SIGKILL after the puts, before close: topics.json already declares every queue written."""
    root = tmp_path / "s"
    script = ("import sys, time\nfrom rocketlake.store import Message, MessageStore\n"
              f"ms = MessageStore({str(root)!r}, mappedFileSizeCommitLog=4096, "
              "mappedFileSizeConsumeQueue=200, maxHashSlotNum=16, maxIndexNum=20)\n"
              "ms.put_batch([Message(f't{i % 3}', b'x', queue_id=i % 5) for i in range(40)])\n"
              "print('put', flush=True)\ntime.sleep(60)\n")
    kill_when_ready([script], "put")
    assert (root / "abort").exists()  # killed, not closed
    table = read_config(root / TOPICS_JSON)["topicConfigTable"]
    assert {t: tc["readQueueNums"] for t, tc in table.items()} == {"t0": 5, "t1": 5, "t2": 5}


@pytest.mark.parametrize("crashed", [False, True])
@pytest.mark.parametrize("topics", ['{"topicConfigTable":', '{"topicConfigTable":{"orders":5}}',
                                    '{"topicConfigTable":{"orders":{"readQueueNums":"x"}}}', ""])
def test_a_bad_topics_json_stops_the_writer_before_it_changes_anything(
        golden_store: Path, golden_settings: dict, topics: str, crashed: bool) -> None:
    """The store RocketMQ wrote, stopped cleanly or crashed (`abort` there), with a topics.json
    that is cut, of the wrong shape or empty: the writer's open refuses it naming the file and
    leaves every file as it was. It created `abort` first (a clean store then looked crashed) and
    after a crash ran recovery, rewriting index files, before it read topics.json."""
    (golden_store / TOPICS_JSON).write_text(topics)
    if crashed:
        (golden_store / "abort").touch()
    before = {p: p.read_bytes() for p in golden_store.rglob("*") if p.is_file()}
    with pytest.raises(ConfigFileError, match=str(golden_store / TOPICS_JSON)):
        MessageStore(golden_store, **golden_settings)
    assert {p: p.read_bytes() for p in golden_store.rglob("*") if p.is_file()} == before
