"""Hand-computed vectors from docs/FORMAT.md: msgIds, hashCodes, lengths, CRCs, properties."""
from __future__ import annotations

import crcmod.predefined
import pytest

from rocketlake.store import codec

# An independent CRC-32 implementation (crcmod) to check the store's zlib-based BODYCRC.
_crc32 = crcmod.predefined.mkCrcFun("crc-32")


def test_msg_id_vectors_from_spec():
    addr, port = codec.parse_host("100.81.0.250:10911")
    assert codec.create_msg_id(addr, port, 311825178782) == "645100FA00002A9F000000489A3AA09E"
    addr, port = codec.parse_host("127.0.0.1:9103")
    assert codec.create_msg_id(addr, port, 123456) == "7F0000010000238F000000000001E240"
    assert codec.decode_msg_id("645100FA00002A9F000000489A3AA09E") == ("100.81.0.250:10911", 311825178782)


def test_msg_id_ipv6_is_56_hex_chars_and_round_trips():
    addr, port = codec.parse_host("[fe80::1]:10911")
    mid = codec.create_msg_id(addr, port, 4096)
    assert len(mid) == 56 and mid == mid.upper()
    assert mid.startswith("FE800000000000000000000000000001" + "00002A9F")
    assert codec.decode_msg_id(mid) == ("[fe80:0:0:0:0:0:0:1]:10911", 4096)  # as Java prints it


@pytest.mark.parametrize("bad", ["XYZ", "0" * 31, "G" * 32])
def test_decode_msg_id_rejects_garbage(bad):
    with pytest.raises(ValueError, match="msgId"):
        codec.decode_msg_id(bad)


def test_java_hash_vectors():
    assert codec.java_hash("TAG1") == 2567159
    assert codec.java_hash("TagA") == 2598919
    assert abs(codec.java_hash("abc#Hello")) == 1492521647  # docs/FORMAT.md §7: keyHash (abs)
    assert codec.java_hash("") == 0
    # "polygenelubricants" hashes to Integer.MIN_VALUE in Java: keyHash becomes 0.
    assert codec.java_hash("polygenelubricants") == -2 ** 31
    assert codec.index_key_hash(codec.java_hash("polygenelubricants")) == 0
    # A non-BMP character is two UTF-16 code units in Java.
    assert codec.java_hash("\U0001F600") == 0xD83D * 31 + 0xDE00


def test_java_hash_many_vectors():
    keys = ["TAG1", "TagA", "abc#Hello", "", "polygenelubricants", "\U0001F600x", "é" * 40]
    # (0xD83D*31 + 0xDE00)*31 + ord("x") = 54959989; "é"*40 from tests/reference.py's jhash
    assert codec.java_hash_many(keys).tolist() == [2567159, 2598919, -1492521647, 0, -2 ** 31,
                                                   54959989, -860236160]


def test_index_slot_vector():
    h = codec.index_key_hash(codec.java_hash("abc#Hello"))
    assert h == 1492521647 and h % 5_000_000 == 2521647


def test_tags_code():
    assert codec.tags_code("TAG1") == 2567159
    assert codec.tags_code(None) == 0 and codec.tags_code("") == 0


def test_record_lengths_from_spec():
    assert codec.record_length(0, 32, 3, 46) == 172
    both_v6 = codec.FLAG_BORNHOST_V6 | codec.FLAG_STOREHOST_V6
    assert codec.record_length(both_v6, 32, 3, 46) == 196
    assert codec.record_length(codec.FLAG_BORNHOST_V6, 0, 1, 0) == 91 + 1 + 12


def test_body_crc_matches_independent_crc32():
    for body in (b"Once, there was a chance for me!", b"\x00" * 7, bytes(range(256))):
        assert codec.body_crc(body) == _crc32(body) & 0x7FFFFFFF


def test_properties_both_separator_styles():
    old = "0\x01imagoodperson0\x02KEYS\x011700000000000\x02TAGS\x01TAG1\x02"  # <= 4.9.0
    new = old[:-1]                                                          # 4.9.1+
    want = {"0": "imagoodperson0", "KEYS": "1700000000000", "TAGS": "TAG1"}
    assert codec.string_to_properties(old) == want
    assert codec.string_to_properties(new) == want
    assert codec.properties_to_string(want) == new
    # Segments without \x01, with an empty name or empty value are dropped.
    assert codec.string_to_properties("a\x01\x02\x01b\x02junk\x02k\x01v") == {"k": "v"}


@pytest.mark.parametrize("topic", ["bad topic", "a/b", "x" * 128, "", "中文"])
def test_check_topic_rejects(topic):
    with pytest.raises(ValueError, match="topic"):
        codec.check_topic(topic)


def test_check_topic_accepts_rocketmq_charset():
    for t in ["orders", "%RETRY%group", "a|b", "A-b_9", "x" * 127]:
        assert codec.check_topic(t) == t.encode()


def test_index_file_name_round_trip():
    name = codec.index_file_name(1795345574046)
    assert len(name) == 17 and name.endswith("046")
    assert codec.index_file_time(name) == 1795345574046


def test_queue_key_orders_by_topic_then_unsigned_queue_id_and_comes_apart():
    import numpy as np

    topics = np.array([1, 1, 1, 2, 0], dtype=np.int64)
    qids = np.array([5, -1, 2 ** 31 - 1, 0, 7], dtype=np.int32)
    keys = codec.queue_key(topics, qids)
    assert keys.tolist() == [(1 << 32) + 5, (2 << 32) - 1, (1 << 32) + 0x7FFFFFFF, 2 << 32, 7]
    assert np.argsort(keys).tolist() == [4, 0, 2, 1, 3]  # -1 after 2**31 - 1: unsigned order
    assert [codec.queue_of_key(k) for k in keys.tolist()] == [
        (1, 5), (1, -1), (1, 2 ** 31 - 1), (2, 0), (0, 7)]
