"""Compiled per-record loops: the one codec the writer, recovery, verify, rebuilds and the Spark
scan share (numba ``@njit`` over numpy ``uint8`` views of mapped files).

Each kernel is plain Python source compiled to machine code on first call and kept in numba's
on-disk cache, in the folder :mod:`rocketlake.store.kernels.cache` chooses: the package ships
the kernels compiled (``store/kernels/compiled/``, filled by ``make venv`` / ``make dist``), so a
fresh install, a wheel on ``--py-files`` included, loads them instead of compiling them.
"""
from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any, TypeVar, cast

from rocketlake.store.gc_pause import gc_paused

with gc_paused():  # numba's import keeps ~90,000 objects: collections meanwhile took 0.04 s
    import numba
    from numba.core.ccallback import CFunc
    from numba.core.sigutils import normalize_signature

from rocketlake.store.kernels.cache import KernelCache, cacheable

F = TypeVar("F", bound=Callable[..., Any])

#: whether compiled kernels are kept on disk (False when no cache folder is writable)
CACHE = cacheable()


def kernel(fn: F) -> F:
    """Compile ``fn`` in nopython mode, releasing the GIL, cached when possible."""
    return _compile(fn, nrt=True)


def leaf_kernel(fn: F) -> F:
    """``kernel`` for a function that allocates nothing (no arrays, lists or dicts made or
    returned): compiled without numba's reference counting, whose atomic count on each array
    argument costs tens of nanoseconds per call where a per-record loop calls it and numba does
    not inline it."""
    return _compile(fn, nrt=False)


def _compile(fn: F, nrt: bool) -> F:
    options: dict[str, Any] = {"nogil": True, "_nrt": nrt}  # _nrt: numba's reference counting
    dispatcher = numba.njit(**options)(fn)
    if CACHE:
        # numba's Dispatcher.enable_caching(), with the cache that finds the shipped kernels
        cast(Any, dispatcher)._cache = KernelCache(fn)  # type: ignore[no-untyped-call]
    return cast(F, dispatcher)


def callback(signature: Any) -> Callable[[Callable[..., Any]], CFunc]:
    """Compile a function as a C callback of ``signature`` (numba ``cfunc``: nopython, releasing
    the GIL), cached as the kernels are; ``.address`` is its C function pointer."""
    def compile_(fn: Callable[..., Any]) -> CFunc:
        compiled = CFunc(fn, normalize_signature(signature),  # type: ignore[no-untyped-call]
                         locals={}, options={"nogil": True})
        if CACHE:
            cast(Any, compiled)._cache = KernelCache(fn)  # type: ignore[no-untyped-call]
        compiled.compile()
        return compiled
    return compile_


def preload_behind(kernels: Iterable[Callable[..., Any]]) -> threading.Thread:
    """Load, on a thread of its own, the machine code the cache holds for each of ``kernels``
    (every signature of it the cache has), as each one's first call would: 3-60 ms a kernel
    (numba rebuilds its environment and links its code), which callers that are about to run
    them (a store's recovery) overlap with opening files. A call meanwhile waits for a load in
    progress (numba's compiler lock). Only signatures whose cache entry is there are loaded (one
    that fails to load after all is compiled, as its first call would compile it). The
    interpreter waits for the thread before it exits (it is no daemon: none is stopped inside
    LLVM)."""
    def load() -> None:
        for fn in kernels:
            dispatcher: Any = fn
            cache = getattr(dispatcher, "_cache", None)
            if not isinstance(cache, KernelCache):
                continue
            try:
                for sig in cache.signatures(dispatcher.targetctx.codegen()):
                    if sig not in dispatcher.overloads:
                        dispatcher.compile(sig)
            except Exception:  # noqa: BLE001 - the kernel's first call meets it and reports it
                continue

    thread = threading.Thread(target=load, name="kernel-preload")
    thread.start()
    return thread
