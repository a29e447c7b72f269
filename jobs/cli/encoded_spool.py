"""Encoded message tables kept on disk between `rocketlake ingest`'s check and its write: the
input is parsed and validated once, and memory holds one table at a time."""
from __future__ import annotations

import pickle
import tempfile
from collections.abc import Iterator
from types import TracebackType

from rocketlake.store.table_encoder import EncodedTable


class EncodedSpool:
    """``EncodedTable``s appended to an anonymous temporary file (gone when closed), read back
    in order, each array as it was written (its dtype, shape and writeable flag)."""

    def __init__(self) -> None:
        self._file = tempfile.TemporaryFile()
        self.tables = 0

    def add(self, table: EncodedTable) -> None:
        pickle.dump(table, self._file, protocol=5)
        self.tables += 1

    def clear(self) -> None:
        """Forget every table added."""
        self._file.seek(0)
        self._file.truncate()
        self.tables = 0

    def __iter__(self) -> Iterator[EncodedTable]:
        self._file.flush()
        self._file.seek(0)
        for _ in range(self.tables):
            table: EncodedTable = pickle.load(self._file)
            yield table

    def __enter__(self) -> EncodedSpool:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._file.close()
