"""A robot whose base velocity and position come from the state estimator, behind any backend.

    robot = EstimatedRobot(MuJoCoRobot(model), StateEstimator(model))
    m = robot.read()        # m.base_linear_velocity, m.base_position: the estimate (or None)

`read()` runs `hardware.estimator.StateEstimator.update` once on each new inner sample (by
`sequence`): on every sample that arrived since the last read, oldest first, where the inner
robot queues them (`take_samples()`, e.g. `hardware.go2.robot.Go2Robot`; a read delayed by a
busy computer then costs no samples, and the filter integrates over the robot's own
intervals), else on the newest. It returns the newest inner measurement with

    base_linear_velocity = estimate (base frame),  base_position = estimate (world),
    base_state_source = "estimator"

and both None (`base_state_source` None) while the estimator is not valid (before it
started, or after a fault), so that a full-state controller cannot start on a guess. A
backend's true base state (`base_state_source` "ground_truth" from a simulator,
"sport_state" from the Go2's sport service) is taken out of what the controller sees and
kept in `ground_truth` (the newest) and `history` (for logs); with
`replace_ground_truth=False` the inner measurement passes unchanged (the estimator still
runs, for comparison).

An estimator fault is `estimator_fault` (str or None, latched until `reset`);
`hardware.control_loop` passes it to `SafetyLayer.observe(now, m, fault=...)`, which damps
the robot (`estimator_fault`).
"""

from __future__ import annotations

import collections
from dataclasses import dataclass

import numpy as np

from .estimator import Estimate, StateEstimator
from .interface import Measurement
from .robot_wrapper import RobotWrapper

TRUTH_SOURCES = ("ground_truth", "sport_state")


@dataclass(frozen=True)
class BaseStateSample:
    """One sample of a backend's true base state next to the estimate.

    timestamp [s]; source: the measurement's `base_state_source`;
    base_linear_velocity (3,) [m/s] base frame, base_position (3,) [m] world: the truth;
    estimate: the `Estimate` of the same sample."""

    timestamp: float
    source: str
    base_linear_velocity: np.ndarray
    base_position: np.ndarray
    estimate: Estimate


class EstimatedRobot(RobotWrapper):
    """A `RobotInterface` wrapper (module docstring).

    Args:
        robot: any `RobotInterface` (`advance` passed through when it has one).
        estimator: a `StateEstimator` for the same robot.
        replace_ground_truth: remove a true base state from the measurement (True) or pass
            it through (False).
        history_length: most `BaseStateSample`s kept in `history` (oldest dropped).
    """

    def __init__(
        self,
        robot,
        estimator: StateEstimator,
        *,
        replace_ground_truth: bool = True,
        history_length: int = 100_000,
    ):
        super().__init__(robot)
        self.estimator = estimator
        self.replace_ground_truth = bool(replace_ground_truth)
        self.ground_truth: BaseStateSample | None = None
        self.history: collections.deque = collections.deque(maxlen=int(history_length))
        self._sequence: int | None = None
        self._out: Measurement | None = None
        self._backlog: list = []

    @property
    def estimator_fault(self) -> str | None:
        """The estimator's latched fault, or None."""
        return self.estimator.fault

    fault = estimator_fault

    @property
    def estimate(self) -> Estimate:
        return self.estimator.estimate

    def reset(self) -> None:
        """Reset the estimator (it starts again once the feet are down)."""
        self.estimator.reset()
        self._sequence, self._out, self._backlog = None, None, []

    def read(self) -> Measurement | None:
        m = self.robot.read()
        if m is None:
            return None
        if self._out is not None and m.sequence == self._sequence:
            return self._out
        for earlier in self._queued_before(m):
            self.estimator.update(earlier)
        self._sequence = m.sequence
        estimate = self.estimator.update(m)
        has_truth = (
            m.base_state_source in TRUTH_SOURCES
            and m.base_linear_velocity is not None
            and m.base_position is not None
        )
        if has_truth:
            self.ground_truth = BaseStateSample(
                float(m.timestamp),
                m.base_state_source,
                np.asarray(m.base_linear_velocity, dtype=float).copy(),
                np.asarray(m.base_position, dtype=float).copy(),
                estimate,
            )
            self.history.append(self.ground_truth)
        if has_truth and not self.replace_ground_truth:
            self._out = m
        elif estimate.valid:
            self._out = m.replace(
                base_linear_velocity=estimate.base_linear_velocity.copy(),
                base_position=estimate.base_position.copy(),
                base_state_source="estimator",
            )
        else:
            self._out = m.replace(
                base_linear_velocity=None, base_position=None, base_state_source=None
            )
        return self._out

    def _queued_before(self, m: Measurement) -> list:
        """The inner robot's queued samples older than `m` and newer than the last one read
        (those newer than `m`, arrived since its read, wait for the next call). Only a robot
        whose own class queues samples: a wrapper that changes `read` (noise, latency) does not
        pass its inner robot's queue through."""
        if getattr(type(self.robot), "take_samples", None) is None:
            return []
        self._backlog.extend(self.robot.take_samples())
        last = -1 if self._sequence is None else self._sequence
        earlier = [s for s in self._backlog if last < s.sequence < m.sequence]
        self._backlog = [s for s in self._backlog if s.sequence > m.sequence]
        return earlier

    def history_arrays(self) -> dict:
        """`history` as arrays: `t (n,)`, `true_velocity`, `true_position`, `velocity`,
        `position` `(n, 3)` (NaN where the estimate was not valid), `valid (n,)`, `nis (n,)`,
        `foot_nis (n, 4)`, `contact_weights (n, 4)`."""
        nan3 = np.full(3, np.nan)
        rows = list(self.history)

        def est(s, name):
            value = getattr(s.estimate, name)
            return nan3 if value is None else value

        return {
            "t": np.array([s.timestamp for s in rows]),
            "true_velocity": np.array([s.base_linear_velocity for s in rows]).reshape(-1, 3),
            "true_position": np.array([s.base_position for s in rows]).reshape(-1, 3),
            "velocity": np.array([est(s, "base_linear_velocity") for s in rows]).reshape(-1, 3),
            "position": np.array([est(s, "base_position") for s in rows]).reshape(-1, 3),
            "valid": np.array([s.estimate.valid for s in rows], dtype=bool),
            "nis": np.array([s.estimate.nis for s in rows]),
            "foot_nis": np.array([s.estimate.foot_nis for s in rows]).reshape(-1, 4),
            "contact_weights": np.array([s.estimate.contact_weights for s in rows]).reshape(-1, 4),
        }
