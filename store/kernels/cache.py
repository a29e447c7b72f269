"""Where the compiled kernels are kept: numba's on-disk cache, keyed so that a copy of the
package (a wheel installed anywhere, a wheel or zip on ``--py-files``) finds the machine code that
was compiled before it was shipped.

The package carries a cache folder, ``store/kernels/compiled/``, filled by
``python -m rocketlake.jobs.cli.warm_kernels`` (``make venv`` and ``make dist`` run it; the wheel
ships the folder as package data). A process uses the first of:

1. ``$NUMBA_CACHE_DIR/rocketlake-<digest>`` when ``NUMBA_CACHE_DIR`` is set (numba's own override);
2. the package's ``compiled/`` folder itself, when it is a writable directory (an editable or
   ``pip install``-ed package);
3. ``kernels-<digest>`` in the per-user cache (``store/user_cache.py``: ``$XDG_CACHE_HOME``,
   default ``~/.cache``, ``/rocketlake``), else the same
   under the temporary directory (an executor's home may not be writable).

A folder other than the package's own is first filled with a copy of the package's (read from
the zip when the package is one), once. ``<digest>`` names the kernels' sources, so caches of
two versions never mix. An entry is found when the sources of all kernel modules (not their paths or
times: the index is stamped with ``<digest>``, for a kernel inlines helpers of other modules),
the Python and numba versions and the CPU (name and features, numba's ``magic_tuple``) are the
ones it was compiled with; otherwise the kernel is compiled and the entry saved beside the
shipped ones.
"""
from __future__ import annotations

import hashlib
import os
import tempfile
import warnings
import zipfile
from functools import cache
from pathlib import Path, PurePosixPath
from types import FunctionType
from typing import Any

from numba.core.caching import CompileResultCacheImpl, FunctionCache, _CacheLocator
from numba.core.runtime import rtsys

from rocketlake.store.user_cache import user_cache_dir

#: the kernels' package folder (inside a zip when the package is imported from one)
PACKAGE = Path(__file__).parent
#: the cache folder the package ships
SHIPPED = PACKAGE / "compiled"


def _zip_split(path: Path) -> tuple[Path, str] | None:
    """(the zip file, the member path) of ``path`` inside a zip (a wheel, an egg, a .zip), else None."""
    for parent in path.parents:
        if parent.is_file():
            return parent, PurePosixPath(*path.relative_to(parent).parts).as_posix()
    return None


def _read(path: Path) -> bytes:
    """The bytes of a file of the package, also when the package is a zip."""
    inside = _zip_split(path) if not path.is_file() else None
    if inside is None:
        return path.read_bytes()
    with zipfile.ZipFile(inside[0]) as z:
        return z.read(inside[1])


@cache
def source_digest() -> str:
    """A hash of every kernel module's source: stamps every cache entry, and names a cache
    folder outside the package."""
    h = hashlib.sha256()
    for name in sorted(p.name for p in PACKAGE.glob("*.py")) or _zip_names():
        h.update(name.encode() + b"\0" + _read(PACKAGE / name))
    return h.hexdigest()[:16]


def _zip_names() -> list[str]:
    """The kernel module file names when the package is a zip."""
    inside = _zip_split(PACKAGE / "__init__.py")
    if inside is None:
        return []
    prefix = inside[1].rpartition("/")[0] + "/"
    with zipfile.ZipFile(inside[0]) as z:
        return sorted(n[len(prefix):] for n in z.namelist()
                      if n.startswith(prefix) and n.endswith(".py") and "/" not in n[len(prefix):])


def _writable(folder: Path) -> bool:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=folder).close()
    except OSError:
        return False
    return True


def _shipped_files() -> dict[str, bytes]:
    """Name -> bytes of every cache file the package ships (a folder, or members of its zip)."""
    if SHIPPED.is_dir():
        return {f.name: f.read_bytes() for f in SHIPPED.iterdir() if f.suffix in (".nbi", ".nbc")}
    inside = _zip_split(SHIPPED)
    if inside is None:
        return {}
    with zipfile.ZipFile(inside[0]) as z:
        return {n.rpartition("/")[2]: z.read(n) for n in z.namelist()
                if n.startswith(inside[1] + "/") and n.endswith((".nbi", ".nbc"))}


