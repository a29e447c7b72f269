"""transforms.source_options: the rocketmq source's options, parsed without Spark."""
from __future__ import annotations

import re

import pytest

from rocketlake.store.errors import SettingError
from rocketlake.transforms.source_options import (
    EARLIEST,
    LATEST,
    CommitLogPosition,
    SourceOptions,
    parse,
)


def batch(**options: str) -> SourceOptions:
    return parse({"path": "/s", **options}, streaming=False)


def stream(**options: str) -> SourceOptions:
    return parse({"path": "/s", **options}, streaming=True)


def test_defaults_are_kafkas() -> None:
    b, s = batch(), stream()
    assert (b.starting_offsets, b.ending_offsets, s.starting_offsets) == (EARLIEST, LATEST, LATEST)
    assert (b.kind, b.columns, b.check_crc, b.split_bytes, b.consumable, b.fail_on_data_loss) == \
        ("messages", None, True, 64 << 20, False, True)
    assert b.topics is None and b.topic_pattern is None and b.store_settings() == {}
    assert b.delay_levels_ms[:3] == (1000, 5000, 10000)  # RocketMQ's default "1s 5s 10s ..."
    assert b.inflate_bodies is False and batch(inflatebodies="TRUE").inflate_bodies is True


def test_names_are_case_insensitive_and_kafkas_aliases_work() -> None:
    o = parse({"PATH": "/s", "SUBSCRIBE": "orders, payments", "checkcrc": "FALSE",
               "splitbytes": "4096", "MappedFileSizeCommitLog": "65536"}, streaming=False)
    assert o.topics == frozenset({"orders", "payments"}) and o.check_crc is False
    assert (o.split_bytes, o.store_settings()) == (4096, {"mappedFileSizeCommitLog": 65536})
    p = batch(subscribePattern="ord.*")
    assert (p.topic_selected("orders"), p.topic_selected("xorders"), p.topic_selected("ord")) == \
        (True, False, True)
    assert batch(topics="a,b").topic_selected("b") and not batch(topics="a,b").topic_selected("ab")


def test_the_commitlog_directories_are_the_broker_settings() -> None:
    o = batch(storepathcommitlog="/a, /b", readOnlyCommitLogStorePaths="/c")
    assert o.store_settings() == {"storePathCommitLog": "/a, /b", "readOnlyCommitLogStorePaths": "/c"}
    with pytest.raises(SettingError, match=r"option storePathCommitLog=' , ' is not accepted: "
                                           r"expected a directory, or several with ','"):
        batch(storePathCommitLog=" , ")


def test_positions_and_timestamps() -> None:
    o = batch(startingOffsets='{"store": "id-1", "commitlogOffset": 4096}',
              endingOffsets='{"commitlogOffset": 8192}')
    assert o.starting_offsets == CommitLogPosition(4096, "id-1")
    assert o.ending_offsets == CommitLogPosition(8192, None)
    assert batch(startingOffsets="EARLIEST", endingOffsets="Latest").ending_offsets == LATEST
    t = batch(startingTimestamp="1763800000000", endingTimestamp="1763800001500")
    assert (t.starting_timestamp, t.ending_timestamp) == (1763800000000, 1763800001500)
    s = stream(maxBytesPerTrigger="1048576", maxRecordsPerTrigger="10", failOnDataLoss="false",
               consumable="true", startingOffsets="earliest")
    assert (s.max_bytes_per_trigger, s.max_records_per_trigger, s.fail_on_data_loss,
            s.consumable, s.starting_offsets) == (1 << 20, 10, False, True, EARLIEST)


