"""The cyclic garbage collector paused over a step that makes many objects and little garbage.

A collection scans every tracked object of its generations: while a step piles up objects that
stay alive (an import's modules, functions and types; the objects of thousands of queues), each
collection the allocations trigger scans them again, for nothing. Reference counting still frees
what the step drops meanwhile; only reference cycles wait for the collector to be back on.
"""
from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_depth = 0  # blocks entered and not left, over all threads
_was_enabled = False  # whether the collector was on when the first of them was entered


@contextmanager
def gc_paused() -> Iterator[None]:
    """The collector off for the whole process until every thread inside such a block has left
    it; then back on if it was on when the first entered."""
    global _depth, _was_enabled
    with _lock:
        if _depth == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _was_enabled:
                gc.enable()
