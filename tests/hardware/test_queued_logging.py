"""`hardware.queued_logging`: records written by the writer thread, none lost, handlers
restored; `log_later` records made off the caller's thread."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from hardware.queued_logging import log_later, queued_logging


class BlockingHandler(logging.Handler):
    """Holds every record until `gate` is set; remembers the thread that wrote each and the
    thread that made it."""

    def __init__(self):
        super().__init__(level=logging.WARNING)
        self.gate = threading.Event()
        self.written: list = []  # (message, writing thread, making thread)

    def emit(self, record):
        self.gate.wait(10.0)
        self.written.append((record.getMessage(), threading.get_ident(), record.thread))

    def messages(self) -> list:
        return [m for m, _, _ in self.written]

    def wait_for(self, count: int, seconds: float = 5.0) -> None:
        """Until `count` records are written (the writer thread's next passes) or `seconds`."""
        deadline = time.monotonic() + seconds
        while len(self.written) < count and time.monotonic() < deadline:
            time.sleep(0.01)


@pytest.fixture
def handler():
    """A `BlockingHandler` on the root logger for the test (its gate closed)."""
    handler = BlockingHandler()
    logging.getLogger().addHandler(handler)
    yield handler
    logging.getLogger().removeHandler(handler)


def test_a_warning_does_not_wait_for_its_handler_and_is_written_by_the_block_end(handler):
    before = list(logging.getLogger().handlers)
    with queued_logging():
        logging.getLogger("hardware.safety").warning("t=%.1f rate_limited", 1.5)
        logging.getLogger("hardware.safety").info("below the handler's level")
        assert handler.written == []  # the call returned although the handler is blocked
        handler.gate.set()
        handler.wait_for(1)
    assert logging.getLogger().handlers == before
    assert handler.messages() == ["t=1.5 rate_limited"]
    assert handler.written[0][1] != threading.get_ident()  # written by the writer thread


def test_nested_blocks_share_the_outer_queue(handler):
    handler.gate.set()
    with queued_logging():
        outer = list(logging.getLogger().handlers)
        with queued_logging():
            assert logging.getLogger().handlers == outer
            logging.getLogger("x").warning("inner")
    assert handler.messages() == ["inner"]


def test_what_the_writer_thread_has_not_reached_is_written_when_the_block_ends(handler):
    handler.gate.set()
    with queued_logging(interval=60.0):  # the writer thread makes no pass in the block
        for k in range(3):
            logging.getLogger("x").error("record %d", k)
    assert handler.messages() == ["record 0", "record 1", "record 2"]


def test_log_later_makes_the_record_in_the_writer_thread_in_order(handler):
    handler.gate.set()
    safety = logging.getLogger("hardware.safety")
    with queued_logging(interval=0.01):
        for k in range(3):
            log_later(safety, logging.WARNING, "event %d", k)
        log_later(safety, logging.DEBUG, "below the level")
        handler.wait_for(3)
    assert handler.messages() == ["event 0", "event 1", "event 2"]
    assert threading.get_ident() not in [made for _, _, made in handler.written]
    log_later(safety, logging.WARNING, "outside")  # no block: made and written at once
    assert handler.written[-1] == ("outside", threading.get_ident(), threading.get_ident())
