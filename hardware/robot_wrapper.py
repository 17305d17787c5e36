"""The base of every robot that wraps another one (sensor noise, the state estimator, fault
injection, recording): a `RobotInterface` that passes everything to the inner robot.

    class Halved(RobotWrapper):
        def read(self):
            m = self.robot.read()
            return None if m is None else m.replace(joint_qd=m.joint_qd / 2)

`read`, `write`, `now` and `close` go to `robot`, and so does every attribute the wrapper
lacks (`advance` of a simulated robot, `driver`, `model`, `data`, ...), so a wrapper around a
`SimulatedRobot` is one, and a wrapper around one that is not has no `advance`. A subclass
overrides what it changes.
"""

from __future__ import annotations

from .interface import JointCommand, Measurement


class RobotWrapper:
    """A `RobotInterface` around `robot` (module docstring); `joint_map` is the robot's."""

    def __init__(self, robot):
        self.robot = robot
        self.joint_map = robot.joint_map

    def read(self) -> Measurement | None:
        return self.robot.read()

    def write(self, command: JointCommand) -> None:
        self.robot.write(command)

    def now(self) -> float:
        return self.robot.now()

    def close(self) -> None:
        self.robot.close()

    def __getattr__(self, name):  # the inner robot's extras (advance, driver, model, ...)
        if name == "robot":  # not set yet (copy, pickle): no recursion
            raise AttributeError(name)
        return getattr(self.robot, name)
