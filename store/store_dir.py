"""What a store directory is: the one rule every command and the library check a store path by.

A store is a directory holding a `commitlog/` directory. Every RocketMQ broker has one (its
storePathCommitLog, by default under the store root; it may be a link to another disk) and every
rocketlake writer makes it first (``create_store``), so a store that was ever opened for
writing has it, even one that holds no message yet. Nothing else marks a store: a directory
holding only `config/` (a broker's config directory, a project's settings) or a stray file named
`lock` or `checkpoint` is not one, and no command reads it as an empty store or writes into it.

A writer may also make a new store: at a path that does not exist yet, or in an empty
directory (``fresh=True``). Read-only surfaces (verify, dump, get, query, the operator
commands, the Spark jobs) accept a store only.
"""
from __future__ import annotations

import os
from pathlib import Path

from rocketlake.store.errors import NotAStoreError, UnsafePathError

COMMITLOG_DIR = "commitlog"


def store_problem(root: str | Path, fresh: bool = False) -> str | None:
    """Why ``root`` is not a store, naming the path and what is missing; None when it is one
    (or, with ``fresh``, when a writer may make one there: missing, or an empty directory)."""
    root = Path(root)
    if not root.exists():
        return None if fresh else f"{root}: no such store directory"
    if not root.is_dir():
        return f"{root}: is a file, not a store directory" if root.is_file() else f"{root}: not a directory"
    if (root / COMMITLOG_DIR).is_dir() or (fresh and not any(root.iterdir())):
        return None
    held = sorted(p.name + ("/" if p.is_dir() else "") for p in root.iterdir())
    what = f"it holds {', '.join(held[:5])}{', ...' if len(held) > 5 else ''}" if held else "it is empty"
    return f"{root}: not a RocketMQ store (no {COMMITLOG_DIR}/ directory; {what})"


def check_store(root: str | Path, fresh: bool = False) -> Path:
    """``root`` as a Path when ``store_problem`` finds nothing; NotAStoreError otherwise."""
    problem = store_problem(root, fresh)
    if problem is not None:
        raise NotAStoreError(problem)
    return Path(root)


def create_store(root: str | Path) -> Path:
    """Make ``root`` a store (the directory and its `commitlog/`) after ``check_store(root,
    fresh=True)``: a path that is neither missing, an empty directory nor a store is refused
    and nothing is written into it."""
    root = check_store(root, fresh=True)
    (root / COMMITLOG_DIR).mkdir(parents=True, exist_ok=True)
    return root


def check_outside(store: str | Path, output: str | Path, what: str) -> None:
    """Refuse (UnsafePathError naming both) an ``output`` directory that is ``store`` or lies
    inside it, links resolved: what a command writes there (``what``: "salvage's new store",
    ...) would land among the store's own files, where readers take it for part of the store
    (a directory in `commitlog/` stops every open)."""
    s, o = os.path.realpath(store), os.path.realpath(output)
    if o == s or o.startswith(os.path.join(s, "")):
        where = "the store" if o == s else "inside the store"
        raise UnsafePathError(f"{output}: is {where} {store}; {what} must be written outside it")
