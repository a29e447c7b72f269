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
import re
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rocketlake.store.compaction_log import is_compaction_topic
from rocketlake.store.config import StoreConfig
from rocketlake.store.config_files import read_config, read_consumer_offsets, write_consumer_offsets
from rocketlake.store.errors import UnsafePathError
from rocketlake.store.message_store import MessageStore
from rocketlake.store.paths import check_topic_name, resolve_inside

SEGMENTS = "compaction"
META = "compaction.json"


def compaction_topics(root: Path, configured: Iterable[str] = ()) -> list[str]:
    """Topics to compact: ``configured`` plus topics whose `config/topics.json` attributes say
    ``cleanup.policy`` = COMPACTION (RocketMQ 5's topic attribute; "+" prefixed or not).
    UnsafePathError for a name that is not a topic (it would name a segment directory)."""
    root = Path(root)
    out = {check_topic_name(t, root / SEGMENTS) for t in configured}
    topics_json = root / "config" / "topics.json"
    data = read_config(topics_json) or {}
    for name, tc in (data.get("topicConfigTable") or {}).items():
        if is_compaction_topic(tc or {}):
            out.add(check_topic_name(name, topics_json))
    return sorted(out)


def segment_path(root: Path, topic: str) -> Path:
    """``<root>/compaction/<topic>``: the link to the topic's current segment (see the module doc);
    UnsafePathError when ``topic`` is not a topic name or the path resolves outside the store."""
    base = Path(root) / SEGMENTS
    return resolve_inside(root, base / check_topic_name(topic, base))


@dataclass
class SegmentMeta:
    """What a segment holds: the CommitLog offset of the source it covers up to, and each
    queue's original queue offsets (index = offset in the segment)."""
    topic: str
    source_end: int = 0
    origin: dict[int, list[int]] = field(default_factory=dict)

    @classmethod
    def load(cls, root: Path, topic: str) -> SegmentMeta:
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


def write_segment(root: Path, topic: str, kept: Sequence[KeptRecord], source_end: int,
                  config: StoreConfig | None = None, **overrides: Any) -> SegmentReport:
    """Write ``kept`` (ordered by queue, then original offset) as the topic's new segment and
    swap it in atomically; consumer offsets of the topic's groups are translated into it. The
    segment store is written with ``config`` and ``overrides``, as ``MessageStore`` takes them.

    Segment directories of the topic that the link does not point to (left by a run killed
    mid-write) are deleted; a link compaction did not write is refused, never replaced."""
    root = Path(root)
    link = segment_path(root, topic)
    base = link.parent
    base.mkdir(parents=True, exist_ok=True)
    _remove_orphans(base, topic, _current_segment(link, topic))
    n = 1 + max((int(m[1]) for p in base.iterdir() if (m := _segment_name(topic).fullmatch(p.name))),
                default=0)
    new = base / f".{topic}.{n}"
    new.mkdir()
    meta = SegmentMeta(topic, source_end)
    with MessageStore(new, config, **overrides) as seg:
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
    _remove_orphans(base, topic, new)
    return SegmentReport(topic, len(kept), source_end, str(link), translated)


def _segment_name(topic: str) -> re.Pattern[str]:
    """Names of the topic's segment directories: ``.<topic>.<n>``."""
    return re.compile(rf"\.{re.escape(topic)}\.(\d+)")


def _current_segment(link: Path, topic: str) -> Path | None:
    """The segment directory ``link`` points to (None without a link). UnsafePathError when
    ``link`` is something compaction did not write: not a link, or a link to another name."""
    if not link.is_symlink():
        if link.exists():
            raise UnsafePathError(f"{link}: not a segment link written by compaction; refusing to "
                                  f"replace it")
        return None
    target = os.readlink(link)
    if not _segment_name(topic).fullmatch(target):
        raise UnsafePathError(f"{link}: links to {target!r}, not a segment directory of topic "
                              f"{topic}; refusing to replace it")
    return link.parent / target


def _remove_orphans(base: Path, topic: str, keep: Path | None) -> None:
    """Delete the topic's segment directories under ``base`` except ``keep``. Only real
    directories are deleted (a symlink is never followed), and nothing else in ``base``."""
    for p in base.iterdir():
        if p != keep and _segment_name(topic).fullmatch(p.name) and p.is_dir() and not p.is_symlink():
            shutil.rmtree(p)
