"""CommitLog flushing: group commit for SYNC_FLUSH, a periodic background flusher for ASYNC_FLUSH."""
from __future__ import annotations

import threading
import time
from typing import Callable

from store.mapped_file import PAGE_SIZE


class FlushService:
    """Makes CommitLog bytes durable and calls back with what each flush covered.

    ``flush_commitlog()`` msyncs every byte written so far and returns the new durable offset.
    SYNC_FLUSH producers call ``wait_durable(offset)``: one flush serves every producer whose
    write it covers, so concurrent producers share fsyncs (group commit).
    """

    def __init__(self, flush_commitlog: Callable[[], int], written: Callable[[], int],
                 flush_logics: Callable[[], None], *, sync: bool, interval_ms: int,
                 least_pages: int, thorough_ms: int, logics_interval_ms: int) -> None:
        self._flush_commitlog, self._written, self._flush_logics = flush_commitlog, written, flush_logics
        self.sync = sync
        self.interval = interval_ms / 1000
        self.least_bytes = least_pages * PAGE_SIZE
        self.thorough = thorough_ms / 1000
        self.logics_interval = logics_interval_ms / 1000
        self.durable = 0
        self.flushes = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rocketlake-flush", daemon=True)

    def start(self, durable: int) -> None:
        self.durable = durable
        self._thread.start()

    def flush(self) -> int:
        """Flush now; returns the durable offset."""
        with self._lock:
            self.durable = self._flush_commitlog()
            self.flushes += 1
            return self.durable

    def wait_durable(self, offset: int) -> None:
        """Return once bytes below ``offset`` are durable (group commit)."""
        if self.durable >= offset:
            return
        with self._lock:  # producers queue here while one flush runs for all of them
            if self.durable < offset:
                self.durable = self._flush_commitlog()
                self.flushes += 1

    def _run(self) -> None:
        last_thorough = last_logics = time.monotonic()
        while not self._stop.wait(self.interval):
            now = time.monotonic()
            pending = self._written() - self.durable
            thorough = now - last_thorough >= self.thorough
            if not self.sync and pending > 0 and (pending >= self.least_bytes or thorough):
                self.flush()
                last_thorough = now if thorough else last_thorough
            if now - last_logics >= self.logics_interval:
                self._flush_logics()
                last_logics = now

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
