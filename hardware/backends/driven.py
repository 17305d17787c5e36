"""What the simulated robots share: a step clock and the motor drivers behind `write`.

A subclass sets `dt` [s] (its physics step), `driver` (`hardware.motor.MotorDriver`),
`steps = 0` and `sequence = 0`, and implements `read` and `advance`.
"""

from __future__ import annotations

from ..interface import JointCommand


class DrivenRobot:
    """Robot time `steps * dt`; commands and e-stop go to the motor drivers."""

    dt: float
    steps: int

    def now(self) -> float:
        return self.steps * self.dt

    def write(self, command: JointCommand) -> None:
        self.driver.submit(command, self.now())

    def estop(self) -> None:
        self.driver.estop(self.now())

    def close(self) -> None:
        pass

    def steps_in(self, duration: float) -> int:
        """The number of physics steps in `duration` [s]; raises `ValueError` unless it is a
        multiple of `dt`."""
        n = int(round(duration / self.dt))
        if abs(n * self.dt - duration) > 1e-9:
            raise ValueError(f"duration {duration} is not a multiple of the time step {self.dt}")
        return n
