"""The plant a policy is distilled and evaluated in, at the policy's rate.

`contact.step` at `sim_dt` under the joint PD of `controllers.closed_loop` (the MPC's actuator
model: `tau = clip(Kp (q* - q), +-tau_max)`, the damping `Kd` implicit in the step), the
targets `q*` held over each `CONTROL_DT`. The MPC expert of `learning.distill` labels states
of this plant, and `learning.evaluation.rollout_policy` runs a policy alone in it.
"""

from __future__ import annotations

from dataclasses import dataclass

import jax.numpy as jnp

from contact import StepParams, flat
from controllers.closed_loop import plant_advance
from dynamics import load_robot
from dynamics.actuator import default_gains

from .policy import CONTROL_DT


@dataclass(frozen=True)
class Plant:
    """The simulator the policy is distilled and evaluated in: `contact.step` at `sim_dt` with
    the joint PD of `controllers.closed_loop` (the MPC's actuator model: `Kp (q* - q)` clipped,
    the damping `Kd` implicit in the step), targets held over each `CONTROL_DT`."""

    robot: str = "go2"
    sim_dt: float = 0.002
    contact: str = "smooth"
    num_sweeps: int = 20
    friction: float = 0.8

    def parts(self):
        """`(model, params, advance, kp, q_default)`; `advance(params, state, targets, kp)`."""
        model = load_robot(self.robot)
        kp, kd = default_gains(model)
        params = StepParams(terrain=flat(friction=self.friction), dt=self.sim_dt,
                            joint_damping=kd)  # fmt: skip
        steps = int(round(CONTROL_DT / self.sim_dt))
        advance = plant_advance(model, steps, self.contact, self.num_sweeps)
        q_default = jnp.asarray(model.q_standing)[model.nq - model.nu :]
        return model, params, advance, kp, q_default
