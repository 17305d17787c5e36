"""Log records written by a thread of their own while a real-time loop runs.

    with queued_logging():
        while running:
            tick()          # a warning here costs a list append, not a write to the terminal
            log_later(logger, logging.WARNING, "t=%.4f %s", t, kind)   # nor a record made

A handler that writes to a terminal or a pipe does so in the thread that logs: a write and a
flush, tens of microseconds, and as long as the reader takes when its pipe is full. A 500 Hz
loop that records a safety intervention would wait for it. Inside the block the root logger
hands each record to a `deque` (`logging.handlers.QueueHandler`: the message is formatted, then
appended; no thread is woken, so none competes with the loop for the interpreter's lock
then). A writer thread wakes every `interval` seconds and hands what it finds to the handlers
the root had before (Python's last-resort handler, warnings and worse to stderr, where it had
none), each at its own level. What is left is written before the block ends.

Making a record costs microseconds too (the caller's frame looked up, the message formatted).
`log_later(logger, level, msg, *args)` inside a block only appends the call; the writer thread
makes it, in order, at its next pass. Outside a block it logs at once.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import logging.handlers
import threading
from collections.abc import Iterator

INTERVAL = 0.05  # [s] between the writer thread's passes
_CALLS: list = [None]  # the active block's deque of `log_later` calls, None outside one


class _Records(collections.deque):
    """A deque with the `put_nowait` a `QueueHandler` calls (appending is thread-safe)."""

    def put_nowait(self, record) -> None:
        self.append(record)


def log_later(logger: logging.Logger, level: int, msg: str, *args) -> None:
    """`logger.log(level, msg, *args)`, made and written by the writer thread of the active
    `queued_logging` block (module docstring), or at once outside one."""
    calls = _CALLS[0]
    if calls is None:
        logger.log(level, msg, *args)
    elif logger.isEnabledFor(level):
        calls.append((logger, level, msg, args))


def _write(records: _Records, handlers: list, calls: collections.deque) -> None:
    """Make the records of the queued `log_later` calls, then hand every queued record to
    each handler at or below the record's level."""
    while calls:
        logger, level, msg, args = calls.popleft()
        logger.log(level, msg, *args)  # a record in `records`, through the root's queue
    while records:
        record = records.popleft()
        for handler in handlers:
            if record.levelno >= handler.level:
                handler.handle(record)


@contextlib.contextmanager
def queued_logging(interval: float = INTERVAL) -> Iterator[None]:
    """The root logger's records written by a thread every `interval` [s] for the block
    (module docstring); nested blocks keep the outer one's queue."""
    root = logging.getLogger()
    before = list(root.handlers)
    if any(isinstance(h, logging.handlers.QueueHandler) for h in before):
        yield  # already queued by an outer block
        return
    records, calls = _Records(), collections.deque()
    targets = [h for h in before or [logging.lastResort] if h is not None]
    done = threading.Event()

    def writer() -> None:
        while not done.wait(interval):
            _write(records, targets, calls)

    thread = threading.Thread(target=writer, name="queued-logging", daemon=True)
    root.handlers = [logging.handlers.QueueHandler(records)]
    _CALLS[0] = calls
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
        _write(records, targets, calls)  # what came after the thread's last pass
        _CALLS[0] = None
        root.handlers = before
