"""The rebuild swap: a full rebuild's new `consumequeue/` and `index/` put in place of the live
ones, completed from whatever point a crash stopped it at.

A full rebuild writes each structure into a new directory aside (``aside``:
`<root>/.<name>.rebuild-<id>`, with the mode of the directory it will replace, 0755 when there is
none). ``swap_in`` then runs ``Swap.steps()``:

1. make the new directories durable (``safe_files.make_durable``), then write the journal
   `<root>/rebuild.pending` whole (a temporary name, fsync, rename, directory fsync): per
   structure, its new directory and the name the live one is moved to (`.<name>.old-<id>`);
2. per structure, rename the live directory to its old name, then the new one to the live name
   (each rename followed by a directory fsync);
3. per structure, delete the old directory; last, remove the journal: the end of the swap.

Every step looks at the directories before it acts, so running all steps again completes a swap
stopped after any of them (roll forward: the journal is written only when the new directories are
whole). ``recover`` does that, puts back a live directory an unjournaled swap (rocketlake before
this module) left moved aside, and deletes what a rebuild stopped before its journal left: the
directories named `.consumequeue.rebuild-<id>`, `.index.rebuild-<id>`, `.parts.rebuild-<id>`,
`.consumequeue.old-<id>` and `.index.old-<id>` in the store root (``<id>``: the 8 characters
``tempfile.mkdtemp`` gives), nothing else. The next writer open and a rebuild into the store, both
holding the store's writer lock, run it first.

Readers do not guess which structures an unfinished swap left where: while the journal exists,
opening the ConsumeQueues or the index is refused (``refuse_unfinished``: StoreFormatError
naming the journal, exit 3) until a writer completes the swap.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import NamedTuple

from rocketlake.store.errors import StoreFormatError
from rocketlake.store.safe_files import disk_error, fsync_dir, make_durable, write_whole

JOURNAL_NAME = "rebuild.pending"
#: the structures a rebuild swaps in, by their directory in the store
STRUCTURES = ("consumequeue", "index")
#: what a rebuild makes in the store root (its staging, ``aside``, and what ``swap_in`` moves
#: aside), and the journal's temporary name
_MADE = re.compile(r"\.(?:(?:consumequeue|index)\.(?:rebuild|old)|parts\.rebuild)-[a-z0-9_]{8}")
_JOURNAL_TMP = f".{JOURNAL_NAME}.tmp"


def aside(root: Path, name: str) -> Path:
    """A new, empty directory `<root>/.<name>.rebuild-<id>` to write a replacement of
    `<root>/<name>` into (never one that was there before), with that directory's mode (0755 when
    there is none, as for a rebuild's staging, ``name`` "parts")."""
    live = Path(root) / name
    mode = stat.S_IMODE(live.stat().st_mode) if live.is_dir() else 0o755
    new = Path(tempfile.mkdtemp(prefix=f".{name}.rebuild-", dir=root))
    os.chmod(new, mode)
    return new


class Step(NamedTuple):
    """One step of a swap: what it does, and doing it (a no-op when it is already done)."""
    what: str
    run: Callable[[], None]


@dataclass(frozen=True)
class Move:
    """One structure's part of a swap: the names (in the store root) of its live directory, of
    the new directory that replaces it and of where the live one goes meanwhile."""
    name: str
    new: str
    old: str


@dataclass(frozen=True)
class Swap:
    """A swap of ``moves`` in the store at ``root`` (the module docstring)."""
    root: Path
    moves: tuple[Move, ...]

    @property
    def journal(self) -> Path:
        return self.root / JOURNAL_NAME

    def steps(self) -> list[Step]:
        """The steps, in order; running them all, from the first, after any prefix of them ran,
        leaves the swap done."""
        steps = [Step("write the journal", self._write_journal)]
        for m in self.moves:
            steps += [Step(f"move {m.name}/ to {m.old}", partial(self._live_aside, m)),
                      Step(f"move {m.new} to {m.name}/", partial(self._new_in, m))]
        steps += [Step(f"delete {m.old}", partial(self._delete_old, m)) for m in self.moves]
        return steps + [Step("remove the journal", self._remove_journal)]

    def _write_journal(self) -> None:
        if self.journal.exists():
            return
        for m in self.moves:
            make_durable(self.root / m.new)
        data = json.dumps({"moves": [vars(m) for m in self.moves]}).encode()
        write_whole(self.journal, data, "writing the rebuild's swap journal")

    def _live_aside(self, m: Move) -> None:
        live, new, old = self.root / m.name, self.root / m.new, self.root / m.old
        if not new.exists() or not os.path.lexists(live):
            return  # swapped in already, or there was no live directory
        if os.path.lexists(old):
            raise self._stuck(f"{m.name}/, {m.new} and {m.old} are all there")
        os.rename(live, old)
        fsync_dir(self.root)

    def _new_in(self, m: Move) -> None:
        live, new = self.root / m.name, self.root / m.new
        if not new.exists():
            if not live.is_dir():
                raise self._stuck(f"neither {m.new} nor {m.name}/ is there")
            return
        if os.path.lexists(live):
            raise self._stuck(f"{m.name}/ is there before {m.new} was moved to it")
        os.rename(new, live)
        fsync_dir(self.root)

    def _delete_old(self, m: Move) -> None:
        if os.path.lexists(self.root / m.old):
            shutil.rmtree(self.root / m.old)

    def _remove_journal(self) -> None:
        if os.path.lexists(self.journal):
            self.journal.unlink()
            fsync_dir(self.root)

    def _stuck(self, what: str) -> StoreFormatError:
        return StoreFormatError(f"{self.journal}: cannot complete the rebuild's swap: {what}; "
                                f"something else changed the store root")


