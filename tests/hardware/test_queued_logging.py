"""`hardware.queued_logging`: records written by a listener thread, none lost, handlers restored."""

from __future__ import annotations

import logging
import threading
import time

from hardware.queued_logging import log_later, queued_logging


class BlockingHandler(logging.Handler):
    """Holds every record until `gate` is set; remembers the thread that wrote each."""

    def __init__(self):
        super().__init__(level=logging.WARNING)
        self.gate = threading.Event()
        self.written: list = []

    def emit(self, record):
        self.gate.wait(10.0)
        self.written.append((record.getMessage(), threading.get_ident()))


def test_a_warning_does_not_wait_for_its_handler_and_is_written_by_the_block_end():
    root = logging.getLogger()
    handler = BlockingHandler()
    root.addHandler(handler)
    before = list(root.handlers)
    try:
        with queued_logging():
            logging.getLogger("hardware.safety").warning("t=%.1f rate_limited", 1.5)
            logging.getLogger("hardware.safety").info("below the handler's level")
            # the logging call returned although the handler is still blocked
            assert handler.written == []
            handler.gate.set()
            deadline = time.monotonic() + 5.0  # the writer thread's next pass writes it
            while not handler.written and time.monotonic() < deadline:
                time.sleep(0.01)
        assert root.handlers == before
        assert [m for m, _ in handler.written] == ["t=1.5 rate_limited"]
        assert handler.written[0][1] != threading.get_ident()  # the writer thread's
    finally:
        root.removeHandler(handler)


def test_nested_blocks_share_the_outer_queue():
    root = logging.getLogger()
    handler = BlockingHandler()
    handler.gate.set()
    root.addHandler(handler)
    try:
        with queued_logging():
            inner_before = list(root.handlers)
            with queued_logging():
                assert root.handlers == inner_before
                logging.getLogger("x").warning("inner")
        assert [m for m, _ in handler.written] == ["inner"]
    finally:
        root.removeHandler(handler)


def test_what_the_writer_thread_has_not_reached_is_written_when_the_block_ends():
    root = logging.getLogger()
    handler = BlockingHandler()
    handler.gate.set()
    root.addHandler(handler)
    try:
        with queued_logging(interval=60.0):  # the writer thread makes no pass in the block
            for k in range(3):
                logging.getLogger("x").error("record %d", k)
        assert [m for m, _ in handler.written] == ["record 0", "record 1", "record 2"]
    finally:
        root.removeHandler(handler)


def test_log_later_makes_the_record_in_the_writer_thread_in_order():
    root = logging.getLogger()
    handler = BlockingHandler()
    handler.gate.set()
    root.addHandler(handler)
    made_by: list = []
    capture = logging.Filter()
    capture.filter = lambda record: made_by.append(record.thread) or True
    handler.addFilter(capture)
    try:
        with queued_logging(interval=0.01):
            for k in range(3):
                log_later(logging.getLogger("hardware.safety"), logging.WARNING, "event %d", k)
            log_later(logging.getLogger("hardware.safety"), logging.DEBUG, "below the level")
            deadline = time.monotonic() + 5.0  # the writer thread's next passes make them
            while len(handler.written) < 3 and time.monotonic() < deadline:
                time.sleep(0.01)
        assert [m for m, _ in handler.written] == ["event 0", "event 1", "event 2"]
        assert threading.get_ident() not in made_by  # the records were made off this thread
        log_later(logging.getLogger("hardware.safety"), logging.WARNING, "outside")
        assert handler.written[-1][0] == "outside" and made_by[-1] == threading.get_ident()
    finally:
        root.removeHandler(handler)
