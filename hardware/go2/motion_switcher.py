"""The motion-switcher client, and the release of the sport mode before low-level control.

On the robot, Unitree's sport service drives the motors too until it is released:
`release_sport_mode(participant)` (or `Go2Robot(..., release_sport_mode=True)`) does what
Unitree's low-level examples do (unitree_sdk2 `go2_stand_example`, unitree_sdk2_python
`example/go2/low_level/go2_stand_example.py`):

    mode = CheckMode()                  # motion switcher, API 1001: the active mode's name
    while mode:                         # "" when none is active
        StandDown()                     # sport service, API 1005: lay the robot down
        ReleaseMode()                   # motion switcher, API 1003
        pause (1 s)
        mode = CheckMode()

(`release_sequence`, the same order over callables, is the logic without DDS.) The motion
switcher listens on `rt/api/motion_switcher/request`, the sport service on
`rt/api/sport/request` (`sport_client`; JSON over `unitree_api` Request_ / Response_). If the
motion switcher does not answer (firmware without the service), stop the sport service by hand
before arming: lay the robot down, and in Unitree's app turn the sport-mode service off (or run
Unitree SDK 2's motion-switcher example, which calls ReleaseMode). unitree_mujoco has no sport
service; our simulated Go2 models one with `--sport-mode`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from .dds import MOTION_SWITCHER
from .sport_client import ServiceClient, SportClient

API_CHECK_MODE, API_RELEASE_MODE = 1001, 1003
RELEASE_PAUSE = 1.0  # [s] between ReleaseMode and the next CheckMode (Unitree's examples)
logger = logging.getLogger(__name__)


# --------------------------------------------------------------------------- motion switcher
class MotionSwitcher(ServiceClient):
    """Client of the robot's motion-switcher service: `check_mode()` -> the active mode's name
    ("" when none), `release_mode()` -> status code."""

    def __init__(self, participant, timeout: float = 1.0):
        super().__init__(participant, MOTION_SWITCHER, timeout)

    def check_mode(self) -> str:
        code, data = self.call(API_CHECK_MODE)
        if code != 0:
            raise RuntimeError(f"motion switcher CheckMode failed with code {code}")
        return (data or {}).get("name", "")

    def release_mode(self) -> int:
        return self.call_code(API_RELEASE_MODE)


# --------------------------------------------------------------------------- the sequence
@dataclass
class SportModeRelease:
    """What `release_sequence` did.

    released: the mode that was active at first ("" if none was).
    stand_down_codes, release_codes: the status code of each StandDown / ReleaseMode call, in
        order (one of each per round; 3104: nothing answered)."""

    released: str = ""
    stand_down_codes: list = field(default_factory=list)
    release_codes: list = field(default_factory=list)


def release_sequence(
    check_mode: Callable[[], str],
    stand_down: Callable[[], int],
    release_mode: Callable[[], int],
    *,
    timeout: float = 15.0,
    pause: float = RELEASE_PAUSE,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.perf_counter,
) -> SportModeRelease:
    """Unitree's release order (module docstring) over callables: `check_mode() -> name`
    (raising TimeoutError when unanswered: retried), `stand_down() -> code`,
    `release_mode() -> code`, with `pause` [s] after each ReleaseMode.

    Raises TimeoutError when the motion switcher never answers or a mode is still active
    after `timeout` [s] of `clock`."""
    report = SportModeRelease()
    deadline = clock() + timeout
    while True:
        try:
            mode = check_mode()
        except TimeoutError:
            if clock() > deadline:
                raise TimeoutError(
                    "the motion-switcher service did not answer: release sport mode by hand "
                    "(see hardware.go2.motion_switcher) before arming"
                ) from None
            continue
        if not mode:
            return report
        report.released = report.released or mode
        if clock() > deadline:
            raise TimeoutError(f"sport mode {mode!r} is still active after {timeout} s")
        report.stand_down_codes.append(int(stand_down()))
        report.release_codes.append(int(release_mode()))
        sleep(pause)


def release_sport_mode(
    participant, timeout: float = 15.0, pause: float = RELEASE_PAUSE, call_timeout: float = 1.0
) -> str:
    """Release whatever mode the motion switcher runs (sport mode) as Unitree's examples do
    (StandDown, then ReleaseMode until CheckMode reports none); returns the mode that was
    released ("" if none was). `call_timeout` [s]: wait for each answer. Raises TimeoutError
    (see `release_sequence` and the module docstring for the manual way)."""
    switcher = MotionSwitcher(participant, call_timeout)
    sport = SportClient(participant, call_timeout)
    report = release_sequence(
        switcher.check_mode, sport.stand_down, switcher.release_mode, timeout=timeout,
        pause=pause,
    )  # fmt: skip
    if report.released:
        logger.info(
            "released mode %r: StandDown codes %s, ReleaseMode codes %s",
            report.released, report.stand_down_codes, report.release_codes,
        )  # fmt: skip
    return report.released


def release_sport_mode_or_none(participant, release: bool) -> str | None:
    """`release_sport_mode(participant)` if asked (the released mode's name), else None."""
    return release_sport_mode(participant) if release else None
