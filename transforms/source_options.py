"""The ``rocketmq`` source's options, parsed once into a typed :class:`SourceOptions`, for batch
reads and streams alike (the Kafka source's names where they mean the same).

Names are case-insensitive (Spark lower-cases them). An option no registry entry knows, an option
of the other mode (``maxBytesPerTrigger`` on a batch read, ``endingOffsets`` on a stream, as the
Kafka source refuses them) or a value out of range is a SettingError (a ValueError) naming the
option, the value and what is accepted. ``path`` is the store root given to ``.load(...)``.

Positions are CommitLog physical offsets: ``startingOffsets`` / ``endingOffsets`` take
``earliest``, ``latest`` or the JSON of a stream's offset, ``{"store": <identity>,
"commitlogOffset": N}`` (``store`` optional), so an offset copied from a query's progress works.
Kafka's defaults: a batch read runs from ``earliest`` to ``latest``; a stream starts at
``latest``. ``endingOffsets`` is exclusive and may not be ``earliest``; a batch read may not
start at ``latest`` (both as Kafka). ``startingTimestamp`` / ``endingTimestamp`` are epoch
milliseconds; a starting option and a starting timestamp together are refused (which one wins
would be a guess), and so are an ending pair.
"""
from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from rocketlake.store.config import StoreConfig, load_config
from rocketlake.store.errors import SettingError
from rocketlake.store.file_sizes import with_commitlog_size, with_consume_queue_size
from rocketlake.transforms.commitlog_scan import DEFAULT_SPLIT_BYTES

EARLIEST: Literal["earliest"] = "earliest"
LATEST: Literal["latest"] = "latest"
KINDS = ("messages", "consumequeue")


@dataclass(frozen=True)
class CommitLogPosition:
    """A CommitLog physical offset, with the identity of the store it was taken from (None: not
    given)."""
    commitlog_offset: int
    store: str | None = None


Position = Literal["earliest", "latest"] | CommitLogPosition


@dataclass(frozen=True)
class SourceOptions:
    """Every option of the ``rocketmq`` source, typed (the module docstring has the rules)."""
    path: str
    streaming: bool = False
    kind: str = "messages"
    #: the ``columns`` option's names in order (None: every column of the kind)
    columns: tuple[str, ...] | None = None
    check_crc: bool = True
    split_bytes: int = DEFAULT_SPLIT_BYTES
    #: file sizes given as options (None: taken from the files)
    mapped_file_size_commitlog: int | None = None
    mapped_file_size_consume_queue: int | None = None
    #: where the CommitLog is when not in `<path>/commitlog` (the broker settings; None: not given)
    store_path_commitlog: str | None = None
    read_only_commitlog_store_paths: str | None = None
    #: the ``messageDelayLevel`` option as given (None: the store default)
    message_delay_level: str | None = None
    delay_levels_ms: tuple[int, ...] = ()
    #: ``topics`` (Kafka's ``subscribe``): the topic names; None: no topic option
    topics: frozenset[str] | None = None
    #: ``topicPattern`` (Kafka's ``subscribePattern``): a regular expression a whole topic matches
    topic_pattern: re.Pattern[str] | None = None
    starting_offsets: Position = EARLIEST
    ending_offsets: Position = LATEST
    starting_timestamp: int | None = None
    ending_timestamp: int | None = None
    consumable: bool = False
    #: ``inflateBodies``: compressed bodies inflated in ``body`` (False: bodies as stored)
    inflate_bodies: bool = False
    max_bytes_per_trigger: int | None = None
    max_records_per_trigger: int | None = None
    fail_on_data_loss: bool = True

    def store_settings(self) -> dict[str, int | str]:
        """The store settings given as options (file sizes, where the CommitLog is), by their
        store setting name (for ``store.file_sizes``: a size the files contradict is an error
        naming both)."""
        given = {"mappedFileSizeCommitLog": self.mapped_file_size_commitlog,
                 "mappedFileSizeConsumeQueue": self.mapped_file_size_consume_queue,
                 "storePathCommitLog": self.store_path_commitlog,
                 "readOnlyCommitLogStorePaths": self.read_only_commitlog_store_paths}
        return {k: v for k, v in given.items() if v is not None}

    def commitlog_config(self) -> StoreConfig:
        """The settings the CommitLog is found and read with (``commitlog_scan.commitlog_files``):
        the options over the defaults, ``mappedFileSizeCommitLog`` from the files in every
        directory ``storePathCommitLog`` / ``readOnlyCommitLogStorePaths`` name
        (``store.file_sizes.with_commitlog_size``)."""
        given = self.store_settings()
        return with_commitlog_size(Path(self.path), load_config(given), given)

    def file_size(self, name: str) -> int:
        """The store's ``name`` (``mappedFileSizeCommitLog`` / ``mappedFileSizeConsumeQueue``)
        from its files (``store.file_sizes``); the option, when given, must agree with them
        (SettingError naming both) and stands when there are none."""
        if name == "mappedFileSizeCommitLog":
            return self.commitlog_config().mappedFileSizeCommitLog
        given = self.store_settings()
        return with_consume_queue_size(Path(self.path), load_config(given), given).mappedFileSizeConsumeQueue

    def topic_selected(self, topic: str) -> bool:
        """Whether the ``topics`` / ``topicPattern`` option keeps rows of ``topic`` (True when
        neither is given)."""
        if self.topics is not None:
            return topic in self.topics
        if self.topic_pattern is not None:
            return self.topic_pattern.fullmatch(topic) is not None
        return True


