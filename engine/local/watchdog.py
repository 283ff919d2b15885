"""Stop Python code that runs too long on the engine thread: a chat template is a stranger's program.

Why: a model's chat template is Jinja code shipped with the model, run on the engine thread at
every turn. One with two nested ``range(100000)`` loops renders for hours, and a thread cannot be
killed from outside, so the turn, the app's "generating..." and quitting all waited on it. Jinja
templates run as Python bytecode, so the interpreter can raise an exception inside that thread
(``PyThreadState_SetAsyncExc``) at its next instruction: `Watchdog.limit` arms a deadline, one
watcher thread fires `Overran` into the running code when it passes, and disarming clears one
that fired but was not delivered yet, so it can never land outside the block.

`Overran` is a BaseException, so the libraries' own ``except Exception`` (a template's error
handling) do not swallow it; `bounded` turns it into one EngineError at the call it bounded.
Arming costs a lock and an attribute (no thread per call: a timer thread cost ~0.5 ms a render).
"""

from __future__ import annotations

import ctypes
import threading
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator, TypeVar

from engine.core.api import EngineError

T = TypeVar("T")
POLL_S = 0.1  # how often the watcher looks at an armed deadline (a limit overruns by at most this)
TEMPLATE_LIMIT_S = 5.0  # the longest one rendering of a model's chat template may run


class Overran(BaseException):
    """Raised inside code that ran past its `Watchdog.limit`."""


class Watchdog:
    """One watcher thread that stops code overrunning a `limit` on whichever thread armed it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._deadline: float | None = None
        self._target = 0  # the thread that armed the current deadline
        self._fired = False
        self._wake = threading.Event()  # set when armed; the watcher sleeps while nothing is armed
        threading.Thread(target=self._watch, name="logitscope-watchdog", daemon=True).start()

    @contextmanager
    def limit(self, seconds: float) -> Iterator[None]:
        """Raise `Overran` inside the block once it has run `seconds` (not nestable)."""
        with self._lock:
            self._deadline, self._target, self._fired = time.monotonic() + seconds, threading.get_ident(), False
        self._wake.set()
        try:
            yield
        finally:
            with self._lock:
                self._deadline = None
                if self._fired:  # fired: either delivered (propagating now) or pending: clear it
                    _raise_in(self._target, None)

    def _watch(self) -> None:
        """Sleep until armed, then poll the deadline; fire once it has passed."""
        while True:
            self._wake.wait()
            time.sleep(POLL_S)
            with self._lock:
                if self._deadline is None:
                    self._wake.clear()
                elif time.monotonic() >= self._deadline:
                    _raise_in(self._target, Overran)
                    self._fired, self._deadline = True, None
                    self._wake.clear()


def _raise_in(thread_id: int, exception: type[BaseException] | None) -> None:
    """Make `thread_id` raise `exception` at its next Python instruction (None: clear a pending one)."""
    set_async_exc = ctypes.pythonapi.PyThreadState_SetAsyncExc
    set_async_exc(ctypes.c_ulong(thread_id), ctypes.py_object(exception) if exception else ctypes.py_object())


def bounded(watchdog: Watchdog, seconds: float, what: str, call: Callable[[], T]) -> T:
    """`call()`, stopped with one EngineError naming `what` if it runs over `seconds`."""
    try:
        with watchdog.limit(seconds):
            return call()
    except Overran:
        raise EngineError(f"{what} ran for over {seconds:g} s and was stopped.") from None


def bound_template(tokenizer: Any, watchdog: Watchdog, name: str) -> None:
    """Bound every rendering of this tokenizer's chat template to `TEMPLATE_LIMIT_S`.

    The template is a stranger's program, run at every turn, warm-up and count: one that loops
    for minutes is stopped with one EngineError naming the model instead of hanging the engine.
    After one overrun it is not run again (each warm-up would otherwise spend the limit twice
    before the user's turn could start); loading the model again gives it another try.
    """
    render = tokenizer.apply_chat_template
    what = f"The chat template of {name[:80]}"
    stopped: list[EngineError] = []  # the first overrun, once there was one

    def apply_chat_template(*args: Any, **kwargs: Any) -> Any:
        if stopped:
            raise EngineError(f"{stopped[0]} It is not run again: load the model again to retry.")
        try:
            return bounded(watchdog, TEMPLATE_LIMIT_S, what, lambda: render(*args, **kwargs))
        except EngineError as error:
            stopped.append(error)
            raise

    tokenizer.apply_chat_template = apply_chat_template
