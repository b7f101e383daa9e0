"""Request batching: the texts of concurrent requests are encoded together, in one ``encode`` call, by one thread;
each request gets exactly its own rows back. The same joins concurrent searches (items: queries and their
settings; rows: their hits)."""
from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)


class _Job:
    """One request's texts, and where its rows (or its error) are left for it."""

    def __init__(self, texts: list[Any]) -> None:
        self.texts = texts
        self.done = threading.Event()
        self.vectors: Any = None  # its rows of the batch's answer (an array's rows, a list's items)
        self.error: BaseException | None = None


class BatcherClosed(RuntimeError):
    """The batcher was closed before (or while) the job ran."""


class MicroBatcher:
    """Joins the jobs that arrive within ``wait_s`` of a batch's first (up to ``max_batch`` texts; a larger job is
    a batch of its own) and encodes them with one ``encode(texts)`` call on its own thread."""

    def __init__(self, encode: Callable[[list[Any]], Any], max_batch: int, wait_s: float) -> None:
        self._encode, self.max_batch, self.wait_s = encode, max_batch, wait_s
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._carried: _Job | None = None  # a job that did not fit the last batch: it starts the next
        self._closed = False
        self.batches = 0  # encode calls so far (for tests and the benchmark: requests joined per call)
        self._thread = threading.Thread(target=self._run, name="swembed-serve-batcher", daemon=True)
        self._thread.start()

    def encode(self, texts: list[Any]) -> Any:
        """The rows of ``texts``, encoded in a batch with whatever other requests arrive meanwhile (one row an
        item, in order: ``encode(items)[i]`` is item i's)."""
        if self._closed:
            raise BatcherClosed("the server is shutting down")
        job = _Job(texts)
        self._jobs.put(job)
        job.done.wait()
        if job.error is not None:
            raise job.error
        return job.vectors

    def close(self, timeout_s: float = 10.0) -> None:
        """Encode the jobs already queued, then stop the thread (waiting ``timeout_s`` at most)."""
        self._closed = True
        self._jobs.put(None)
        self._thread.join(timeout_s)
        while True:  # a job queued behind the sentinel (submitted as the batcher closed) is answered, not left
            try:
                job = self._jobs.get_nowait()
            except queue.Empty:
                return
            if job is not None:
                job.error = BatcherClosed("the server is shutting down")
                job.done.set()

    def _run(self) -> None:
        while True:
            batch = self._next_batch()
            if not batch:
                return
            self._encode_batch(batch)

    def _next_batch(self) -> list[_Job]:
        """The next batch: the first job waiting (blocking for one), then those arriving within ``wait_s``, while
        they fit ``max_batch``; [] once closed and drained."""
        first, self._carried = self._carried or self._jobs.get(), None
        if first is None:
            return []
        batch, size = [first], len(first.texts)
        deadline = time.monotonic() + self.wait_s
        while size < self.max_batch:
            try:
                job = self._jobs.get(timeout=max(deadline - time.monotonic(), 0)) if self.wait_s else \
                    self._jobs.get_nowait()
            except queue.Empty:
                break
            if job is None:  # closing: finish this batch, then stop at the sentinel
                self._jobs.put(None)
                break
            if size + len(job.texts) > self.max_batch:
                self._carried = job
                break
            batch.append(job)
            size += len(job.texts)
        return batch

    def _encode_batch(self, batch: list[_Job]) -> None:
        """One encode call for the batch, its rows handed out in order; if it fails, each job alone (so one bad
        request cannot fail the others)."""
        self.batches += 1
        try:
            vectors = self._encode([text for job in batch for text in job.texts])
        except Exception:  # noqa: BLE001 - retried job by job below, where each job gets its own error
            vectors = None
        start = 0
        for job in batch:
            if vectors is not None:
                job.vectors = vectors[start : start + len(job.texts)]
                start += len(job.texts)
            else:
                self._encode_alone(job)
            job.done.set()

    def _encode_alone(self, job: _Job) -> None:
        try:
            job.vectors = self._encode(job.texts)
        except Exception as exc:  # noqa: BLE001 - handed to the request's thread, which answers it
            job.error = exc
