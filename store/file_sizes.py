"""File sizes read from a store's files, for readers of a store another process wrote (a broker
with its own ``mappedFileSizeCommitLog``, ``mappedFileSizeConsumeQueue``, ``maxHashSlotNum`` and
``maxIndexNum``). Writers keep checking sizes against their configuration; readers take them from
the files, so a broker's store opens without its settings.

The rules (RocketMQ preallocates every file of a kind at one size, ``MappedFileQueue.load``):

- CommitLog: every file under `commitlog/` has the same length, which is the file size; files of
  different lengths are refused, naming them.
- ConsumeQueue: every file under `consumequeue/<topic>/<queueId>/` has the same length (one
  setting for all queues, as in RocketMQ), a whole number of 20-byte units.
- IndexFile: every file under `index/` has the same length
  ``40 + maxHashSlotNum * 4 + maxIndexNum * 20`` (``IndexFile``'s header, slot table, entries).
  The length alone does not tell the slot count from the entry count: the configured geometry is
  kept when it gives that length; else the one explicit setting (``maxHashSlotNum`` or
  ``maxIndexNum``) fixes the other; else the geometry is read from the entries: the one
  ``(slots, entries)`` giving the length under which, in every file that holds keys, entry 0 is
  unused, the first and last entries hold the header's beginPhyOffset and endPhyOffset, and the
  last entry heads its hash slot's chain (``IndexFile.putKey`` writes the slot last); when no
  geometry fits every such file (one is damaged), the one that more files agree with than with
  any other. None or several: refused, asking for the settings.

A setting given explicitly (``explicit``) that disagrees with the files is an error naming both.
No files of a kind: the configured value stands.
"""
from __future__ import annotations

import dataclasses
import os
import re
import stat
import warnings
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from rocketlake.store.codec import (
    CQ_UNIT_SIZE,
    INDEX_ENTRY_SIZE,
    INDEX_HEADER,
    INDEX_HEADER_SIZE,
    INDEX_SLOT_SIZE,
)
from rocketlake.store.config import StoreConfig, load_config
from rocketlake.store.errors import SettingError, StoreFormatError
from rocketlake.store.paths import CONSUME_QUEUE_DIR
from rocketlake.store.safe_files import directory_in_place

_STORE_FILE = re.compile(r"^\d{20}$")
_INDEX_FILE = re.compile(r"^\d{17}$")
_CHUNK = 1 << 20  # candidate geometries checked per numpy pass


def config_from_files(root: str | os.PathLike[str], config: StoreConfig,
                      explicit: Collection[str] = (), replacing: Collection[str] = ()) -> StoreConfig:
    """``config`` with its CommitLog, ConsumeQueue and (when ``messageIndexEnable``) index file
    sizes taken from the store at ``root`` (rules: the module docstring). ``explicit`` names
    the settings the user gave; one that the files contradict is a SettingError. Files of one
    kind with different lengths are a StoreFormatError naming them.

    ``replacing`` names the structures (``"consumequeue"``, ``"index"``) the caller writes anew
    (a rebuild): their files give the size only where no setting was given and they agree; files
    that disagree (the damage a rebuild repairs) leave the configured size, with a warning."""
    root = Path(root)
    cfg = with_commitlog_size(root, config, explicit)
    rules: list[tuple[str, Callable[[Path, StoreConfig, Collection[str]], StoreConfig],
                      tuple[str, ...]]] = [
        ("consumequeue", with_consume_queue_size, ("mappedFileSizeConsumeQueue",))]
    if cfg.messageIndexEnable:
        rules.append(("index", with_index_geometry, ("maxHashSlotNum", "maxIndexNum")))
    for kind, rule, names in rules:
        if kind not in replacing:
            cfg = rule(root, cfg, explicit)
        elif not any(n in explicit for n in names):
            try:
                cfg = rule(root, cfg, explicit)
            except (StoreFormatError, SettingError) as e:
                warnings.warn(f"{e}; the rebuilt {kind} takes the configured size", stacklevel=2)
    return cfg


def reading_config(root: str | os.PathLike[str], settings: Mapping[str, str],
                   replacing: Collection[str] = ()) -> StoreConfig:
    """The settings to read the store at ``root`` with: ``settings`` (the user's ``--set``) over
    `store.conf`, with the file sizes taken from the store's files (``config_from_files``; a
    setting the files contradict is a SettingError naming both; ``replacing`` as there)."""
    return config_from_files(root, load_config(settings), explicit=settings, replacing=replacing)


