"""Log records written by a thread of their own while a real-time loop runs.

    with queued_logging():
        while running:
            tick()          # a warning here costs a queue put, not a write to the terminal

A handler that writes to a terminal or a pipe does so in the thread that logs: a write and a
flush, tens of microseconds, and as long as the reader takes when its pipe is full. A 500 Hz
loop that records a safety intervention would wait for it. Inside the block the root logger
hands each record to a queue (`logging.handlers.QueueHandler`: the message is formatted, then
put); a listener thread hands it to the handlers the root had before (Python's last-resort
handler, warnings and worse to stderr, where it had none), each at its own level. The queue is
emptied before the block ends, so everything logged in it is written by then.
"""

from __future__ import annotations

import contextlib
import logging
import logging.handlers
import queue
from collections.abc import Iterator


@contextlib.contextmanager
def queued_logging() -> Iterator[None]:
    """The root logger's records written by a listener thread for the block (module
    docstring); nested blocks keep the outer one's queue."""
    root = logging.getLogger()
    before = list(root.handlers)
    if any(isinstance(h, logging.handlers.QueueHandler) for h in before):
        yield  # already queued by an outer block
        return
    records: queue.SimpleQueue = queue.SimpleQueue()
    targets = before or [logging.lastResort]
    listener = logging.handlers.QueueListener(
        records, *(h for h in targets if h is not None), respect_handler_level=True
    )
    root.handlers = [logging.handlers.QueueHandler(records)]
    listener.start()
    try:
        yield
    finally:
        root.handlers = before
        listener.stop()  # writes what is queued, then ends the thread
