"""The cyclic garbage collector paused over a step that makes many objects and little garbage.

A collection scans every tracked object of its generations: while a step piles up objects that
stay alive (an import's modules, functions and types; the objects of thousands of queues), each
collection the allocations trigger scans them again, for nothing. Reference counting still frees
what the step drops meanwhile; only reference cycles wait for the collector to be back on.
"""
from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    """The collector off meanwhile, for the whole process (back on after, if it was on)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