def plan(root: Path, new: Mapping[str, Path]) -> Swap:
    """The swap putting each directory of ``new`` (by structure name; made by ``aside`` in
    ``root``) in place of `<root>/<name>`. StoreFormatError when a swap is unfinished there."""
    root = Path(root)
    if os.path.lexists(root / JOURNAL_NAME):
        raise StoreFormatError(f"{root / JOURNAL_NAME}: an unfinished rebuild swap's journal is "
                               f"already there")
    moves = []
    for name, d in sorted(new.items()):
        prefix = f".{name}.rebuild-"
        if (name not in STRUCTURES or Path(d).parent != root or not d.name.startswith(prefix)
                or not _MADE.fullmatch(d.name)):
            raise ValueError(f"{d}: not a rebuild directory for {name}/ in {root}")
        move = Move(name, d.name, f".{name}.old-{d.name[len(prefix):]}")
        if os.path.lexists(root / move.old):
            raise FileExistsError(f"{root / move.old}: already there; the swap moves {name}/ there")
        moves.append(move)
    return Swap(root, tuple(moves))


def swap_in(root: Path, new: Mapping[str, Path]) -> None:
    """Put each directory of ``new`` (``plan``) in place of `<root>/<name>` and delete the ones
    it replaces; the caller holds the store's writer lock. The new directories are taken over:
    should the journal not be written (a full disk), they are deleted and the store is as it
    was; should a later step fail, the error names the journal and the next writer open
    completes the swap."""
    try:
        swap = plan(root, new)
        first, *rest = swap.steps()
        first.run()
    except BaseException:
        for d in new.values():
            shutil.rmtree(d, ignore_errors=True)
        raise
    for step in rest:
        try:
            step.run()
        except OSError as e:
            raise disk_error(e, swap.journal, f"swapping in the rebuild ({step.what}); the next "
                                              f"writer open completes the swap") from None


def read(root: Path) -> Swap | None:
    """The swap the journal at ``root`` records, None when there is none; StoreFormatError
    naming it when it cannot be read or names anything a swap does not make."""
    path = Path(root) / JOURNAL_NAME
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        moves = tuple(Move(**m) for m in json.loads(raw)["moves"])
        for m in moves:
            suffix = m.new.rpartition("-")[2]
            if (m.name not in STRUCTURES or not _MADE.fullmatch(m.new) or
                    m.new != f".{m.name}.rebuild-{suffix}" or m.old != f".{m.name}.old-{suffix}"):
                raise ValueError(f"names {m.name!r}, {m.new!r}, {m.old!r}")
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise StoreFormatError(f"{path}: unreadable rebuild swap journal ({e}); it is written "
                               f"whole, so something else changed it") from None
    return Swap(Path(root), moves)


def recover(root: Path) -> None:
    """Holding the store's writer lock: complete the swap the journal at ``root`` records, if
    any, then delete the directories a rebuild made in ``root`` and left (the module
    docstring)."""
    root = Path(root)
    swap = read(root)
    for step in swap.steps() if swap is not None else ():
        step.run()
    (root / _JOURNAL_TMP).unlink(missing_ok=True)
    for name in STRUCTURES:
        _put_back_unjournaled(root, name)
    for p in root.iterdir():
        if _MADE.fullmatch(p.name) and p.is_dir() and not p.is_symlink():
            shutil.rmtree(p)


def _put_back_unjournaled(root: Path, name: str) -> None:
    """Put `<root>/<name>` back where a swap without a journal (rocketlake before
    ``swap_journal``) was killed with it moved into `.<name>.old-<id>/<name>` and nothing in its
    place: the one such directory is renamed back."""
    if os.path.lexists(root / name):
        return
    moved = [p / name for p in root.glob(f".{name}.old-*")
             if _MADE.fullmatch(p.name) and not p.is_symlink() and (p / name).is_dir()]
    if len(moved) == 1:
        os.rename(moved[0], root / name)
        fsync_dir(root)


def refuse_unfinished(root: str | Path) -> None:
    """Readers of `consumequeue/` or `index/`: StoreFormatError naming the journal when a
    rebuild's swap at ``root`` is unfinished (what is where depends on when it stopped)."""
    path = Path(root) / JOURNAL_NAME
    if os.path.lexists(path):
        raise StoreFormatError(
            f"{path}: a rebuild was interrupted while swapping in its new consumequeue/ and "
            f"index/, so they cannot be read; opening the store for writing (or running the "
            f"rebuild again) completes the swap")
