"""CommitLog flushing: group commit for SYNC_FLUSH, a periodic background flusher for ASYNC_FLUSH."""
from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rocketlake.store.mapped_file import PAGE_SIZE


class FlushService:
    """Makes CommitLog bytes durable and calls back with what each flush covered.

    ``flush_commitlog()`` syncs every byte written so far and returns the offset it covered.
    SYNC_FLUSH producers call ``wait_durable(offset)``. Group commit is leader/follower: the
    first producer that finds no flush running leads one; producers arriving while it runs append
    their records and wait, and the next leader's flush covers all of them at once. The sync
    releases the GIL, so producers keep appending while it runs. A producer waits at most
    ``sync_timeout_ms`` for another's flush (RocketMQ's syncFlushTimeout).

    The background thread flushes the CommitLog every ``interval_ms`` once ``least_pages`` pages
    are pending (ASYNC_FLUSH; every pending byte once ``thorough_ms`` has passed; SYNC_FLUSH:
    whatever producers that timed out left). Every ``logics_interval_ms``, in both modes, it
    calls ``flush_logics()`` (ConsumeQueues, index, checkpoint) once ``logics_pending()`` bytes
    reach ``logics_least_pages`` pages, or ``logics_thorough_ms`` has passed since the last
    thorough one (RocketMQ's FlushConsumeQueueService.doFlush).

    ``clock`` (seconds, monotonic) decides every deadline and interval rule: each background
    round is one ``tick()``, and a producer stops waiting once ``clock()`` has reached its
    deadline (read whenever it wakes: a flush ended, or the time the clock gave it passed), so a
    test can substitute a clock it advances.
    """

    def __init__(self, flush_commitlog: Callable[[], int], written: Callable[[], int],
                 flush_logics: Callable[[], None], logics_pending: Callable[[], int], *,
                 sync: bool, interval_ms: int, least_pages: int, thorough_ms: int,
                 logics_interval_ms: int, logics_least_pages: int, logics_thorough_ms: int,
                 sync_timeout_ms: int, clock: Callable[[], float] = time.monotonic) -> None:
        self._flush_commitlog, self._written, self._flush_logics = flush_commitlog, written, flush_logics
        self._logics_pending = logics_pending
        self._clock = clock
        self.sync = sync
        self.sync_timeout = sync_timeout_ms / 1000
        self.interval = interval_ms / 1000
        self.least_bytes = least_pages * PAGE_SIZE
        self.thorough = thorough_ms / 1000
        self.logics_interval = logics_interval_ms / 1000
        self.logics_least_bytes = logics_least_pages * PAGE_SIZE
        self.logics_thorough = logics_thorough_ms / 1000
        self.durable = 0
        #: number of CommitLog syncs done (group commit shares one among many producers)
        self.flushes = 0
        #: the last exception the background thread met (it keeps running)
        self.last_error: BaseException | None = None
        self._cond = threading.Condition()
        self._flushing = False
        self._last_thorough = self._last_logics = self._last_logics_thorough = clock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rocketlake-flush", daemon=True)

    def start(self, durable: int) -> None:
        """Start the background thread; ``durable`` is the offset already on disk."""
        self.durable = durable
        self._thread.start()

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        """Hold off every flush (waiting for a running one) while the block runs."""
        with self._cond:
            while self._flushing:
                self._cond.wait()
            self._flushing = True
        try:
            yield
        finally:
            with self._cond:
                self._flushing = False
                self._cond.notify_all()

    def _lead(self) -> None:
        """Run one flush; the caller holds ``_cond`` and saw no flush running."""
        self._flushing = True
        self._cond.release()
        try:
            end = self._flush_commitlog()
        finally:
            self._cond.acquire()
            self._flushing = False
            self._cond.notify_all()
        self.durable = max(self.durable, end)
        self.flushes += 1

    def flush(self) -> int:
        """Flush everything written so far; returns the durable offset."""
        with self._cond:
            while self._flushing:
                self._cond.wait()
            self._lead()
            return self.durable

    def wait_durable(self, offset: int) -> bool:
        """Whether every byte below ``offset`` became durable (group commit) within
        ``sync_timeout_ms``: False when the flushes running meanwhile (or an ``exclusive()``
        block) took longer (RocketMQ's GroupCommitRequest.waitForFlush). A flush this call
        leads always completes; the bytes are still written when it returns False."""
        if self.durable >= offset:
            return True
        deadline = self._clock() + self.sync_timeout
        with self._cond:
            while self.durable < offset:
                if not self._flushing:
                    self._lead()
                elif not self._wait_until(deadline):
                    return self.durable >= offset
            return True

    def _wait_until(self, deadline: float) -> bool:
        """Wait (holding ``_cond``) for the running flush to end; False once the clock reached
        ``deadline``."""
        remaining = deadline - self._clock()
        if remaining <= 0:
            return False
        self._cond.wait(remaining)
        return self._clock() < deadline

    def tick(self) -> None:
        """One round of the background thread at ``clock()``: flush what the rules above call
        due. The thread runs one every ``interval_ms``; an error stays in ``last_error``."""
        try:
            now = self._clock()
            pending = self._written() - self.durable
            if self.sync:
                if pending > 0:  # left by producers that gave up waiting (FLUSH_DISK_TIMEOUT)
                    self.flush()
            else:
                thorough = now - self._last_thorough >= self.thorough
                if pending > 0 and (pending >= self.least_bytes or thorough):
                    self.flush()
                if thorough:
                    self._last_thorough = now
            if now - self._last_logics >= self.logics_interval:
                thorough = now - self._last_logics_thorough >= self.logics_thorough
                if thorough or self._logics_pending() >= self.logics_least_bytes:
                    self._flush_logics()
                if thorough:
                    self._last_logics_thorough = now
                self._last_logics = now
        except Exception as e:  # keep flushing; the error stays visible on the service
            self.last_error = e

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.tick()

    def stop(self) -> None:
        """Stop the background thread (the owner does the final flush)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
