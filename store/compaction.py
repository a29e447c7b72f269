"""Compacted segments of keyed topics (RocketMQ 5 "compaction topic" semantics).

A compaction topic keeps, per queue, only the latest message of each ``KEYS`` value. Its
compacted log is a store of its own under ``<root>/compaction/<topic>`` (a symlink to the current
``.<topic>.<n>`` directory, swapped atomically): a CommitLog with the kept records copied byte
for byte (only their queue and physical offsets change), ConsumeQueues, index, checkpoint and a
``config/consumerOffset.json``. ``MessageStore(segment, read_only=True).get(topic, q, 0)``
returns the latest value per key, in the order the values were originally stored.

Queue offsets in a segment are dense (0..n-1). ``compaction.json`` keeps each kept message's
original queue offset, so consumer offsets translate: a group that had committed original
offset ``c`` resumes at the first kept message whose original offset is ``>= c`` (messages it had
not read but that a newer value of the same key superseded are skipped; it reads the newer value).
"""
from __future__ import annotations

import bisect
import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from rocketlake.store.codec import PROPERTY_KEYS, string_to_properties
from rocketlake.store.config_files import read_config, read_consumer_offsets, write_consumer_offsets
from rocketlake.store.message_store import MessageStore

SEGMENTS = "compaction"
META = "compaction.json"
COMPACTION_POLICY = "COMPACTION"


def compaction_topics(root: Path, configured: Iterable[str] = ()) -> list[str]:
    """Topics to compact: ``configured`` plus topics whose `config/topics.json` attributes say
    ``cleanup.policy`` = COMPACTION (RocketMQ 5's topic attribute; "+" prefixed or not)."""
    out = {t for t in configured if t}
    data = read_config(Path(root) / "config" / "topics.json") or {}
    for name, tc in (data.get("topicConfigTable") or {}).items():
        attrs = (tc or {}).get("attributes") or {}
        policy = attrs.get("cleanup.policy") or attrs.get("+cleanup.policy")
        if str(policy).upper() == COMPACTION_POLICY:
            out.add(name)
    return sorted(out)


def segment_path(root: Path, topic: str) -> Path:
    return Path(root) / SEGMENTS / topic


@dataclass
class SegmentMeta:
    """What a segment holds: the CommitLog offset of the source it covers up to, and each
    queue's original queue offsets (index = offset in the segment)."""
    topic: str
    source_end: int = 0
    origin: dict[int, list[int]] = field(default_factory=dict)

    @classmethod
    def load(cls, root: Path, topic: str) -> "SegmentMeta":
        """The current segment's metadata; an empty one when the topic was never compacted."""
        p = segment_path(root, topic) / META
        if not p.exists():
            return cls(topic)
        d = json.loads(p.read_text())
        return cls(d["topic"], d["source_end"], {int(q): v for q, v in d["origin"].items()})

    def dump(self, path: Path) -> None:
        path.write_text(json.dumps({"topic": self.topic, "source_end": self.source_end,
                                    "origin": {str(q): v for q, v in sorted(self.origin.items())}}))


def translate_offset(origin_offsets: Sequence[int], committed: int) -> int:
    """A consumer offset in the original queue -> the offset in the compacted queue."""
    return bisect.bisect_left(origin_offsets, committed)


@dataclass
class KeptRecord:
    """One record to keep: its bytes as stored, queue and original queue offset."""
    queue_id: int
    origin_offset: int
    raw: bytes


@dataclass
class SegmentReport:
    topic: str
    kept: int
    source_end: int
    path: str
    translated_offsets: dict[str, dict[int, tuple[int, int]]]  # group -> queue -> (old, new)


def record_key(properties_string: str) -> str | None:
    """The compaction key of a record: its whole KEYS value (None without KEYS)."""
    return string_to_properties(properties_string).get(PROPERTY_KEYS)


def write_segment(root: Path, topic: str, kept: Sequence[KeptRecord], source_end: int,
                  **settings: Any) -> SegmentReport:
    """Write ``kept`` (ordered by queue, then original offset) as the topic's new segment and
    swap it in atomically; consumer offsets of the topic's groups are translated into it."""
    root = Path(root)
    base = root / SEGMENTS
    base.mkdir(parents=True, exist_ok=True)
    link = segment_path(root, topic)
    previous = link.resolve() if link.is_symlink() else None
    n = 1 + max((int(p.name.rsplit(".", 1)[1]) for p in base.glob(f".{topic}.*")
                 if p.name.rsplit(".", 1)[1].isdigit()), default=0)
    new = base / f".{topic}.{n}"
    shutil.rmtree(new, ignore_errors=True)
    meta = SegmentMeta(topic, source_end)
    with MessageStore(new, **settings) as seg:
        seg.put_records([k.raw for k in kept])
    for k in kept:
        meta.origin.setdefault(k.queue_id, []).append(k.origin_offset)
    meta.dump(new / META)
    translated: dict[str, dict[int, tuple[int, int]]] = {}
    table = {}
    for (t, group), offsets in read_consumer_offsets(root).items():
        if t != topic:
            continue
        new_offsets = {q: translate_offset(meta.origin.get(q, []), c) for q, c in offsets.items()}
        translated[group] = {q: (c, new_offsets[q]) for q, c in offsets.items()}
        table[(t, group)] = new_offsets
    if table:
        write_consumer_offsets(new, table)
    tmp_link = base / f".{topic}.link"
    tmp_link.unlink(missing_ok=True)
    os.symlink(new.name, tmp_link)
    os.replace(tmp_link, link)  # atomic: readers see the old segment or the new one
    if previous is not None and previous != new:
        shutil.rmtree(previous, ignore_errors=True)
    return SegmentReport(topic, len(kept), source_end, str(link), translated)