def _bad(name: str, value: str, accepts: str) -> SettingError:
    return SettingError(f"rocketmq source: option {name}={value!r} is not accepted: expected {accepts}")


def _boolean(name: str, value: str) -> bool:
    v = value.strip().lower()
    if v not in ("true", "false"):
        raise _bad(name, value, "true or false")
    return v == "true"


def _integer(name: str, value: str, minimum: int, accepts: str) -> int:
    v = value.strip()
    if not re.fullmatch(r"[+-]?\d+", v) or int(v) < minimum:
        raise _bad(name, value, accepts)
    return int(v)


def _positive(name: str, value: str) -> int:
    return _integer(name, value, 1, "a positive integer")


def _epoch_ms(name: str, value: str) -> int:
    return _integer(name, value, 0, "epoch milliseconds (an integer >= 0)")


def _kind(name: str, value: str) -> str:
    v = value.strip().lower()
    if v not in KINDS:
        raise _bad(name, value, " or ".join(KINDS))
    return v


def _columns(name: str, value: str) -> tuple[str, ...]:
    names = tuple(c.strip() for c in value.split(",") if c.strip())
    if not names:
        raise _bad(name, value, "a comma list of column names")
    return names


def _topics(name: str, value: str) -> frozenset[str]:
    names = frozenset(t.strip() for t in value.split(",") if t.strip())
    if not names:
        raise _bad(name, value, "a comma list of topic names")
    return names


def _pattern(name: str, value: str) -> re.Pattern[str]:
    try:
        return re.compile(value)
    except re.error as e:
        raise _bad(name, value, f"a regular expression (Python re syntax; {e})") from None


def _delay_levels(name: str, value: str) -> str:
    try:
        load_config({"messageDelayLevel": value})
    except SettingError as e:
        raise _bad(name, value, f"delay levels such as '1s 5s 10s 1m' ({e})") from None
    return value


def _paths(name: str, value: str) -> str:
    if not any(p.strip() for p in value.split(",")):
        raise _bad(name, value, "a directory, or several with ',' between them (as the broker setting)")
    return value


_POSITION = ('earliest, latest, or JSON {"store": <identity>, "commitlogOffset": N} '
             '(store optional, N >= 0)')


def _position(name: str, value: str) -> Position:
    v = value.strip()
    if v.lower() in (EARLIEST, LATEST):
        return EARLIEST if v.lower() == EARLIEST else LATEST
    try:
        parsed = json.loads(v)
    except ValueError:
        raise _bad(name, value, _POSITION) from None
    if not isinstance(parsed, dict) or set(parsed) - {"store", "commitlogOffset"}:
        raise _bad(name, value, _POSITION)
    offset, store = parsed.get("commitlogOffset"), parsed.get("store")
    if type(offset) is not int or offset < 0 or not (store is None or isinstance(store, str)):
        raise _bad(name, value, _POSITION)
    return CommitLogPosition(offset, store)


@dataclass(frozen=True)
class _Option:
    name: str  #: the documented spelling
    field: str  #: the SourceOptions field
    parse: Callable[[str, str], Any]
    #: "batch" or "stream" when only that mode takes it
    mode: str | None = None