def with_commitlog_size(root: Path, config: StoreConfig, explicit: Collection[str] = ()) -> StoreConfig:
    """``config`` with ``mappedFileSizeCommitLog`` from the CommitLog files (under `commitlog/`,
    or the directories ``storePathCommitLog`` and ``readOnlyCommitLogStorePaths`` name)."""
    dirs = config.commitlog_dirs(root)
    where = ", ".join(str(d) for d in dirs)
    size = _one_length(_sizes(f for d in dirs if d.is_dir() for f in d.iterdir()),
                       f"{where}: CommitLog files")
    return _take(config, "mappedFileSizeCommitLog", size, explicit, f"the CommitLog files under {where}")


def with_consume_queue_size(root: Path, config: StoreConfig, explicit: Collection[str] = ()) -> StoreConfig:
    """``config`` with ``mappedFileSizeConsumeQueue`` from the files under `consumequeue/`."""
    base = root / CONSUME_QUEUE_DIR
    sizes = _queue_file_sizes(base)
    size = _one_length(sizes, f"{base}: ConsumeQueue files")
    if size is not None and size % CQ_UNIT_SIZE:
        first = min(map(Path, sizes))
        others = f" (as are the other {len(sizes) - 1})" if len(sizes) > 1 else ""
        raise StoreFormatError(f"{first}: ConsumeQueue file is {size} bytes, not a multiple of the "
                               f"{CQ_UNIT_SIZE}-byte unit{others}: mappedFileSizeConsumeQueue is "
                               f"a whole number of units, so the file is damaged or not a "
                               f"ConsumeQueue file")
    return _take(config, "mappedFileSizeConsumeQueue", size, explicit,
                 f"the ConsumeQueue files under {base}")