def test_unknown_option_lists_the_known_ones() -> None:
    with pytest.raises(SettingError) as e:
        batch(startingOffset="earliest")
    msg = str(e.value)
    assert "unknown option 'startingOffset'" in msg
    for name in ("path", "kind", "columns", "checkCRC", "splitBytes", "mappedFileSizeCommitLog",
                 "mappedFileSizeConsumeQueue", "messageDelayLevel", "topics", "topicPattern",
                 "startingOffsets", "endingOffsets", "startingTimestamp", "endingTimestamp",
                 "consumable", "inflateBodies", "maxBytesPerTrigger", "maxRecordsPerTrigger",
                 "failOnDataLoss",
                 "subscribe", "subscribePattern"):
        assert re.search(rf"\b{name}\b", msg), name


@pytest.mark.parametrize(("options", "message"), [
    ({"checkCRC": "yes"}, "option checkCRC='yes' is not accepted: expected true or false"),
    ({"consumable": "1"}, "option consumable='1' is not accepted: expected true or false"),
    ({"inflateBodies": "zlib"}, "option inflateBodies='zlib' is not accepted: expected true or false"),
    ({"splitBytes": "0"}, "option splitBytes='0' is not accepted: expected a positive integer"),
    ({"mappedFileSizeCommitLog": "64k"}, "mappedFileSizeCommitLog='64k' is not accepted"),
    ({"kind": "index"}, "option kind='index' is not accepted: expected messages or consumequeue"),
    ({"startingTimestamp": "-1"}, "startingTimestamp='-1' is not accepted: expected epoch"),
    ({"startingTimestamp": "2026-11-24"}, "startingTimestamp='2026-11-24' is not accepted"),
    ({"startingOffsets": '{"commitlogOffset": -1}'}, "startingOffsets='{\"commitlogOffset\": -1}' "
                                                     "is not accepted: expected earliest, latest, or JSON"),
    ({"startingOffsets": '{"orders": {"0": 5}}'}, "is not accepted: expected earliest, latest"),
    ({"startingOffsets": '{"commitlogOffset": "5"}'}, "is not accepted"),
    ({"topicPattern": "ord("}, "option topicPattern='ord(' is not accepted: expected a regular"),
    ({"topics": " , "}, "option topics=' , ' is not accepted: expected a comma list of topic names"),
    ({"messageDelayLevel": "1x"}, "option messageDelayLevel='1x' is not accepted"),
    ({"topics": "a", "subscribePattern": "b"}, "options topics and subscribePattern exclude each other"),
    ({"topics": "a", "subscribe": "b"}, "options topics and subscribe are the same option"),
    ({"startingOffsets": "earliest", "startingTimestamp": "5"}, "exclude each other"),
    ({"endingOffsets": "earliest"}, "endingOffsets='earliest' is not accepted"),
    ({"startingOffsets": "latest"}, "startingOffsets='latest' is not accepted in a batch query"),
    ({"startingOffsets": '{"commitlogOffset": 9}', "endingOffsets": '{"commitlogOffset": 8}'},
     "endingOffsets 8 is before startingOffsets 9"),
    ({"startingTimestamp": "9", "endingTimestamp": "8"}, "endingTimestamp=8 is before"),
    ({"maxBytesPerTrigger": "100"}, "option maxBytesPerTrigger is for stream queries only"),
    ({"maxRecordsPerTrigger": "100"}, "option maxRecordsPerTrigger is for stream queries only"),
])
def test_bad_batch_options_name_option_value_and_what_is_accepted(options, message) -> None:
    with pytest.raises(SettingError, match=re.escape(message)):
        batch(**options)


@pytest.mark.parametrize("name", ["endingOffsets", "endingTimestamp"])
def test_batch_only_options_refused_on_a_stream(name) -> None:
    with pytest.raises(SettingError, match=f"option {name} is for batch queries only, not a stream"):
        stream(**{name: "latest" if name == "endingOffsets" else "5"})
    with pytest.raises(SettingError, match="maxRecordsPerTrigger='0' is not accepted: expected a "
                                           "positive integer"):
        stream(maxRecordsPerTrigger="0")


def test_no_path() -> None:
    with pytest.raises(SettingError, match=r"give the store root: \.load\(store_root\)"):
        parse({}, streaming=False)