_OPTIONS = (
    _Option("path", "path", lambda _n, v: v),
    _Option("kind", "kind", _kind),
    _Option("columns", "columns", _columns),
    _Option("checkCRC", "check_crc", _boolean),
    _Option("splitBytes", "split_bytes", _positive),
    _Option("mappedFileSizeCommitLog", "mapped_file_size_commitlog", _positive),
    _Option("mappedFileSizeConsumeQueue", "mapped_file_size_consume_queue", _positive),
    _Option("messageDelayLevel", "message_delay_level", _delay_levels),
    _Option("storePathCommitLog", "store_path_commitlog", _paths),
    _Option("readOnlyCommitLogStorePaths", "read_only_commitlog_store_paths", _paths),
    _Option("topics", "topics", _topics),
    _Option("topicPattern", "topic_pattern", _pattern),
    _Option("startingOffsets", "starting_offsets", _position),
    _Option("endingOffsets", "ending_offsets", _position, "batch"),
    _Option("startingTimestamp", "starting_timestamp", _epoch_ms),
    _Option("endingTimestamp", "ending_timestamp", _epoch_ms, "batch"),
    _Option("consumable", "consumable", _boolean),
    _Option("inflateBodies", "inflate_bodies", _boolean),
    _Option("maxBytesPerTrigger", "max_bytes_per_trigger", _positive, "stream"),
    _Option("maxRecordsPerTrigger", "max_records_per_trigger", _positive, "stream"),
    _Option("failOnDataLoss", "fail_on_data_loss", _boolean),
)
#: Kafka's names, taken as ours
ALIASES = {"subscribe": "topics", "subscribePattern": "topicPattern"}
_BY_NAME = {o.name.lower(): o for o in _OPTIONS}
_ALIASES = {a.lower(): n for a, n in ALIASES.items()}
KNOWN = tuple(o.name for o in _OPTIONS) + tuple(f"{a} (= {n})" for a, n in ALIASES.items())


def parse(options: Mapping[str, Any], streaming: bool | None) -> SourceOptions:
    """``options`` (Spark's, any case; values strings) as a :class:`SourceOptions` for a batch
    read (``streaming`` False) or a stream (True); SettingError for an unknown option, an option
    of the other mode, a bad value or a contradicting pair (the module docstring). ``None``: the
    mode is not known yet (``DataSource.schema``), so options of either mode are taken."""
    values: dict[str, Any] = {}
    given: dict[str, str] = {}  # documented name -> the name as the user gave it
    for raw_name, value in options.items():
        name = str(raw_name)
        opt = _BY_NAME.get(_ALIASES.get(name.lower(), name).lower())
        if opt is None:
            raise SettingError(f"rocketmq source: unknown option {name!r}; known options: "
                               f"{', '.join(KNOWN)}")
        if opt.name in given:
            raise SettingError(f"rocketmq source: options {given[opt.name]} and {name} are the same "
                               f"option; give one")
        mode = "stream" if streaming else "batch"
        if opt.mode is not None and streaming is not None and opt.mode != mode:
            raise SettingError(f"rocketmq source: option {opt.name} is for {opt.mode} queries only, "
                               f"not a {mode} query")
        given[opt.name] = name
        values[opt.field] = opt.parse(opt.name, "" if value is None else str(value))
    _check_pairs(values, given, streaming)
    if "path" not in values or not values["path"]:
        raise SettingError("rocketmq source: give the store root: .load(store_root)")
    levels = values.get("message_delay_level")
    if levels is not None:
        values["delay_levels_ms"] = load_config({"messageDelayLevel": levels}).delay_levels_ms
    else:
        values["delay_levels_ms"] = load_config({}).delay_levels_ms
    if streaming:
        values.setdefault("starting_offsets", LATEST)
    return SourceOptions(streaming=bool(streaming), **values)


def _check_pairs(values: dict[str, Any], given: dict[str, str], streaming: bool | None) -> None:
    """Options that exclude each other, and positions a mode cannot take (as Kafka)."""
    for a, b in (("topics", "topicPattern"), ("startingOffsets", "startingTimestamp"),
                 ("endingOffsets", "endingTimestamp")):
        if a in given and b in given:
            raise SettingError(f"rocketmq source: options {given[a]} and {given[b]} exclude each "
                               f"other; give one")
    if values.get("ending_offsets") == EARLIEST:
        raise SettingError("rocketmq source: option endingOffsets='earliest' is not accepted (the "
                           "end is exclusive: it reads nothing); expected latest or a JSON offset")
    if streaming is False and values.get("starting_offsets") == LATEST:
        raise SettingError("rocketmq source: option startingOffsets='latest' is not accepted in a "
                           "batch query (it reads nothing); expected earliest or a JSON offset")
    first, last = values.get("starting_offsets"), values.get("ending_offsets")
    if isinstance(first, CommitLogPosition) and isinstance(last, CommitLogPosition) and \
            last.commitlog_offset < first.commitlog_offset:
        raise SettingError(f"rocketmq source: endingOffsets {last.commitlog_offset} is before "
                           f"startingOffsets {first.commitlog_offset}")
    start, end = values.get("starting_timestamp"), values.get("ending_timestamp")
    if start is not None and end is not None and end < start:
        raise SettingError(f"rocketmq source: endingTimestamp={end} is before "
                           f"startingTimestamp={start}")