def _seed(folder: Path) -> None:
    """Copy the shipped cache files ``folder`` lacks into it, once (a marker file says it was
    done); each file appears whole (written aside, then renamed), as other processes may be
    reading the folder."""
    mark = folder / ".seeded"
    if folder == SHIPPED or mark.exists():
        return
    for name, data in _shipped_files().items():
        if not (folder / name).exists():
            tmp = folder / f"{name}.tmp{os.getpid()}"
            try:
                tmp.write_bytes(data)
                tmp.replace(folder / name)
            except OSError:
                tmp.unlink(missing_ok=True)  # a full disk: no part of a file left behind
                raise
    mark.touch()


@cache
def cache_folder() -> Path | None:
    """The folder this process reads and writes compiled kernels in (rules in the module doc);
    None when no folder is writable (then every process compiles what it calls)."""
    digest = f"kernels-{source_digest()}"
    candidates = []
    if os.environ.get("NUMBA_CACHE_DIR"):
        candidates.append(Path(os.environ["NUMBA_CACHE_DIR"]) / f"rocketlake-{digest}")
    else:
        candidates.append(SHIPPED)
        candidates += [user_cache_dir() / digest,
                       Path(tempfile.gettempdir()) / f"rocketlake-{os.getuid()}" / digest]
    for folder in candidates:
        if (folder != SHIPPED or PACKAGE.is_dir()) and _writable(folder):
            try:
                _seed(folder)
            except OSError:
                pass  # a partial copy only costs compiling what is missing
            return folder
    return None


class _Locator(_CacheLocator):
    """numba's cache locator for a kernel: :func:`cache_folder`, stamped with
    :func:`source_digest`. Not the kernel's own module alone (numba's stamp): a kernel holds the
    machine code of the helpers it calls from the other kernel modules, so an entry compiled
    before one of them changed must not load."""

    def __init__(self, py_func: FunctionType, py_file: str) -> None:
        self._lineno = py_func.__code__.co_firstlineno
        self._stamp = source_digest().encode()
        self._folder = cache_folder()

    def ensure_cache_path(self) -> None:
        pass  # made by cache_folder

    def get_cache_path(self) -> str:
        return str(self._folder)

    def get_source_stamp(self) -> bytes:
        return self._stamp

    def get_disambiguator(self) -> str:
        return str(self._lineno)

    @classmethod
    def from_function(cls, py_func: FunctionType, py_file: str) -> _Locator | None:
        return cls(py_func, py_file) if cache_folder() is not None else None


class _Impl(CompileResultCacheImpl):
    _locator_classes = [_Locator]


class KernelCache(FunctionCache):
    """A kernel's numba cache in :func:`cache_folder`."""

    _impl_class = _Impl

    def signatures(self, codegen: Any) -> list[Any]:
        """The signatures this kernel has machine code for in the cache, for this CPU and these
        sources, whose data file is there (``load_overload`` finds each)."""
        files: Any = self._cache_file
        return [key[0] for key, name in files._load_index().items()
                if self._index_key(key[0], codegen) == key  # type: ignore[no-untyped-call]
                and os.path.isfile(files._data_path(name))]

    def load_overload(self, sig: Any, target_context: Any) -> Any:
        """numba's ``load_overload`` without its ``target_context.refresh()``: a kernel loaded
        from the cache is machine code that needs numba's runtime (NRT, initialised here), not
        the typing and lowering registries that refresh imports and installs (about 0.1 s of a
        process's first kernel). A kernel compiled after all (a cache miss) refreshes the
        contexts itself (numba's ``CompilerBase``)."""
        rtsys.initialize(target_context)
        with self._guard_against_spurious_io_errors():
            return self._load_overload(sig, target_context)  # type: ignore[no-untyped-call]

    def save_overload(self, sig: Any, data: Any) -> None:
        """numba's ``save_overload``, except that a cache write that fails (a full disk, a
        folder gone or made read-only) is a warning, not the caller's error: the kernel just
        compiled runs all the same, and a later process compiles it again. numba writes each
        file aside and renames it, so a failed write leaves no part of one."""
        try:
            super().save_overload(sig, data)  # type: ignore[no-untyped-call]
        except OSError as e:
            warnings.warn(f"{self._cache_path}: a compiled kernel was not saved ({e}); the next "
                          f"process compiles it again", RuntimeWarning, stacklevel=2)


def cacheable() -> bool:
    """Whether compiled kernels are kept on disk in this process."""
    return cache_folder() is not None


__all__ = ["KernelCache", "SHIPPED", "cache_folder", "cacheable", "source_digest"]
