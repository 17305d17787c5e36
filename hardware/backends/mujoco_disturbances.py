"""MuJoCo with domain randomisation: a payload, a friction, a command latency and pushes.

    ranges = DisturbanceRanges()                      # the training environment's defaults
    draw = ranges.sample(seed=3, seconds=20.0, total_mass=model.total_mass)
    robot = DisturbedMuJoCoRobot(model, draw, timestep=0.002)

One `Disturbances` draw is fixed for a run and applied to `MuJoCoRobot`, the independent engine:

- payload [kg]: added to the base body; its rotational inertia is scaled by the same factor
  `(m_base + payload) / m_base` (a load distributed like the base, as the training
  environment's `Randomization.payload`).
- friction: the Coulomb coefficient of feet and floor (`to_mjcf(friction=)`).
- latency [s]: every joint command reaches the drivers `latency` after `write` (rounded to whole
  MuJoCo steps), as a slow bus would deliver it; the drivers' stale-command check still
  applies (`MotorDriver.max_command_age`), so a latency beyond it drops every command.
- pushes: base-velocity kicks `(time [s], dvx, dvy)` [m/s], world frame, added to the free
  joint's linear velocity at the first MuJoCo step at or after `time` (robot time), as the
  training environment kicks: the joint velocities stay, so every body (and the centre of
  mass) gets `dv`. The ones applied are listed in `applied_pushes`.

`DisturbanceRanges.sample` draws them as `learning.env.Randomization`
draws its per-environment values: uniform payload fraction and friction, a latency in
`(0, latency_s)`, kicks at exponential intervals of mean `push_interval` with a uniform
direction and a size uniform in `(0, push_velocity)`.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from dynamics.model import Model

from ..interface import JointCommand
from .mujoco_sim import MuJoCoRobot


@dataclass(frozen=True)
class Disturbances:
    """One draw (module docstring): payload [kg], friction, latency [s], pushes: tuple of
    `(time [s], dvx [m/s], dvy [m/s])` in robot time, world frame."""

    payload: float = 0.0
    friction: float = 0.8
    latency: float = 0.0
    pushes: tuple = ()

    def __post_init__(self):
        if not np.isfinite(self.payload):
            raise ValueError(f"payload must be finite [kg], got {self.payload}")
        if not (np.isfinite(self.friction) and self.friction >= 0):
            raise ValueError(f"friction must be a finite coefficient >= 0, got {self.friction}")
        if not (np.isfinite(self.latency) and self.latency >= 0):
            raise ValueError(f"latency must be finite and >= 0 [s], got {self.latency}")
        for push in self.pushes:
            if len(push) != 3 or not np.all(np.isfinite(push)):
                raise ValueError(f"each push must be (time, dvx, dvy), finite; got {push}")

    def to_dict(self) -> dict:
        pushes = [[float(x) for x in push] for push in self.pushes]
        return {"payload_kg": self.payload, "friction": self.friction,
                "latency_s": self.latency, "pushes": pushes}  # fmt: skip


@dataclass(frozen=True)
class DisturbanceRanges:
    """Ranges of `sample` (module docstring). payload: fraction of the robot's total mass;
    friction: (low, high); latency_s: largest latency [s] (the training environment's
    one-control-step blend at 20 ms is 0..20 ms); push_velocity: largest kick [m/s];
    push_interval: mean time between kicks [s] (0: none)."""

    payload: tuple = (-0.05, 0.15)
    friction: tuple = (0.5, 1.25)
    latency_s: float = 0.02
    push_velocity: float = 0.5
    push_interval: float = 5.0

    def sample(self, seed: int, seconds: float, total_mass: float, start: float = 0.0):
        """A `Disturbances` for a run of `seconds` [s]; pushes only after `start` [s]."""
        rng = np.random.default_rng(seed)
        payload = float(rng.uniform(*self.payload)) * float(total_mass)
        friction = float(rng.uniform(*self.friction))
        latency = float(rng.uniform(0.0, self.latency_s))
        pushes = []
        if self.push_interval > 0 and self.push_velocity > 0:
            t = start + rng.exponential(self.push_interval)
            while t < seconds:
                angle = rng.uniform(-np.pi, np.pi)
                size = rng.uniform(0.0, self.push_velocity)
                pushes.append((float(t), float(size * np.cos(angle)), float(size * np.sin(angle))))
                t += rng.exponential(self.push_interval)
        return Disturbances(payload, friction, latency, tuple(pushes))


class DisturbedMuJoCoRobot(MuJoCoRobot):
    """`MuJoCoRobot` under one `Disturbances` draw (module docstring). Other keyword arguments
    go to `MuJoCoRobot` (not `friction`: it is the draw's)."""

    def __init__(self, model: Model, disturbances: Disturbances, **kwargs):
        if "friction" in kwargs:
            raise TypeError("friction comes from `disturbances.friction`, not a keyword")
        super().__init__(model, friction=disturbances.friction, **kwargs)
        self.disturbances = d = disturbances
        base = self.mj.body(model.joint_names[0]).id
        mass = float(self.mj.body_mass[base])
        if mass + d.payload <= 0:
            raise ValueError(f"payload {d.payload} kg leaves the base ({mass:.3f} kg) no mass")
        self.mj.body_mass[base] = mass + d.payload
        self.mj.body_inertia[base] *= (mass + d.payload) / mass
        qpos, qvel = self.data.qpos.copy(), self.data.qvel.copy()
        self._mujoco.mj_setConst(self.mj, self.data)  # (it leaves data at the model's qpos0)
        self.data.qpos[:], self.data.qvel[:] = qpos, qvel
        self._mujoco.mj_forward(self.mj, self.data)
        self.latency_steps = int(round(d.latency / self.dt))
        self._in_flight: deque = deque()  # (delivery step, command)
        self._pushes = sorted(d.pushes)
        self.applied_pushes: list = []  # (robot time [s], dvx, dvy) as applied
        addresses = self.base_joint_addresses()
        if addresses is None:
            raise ValueError(f"{model.name}'s base has no free joint to push")
        self._base_dof = addresses[1]  # world-frame linear velocity first

    def write(self, command: JointCommand) -> None:
        if self.latency_steps == 0:
            super().write(command)
        else:
            self._in_flight.append((self.steps + self.latency_steps, command))

    def _before_step(self) -> None:
        """Deliver the commands due and apply the pushes due at this step."""
        while self._in_flight and self._in_flight[0][0] <= self.steps:
            self.driver.submit(self._in_flight.popleft()[1], self.now())
        while self._pushes and self._pushes[0][0] <= self.now() + 1e-9:
            _, dvx, dvy = self._pushes.pop(0)
            self.data.qvel[self._base_dof] += dvx
            self.data.qvel[self._base_dof + 1] += dvy
            self.applied_pushes.append((self.now(), dvx, dvy))
