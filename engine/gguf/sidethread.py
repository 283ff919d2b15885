"""One helper thread beside the engine thread, running small jobs first in, first out.

The GGUF engine gives it each token's statistics and the posting of each event to the caller,
so both happen while llama.cpp decodes the next token with the GIL released
(`engine.gguf.decoder`). Why not `concurrent.futures.ThreadPoolExecutor`: a job there costs
~20 us of Python on the submitting thread (a Future, a work item, a lock, a condition), twice
per token on the engine thread's critical path; a `queue.SimpleQueue` put is a C call of ~1 us.

It never calls llama.cpp or MLX (those stay on the engine thread). What fails in a job reaches
whoever waits for its result (`Result.get` raises it); a job nobody waits for that fails is
kept and raised by the next `drain`, so no error is lost.
"""

from __future__ import annotations

import queue
import threading
from typing import Any, Callable, Generic, TypeVar

T = TypeVar("T")
_STOP = object()


class Result(Generic[T]):
    """The outcome of one job, delivered once."""

    def __init__(self) -> None:
        self._box: queue.SimpleQueue[tuple[bool, Any]] = queue.SimpleQueue()

    def put(self, ok: bool, value: Any) -> None:
        self._box.put((ok, value))

    def get(self) -> T:
        """Wait for the job; its value, or its exception raised here."""
        ok, value = self._box.get()
        if not ok:
            raise value
        return value


class SideThread:
    """A daemon thread that runs submitted jobs in order (see the module docstring)."""

    def __init__(self, name: str) -> None:
        self._jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._failed: BaseException | None = None
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def submit(self, job: Callable[[Any], T], arg: Any) -> Result[T]:
        """Run ``job(arg)`` after every job submitted before; its result comes back through `get`."""
        result: Result[T] = Result()
        self.post(job, arg, result)
        return result

    def post(self, job: Callable[[Any], Any], arg: Any, result: Result[Any] | None = None) -> None:
        """Run ``job(arg)`` in order, nobody waiting: a failure is raised by the next `drain`.
        Raises RuntimeError once the thread is closed."""
        if self._closed:
            raise RuntimeError("the side thread is closed")
        self._jobs.put((job, arg, result))

    def drain(self) -> None:
        """Wait until every job submitted so far has run; raise the first unwaited failure."""
        self.submit(_nothing, None).get()
        failed, self._failed = self._failed, None
        if failed is not None:
            raise failed

    def close(self) -> None:
        """Stop after the jobs already submitted; does not wait (a stuck job never holds a quit)."""
        if not self._closed:
            self._closed = True
            self._jobs.put(_STOP)

    def _run(self) -> None:
        while (item := self._jobs.get()) is not _STOP:
            job, arg, result = item
            try:
                value = job(arg)
            except BaseException as exc:  # noqa: BLE001 - handed to whoever waits, never lost
                if result is None:
                    self._failed = self._failed or exc
                else:
                    result.put(False, exc)
            else:
                if result is not None:
                    result.put(True, value)


def _nothing(_: object) -> None:
    return None