def with_index_geometry(root: Path, config: StoreConfig, explicit: Collection[str] = ()) -> StoreConfig:
    """``config`` with ``maxHashSlotNum`` and ``maxIndexNum`` from the files under `index/`."""
    d = root / "index"
    paths = sorted(p for p in (d.iterdir() if d.is_dir() else ()) if _INDEX_FILE.match(p.name))
    size = _one_length({p: _file_size(p) for p in paths}, f"{d}: index files")
    if size is None:
        return config
    slots, entries = config.maxHashSlotNum, config.maxIndexNum
    given = [n for n in ("maxHashSlotNum", "maxIndexNum") if n in explicit]
    if _fits(size, slots, entries):
        return config
    if len(given) == 2:
        raise SettingError(f"maxHashSlotNum={slots} and maxIndexNum={entries} were given, but the "
                           f"index files under {d} are {size} bytes, not 40 + {slots}*4 + {entries}*20")
    if given == ["maxHashSlotNum"]:
        found = [(slots, (size - INDEX_HEADER_SIZE - INDEX_SLOT_SIZE * slots) // INDEX_ENTRY_SIZE)]
    elif given == ["maxIndexNum"]:
        found = [((size - INDEX_HEADER_SIZE - INDEX_ENTRY_SIZE * entries) // INDEX_SLOT_SIZE, entries)]
    else:
        found = _geometries_from_entries(paths, size)
    found = [g for g in found if _fits(size, *g)]
    if len(found) != 1:
        with_ = "".join(f" with {n}={getattr(config, n)}" for n in given)
        why = (f"several geometries (slots/entries) fit: {', '.join(f'{s}/{e}' for s, e in found[:5])}"
               if found else f"no geometry{with_} fits that length and their entries")
        raise SettingError(f"{d}: index files are {size} bytes and {why}; give --set "
                           f"maxHashSlotNum=N --set maxIndexNum=M as the broker that wrote them had")
    return dataclasses.replace(config, maxHashSlotNum=found[0][0], maxIndexNum=found[0][1])


def _fits(size: int, slots: int, entries: int) -> bool:
    return slots > 0 and entries > 0 and \
        INDEX_HEADER_SIZE + INDEX_SLOT_SIZE * slots + INDEX_ENTRY_SIZE * entries == size


def _geometries_from_entries(paths: list[Path], size: int) -> list[tuple[int, int]]:
    """Every ``(slots, entries)`` of file length ``size`` that every index file holding keys
    agrees with (rules: the module docstring); [] when no file holds keys. When no geometry
    fits them all, the one geometry that the most files agree with, so that one damaged file
    does not hide the geometry of the others (verify reports it, recovery rebuilds it)."""
    room = size - INDEX_HEADER_SIZE
    if room <= 0 or room % 4:
        return []
    words = room // 4  # the slot table and entries, in 4-byte words: slots + 5 * entries
    every = np.arange(words % 5 or 5, words - 4, 5, dtype=np.int64)  # entries = (words - slots) / 5
    keyed = [p for p in paths if _index_count(p) > 1]
    slots = every
    for p in keyed:
        slots = _agreeing(p, slots, words)
        if not slots.size:
            break
    if not slots.size and len(keyed) > 1:
        votes = Counter(s for p in keyed for s in _agreeing(p, every, words).tolist())
        best = votes.most_common(2)
        if best and (len(best) == 1 or best[0][1] > best[1][1]):
            slots = np.array([best[0][0]], dtype=np.int64)
    return [(s, (words - s) // 5) for s in slots.tolist()] if keyed else []


def _index_count(path: Path) -> int:
    with open(path, "rb") as f:
        count: int = INDEX_HEADER.unpack(f.read(INDEX_HEADER_SIZE))[5]
    return count


def _agreeing(path: Path, slots: npt.NDArray[np.int64], words: int) -> npt.NDArray[np.int64]:
    """The candidate slot counts ``slots`` that the index file at ``path`` agrees with."""
    with open(path, "rb") as f:
        _, _, begin_phy, end_phy, _, count = INDEX_HEADER.unpack(f.read(INDEX_HEADER_SIZE))
    w = np.memmap(path, dtype=">u4", mode="r", offset=INDEX_HEADER_SIZE, shape=(words,))
    keep = [slots[i:i + _CHUNK][_agree(w, slots[i:i + _CHUNK], words, count, begin_phy, end_phy)]
            for i in range(0, slots.size, _CHUNK)]
    del w
    return np.concatenate(keep) if keep else slots


def _agree(w: npt.NDArray[np.uint32], slots: npt.NDArray[np.int64], words: int, count: int,
           begin_phy: int, end_phy: int) -> npt.NDArray[np.bool_]:
    """Which candidate slot counts the entries of one index file (``w``: its words after the
    header; header ``count``, ``begin_phy``, ``end_phy``) agree with."""
    ok: npt.NDArray[np.bool_] = (words - slots) // 5 >= count
    slots = np.where(ok, slots, 1)
    # word of the last entry: keyHash, phyOffset (2 words), timeDiff, prevIndex
    last = np.minimum(slots + 5 * (count - 1), words - 5)

    def phy(at: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        return (w[at + 1].astype(np.int64) << 32) | w[at + 2].astype(np.int64)

    for k in range(5):
        ok &= w[slots + k] == 0
    ok &= phy(slots + 5) == begin_phy
    ok &= phy(last) == end_phy
    key_hash = w[last].astype(np.int64)
    ok &= key_hash < 2 ** 31
    ok &= w[key_hash % slots] == count - 1
    return ok


def _file_size(path: str | Path) -> int:
    """The size of the store file at ``path`` (a link followed); StoreFormatError naming it when
    it is a directory (whose st_size is no file's length)."""
    st = os.stat(path)
    if stat.S_ISDIR(st.st_mode):
        raise directory_in_place(path)
    return st.st_size


def _sizes(files: Iterable[Path]) -> dict[Path, int]:
    return {p: _file_size(p) for p in files if _STORE_FILE.match(p.name)}


def _queue_file_sizes(base: Path) -> dict[str, int]:
    """The size of every store file in ``base``'s `<topic>/<queueId>/` directories (entries that
    are no directory skipped, links followed), by path: one ``scandir`` per directory."""
    if not base.is_dir():
        return {}
    return {f.path: _file_size(f.path) for t in os.scandir(base) if t.is_dir()
            for q in os.scandir(t.path) if q.is_dir()
            for f in os.scandir(q.path) if _STORE_FILE.match(f.name)}


def _one_length(sizes: Mapping[Path, int] | Mapping[str, int], what: str) -> int | None:
    """The one length of ``sizes``' files, None for no files; StoreFormatError naming a file of
    each length when they differ, and naming them when they are all empty."""
    if len(set(sizes.values())) <= 1:
        size = next(iter(sizes.values()), None)
        if size == 0:
            paths = sorted(map(str, sizes))
            raise StoreFormatError(f"{what} ({', '.join(paths[:3])}{', ...' if len(paths) > 3 else ''}) "
                                   f"are 0 bytes: a broker creates each store file at its full "
                                   f"size, so they are damaged")
        return size
    lengths: dict[int, list[Path]] = {}
    for p, n in sorted((Path(p), n) for p, n in sizes.items()):
        lengths.setdefault(n, []).append(p)
    parts = [f"{len(ps)} of {n} bytes ({', '.join(str(p) for p in ps[:3])}"
             f"{', ...' if len(ps) > 3 else ''})" for n, ps in sorted(lengths.items())]
    raise StoreFormatError(f"{what} differ in size: {'; '.join(parts)}; a store's files of one "
                           f"kind share one size")


def _take(config: StoreConfig, name: str, size: int | None, explicit: Collection[str],
          where: str) -> StoreConfig:
    if size is None or size == getattr(config, name):
        return config
    if name in explicit:
        raise SettingError(f"{name}={getattr(config, name)} was given, but {where} are {size} bytes")
    changed: dict[str, Any] = {name: size}
    return dataclasses.replace(config, **changed)
