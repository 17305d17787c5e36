"""The motion-switcher client: releases the sport mode before low-level control.

On the robot, Unitree's sport service drives the motors too until it is released:
`release_sport_mode(participant)` (or `Go2Robot(..., release_sport_mode=True)`) asks the
motion-switcher service (`rt/api/motion_switcher/request`, JSON over `unitree_api` Request_ /
Response_: CheckMode 1001, ReleaseMode 1003) until no mode is active. If nothing answers
(firmware without the service), stop the sport service by hand before arming: lay the robot
down, and in Unitree's app turn the sport-mode service off (or run Unitree SDK 2's
motion-switcher example, which calls ReleaseMode). unitree_mujoco has no sport service; our
simulated Go2 models one with `--sport-mode`.
"""

from __future__ import annotations

import itertools
import json
import time

from . import messages as msgs
from .dds import MOTION_SWITCHER, make_reader, make_writer, take

API_CHECK_MODE, API_RELEASE_MODE = 1001, 1003


# --------------------------------------------------------------------------- motion switcher
class MotionSwitcher:
    """Client of the robot's motion-switcher service (JSON over `unitree_api` Request_/Response_):
    `check_mode()` -> the active mode's name ("" when none), `release_mode()`."""

    _ids = itertools.count(int(time.time() * 1e3))

    def __init__(self, participant, timeout: float = 1.0):
        self.timeout = timeout
        self._writer = make_writer(participant, f"{MOTION_SWITCHER}/request", msgs.Request_)
        self._reader = make_reader(participant, f"{MOTION_SWITCHER}/response", msgs.Response_, 8)

    def call(self, api_id: int, parameter: dict | None = None) -> tuple[int, dict | None]:
        """`(status code, decoded data)`; raises TimeoutError without an answer."""
        rid = next(self._ids)
        header = msgs.RequestHeader_(
            msgs.RequestIdentity_(rid, api_id), msgs.RequestLease_(0), msgs.RequestPolicy_(0, False)
        )
        self._writer.write(msgs.Request_(header, json.dumps(parameter or {}), []))
        deadline = time.perf_counter() + self.timeout
        while time.perf_counter() < deadline:
            for response in take(self._reader, msgs.Response_):
                if int(response.header.identity.id) == rid:
                    data = json.loads(response.data) if response.data else None
                    return int(response.header.status.code), data
            time.sleep(0.005)
        raise TimeoutError(f"no motion-switcher answer to API {api_id}")

    def check_mode(self) -> str:
        code, data = self.call(API_CHECK_MODE)
        if code != 0:
            raise RuntimeError(f"motion switcher CheckMode failed with code {code}")
        return (data or {}).get("name", "")

    def release_mode(self) -> int:
        return self.call(API_RELEASE_MODE)[0]


def release_sport_mode(participant, timeout: float = 10.0, poll: float = 0.5) -> str:
    """Release whatever mode the motion switcher runs (sport mode) until none is active; returns
    the mode that was released ("" if none was). Raises TimeoutError when the service does not
    answer or the mode stays active (see the module docstring for the manual way)."""
    switcher = MotionSwitcher(participant)
    deadline = time.perf_counter() + timeout
    released = ""
    while True:
        try:
            mode = switcher.check_mode()
        except TimeoutError:
            if time.perf_counter() > deadline:
                raise TimeoutError(
                    "the motion-switcher service did not answer: release sport mode by hand "
                    "(see hardware.go2.motion_switcher) before arming"
                ) from None
            continue
        if not mode:
            return released
        released = released or mode
        if time.perf_counter() > deadline:
            raise TimeoutError(f"sport mode {mode!r} is still active after {timeout} s")
        switcher.release_mode()
        time.sleep(poll)


def release_sport_mode_or_none(participant, release: bool) -> str | None:
    """`release_sport_mode(participant)` if asked (the released mode's name), else None."""
    return release_sport_mode(participant) if release else None
