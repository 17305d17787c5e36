"""MPC in closed loop with this project's simulator (simulated time: the plant waits for the
controller, so the result does not depend on this machine's speed; the wall time per cycle is
recorded separately).

The plant is `contact.step` at `sim_dt` (2 ms by default, 10 steps per 20 ms control period)
with the joint PD as actuator model: `tau = clip(Kp (q* - q))` plus the PD damping `-Kd qd`
integrated implicitly in the step (`StepParams.joint_damping`), the same actuator the planner
models. The targets `q*` are held over each control period. A control period in which the
simulator flags a bad state (`StepInfo.bad_state`/`bad_result`: NaN, infinity, a non-unit base
quaternion) stops the run with `FloatingPointError` naming the time.

    result = run_mpc(MPC("go2"), duration=10.0)
    result.summary()   # tracking error, average speed, fell?, cycle times
"""

from __future__ import annotations

import functools
import sys
import time
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from contact import ContactModel, StepParams, flat
from contact.plant import JointPD, simulate_pd, went_bad
from dynamics.actuator import default_gains
from dynamics.configuration import State

from .mpc import MPC


@dataclass
class ClosedLoopResult:
    """Per control period k (leading axis K): time `t (K,)` [s], `q (K+1, nq)`, `v (K+1, nv)`
    (state at the start of each period, and the last), `targets (K, nu)`, `command (K, 3)`
    `[v_x, v_y, yaw_rate]`, `force (K, nfeet, 3)` mean contact forces over the period [N, world];
    `standing_height` [m]; `mpc_stats` (`MPCStats.summary()`); `wall_time` [s]."""

    t: np.ndarray
    q: np.ndarray
    v: np.ndarray
    targets: np.ndarray
    command: np.ndarray
    force: np.ndarray
    standing_height: float
    mpc_stats: dict
    wall_time: float

    def fell(self) -> bool:
        """Fallen: the base dropped below half the standing height, or tilted beyond 60 deg."""
        up_z = 1.0 - 2.0 * (self.q[:, 3] ** 2 + self.q[:, 4] ** 2)  # R[2, 2] from xyzw
        return bool(np.any(self.q[:, 2] < 0.5 * self.standing_height) or np.any(up_z < 0.5))

    def tracking(self, settle: float = 1.0) -> dict:
        """Velocity tracking after `settle` seconds: mean base-frame forward velocity and its
        mean absolute error from the command [m/s], the average speed from the displacement
        along the commanded heading, and the RMS yaw-rate error [rad/s]."""
        keep = self.t >= settle
        if not np.any(keep):
            raise ValueError(f"settle {settle} s is longer than the run ({self.t[-1]:.2f} s)")
        v = self.v[:-1][keep]
        cmd = self.command[keep]
        dt = self.t[1] - self.t[0] if len(self.t) > 1 else 0.0
        first = int(np.argmax(keep))
        displacement = self.q[-1, 0:2] - self.q[first, 0:2]
        duration = (len(self.t) - first) * dt
        return {
            "mean_forward_velocity": float(np.mean(v[:, 0])),
            "mean_abs_forward_error": float(np.mean(np.abs(v[:, 0] - cmd[:, 0]))),
            "average_speed_from_displacement": float(np.linalg.norm(displacement) / duration),
            "rms_yaw_rate_error": float(np.sqrt(np.mean((v[:, 5] - cmd[:, 2]) ** 2))),
        }

    def summary(self, settle: float = 1.0) -> dict:
        out = {"duration_s": float(self.t[-1] + (self.t[1] - self.t[0])), "fell": self.fell()}
        out.update(self.tracking(settle))
        out["mpc"] = self.mpc_stats
        out["wall_time_s"] = self.wall_time
        return out


@functools.lru_cache(maxsize=8)
def plant_advance(model, steps: int, contact: ContactModel, num_sweeps: int):
    """Jitted `(params, state, targets, kp) -> (state, mean forces, bad)`: `steps` plant steps
    (`contact.plant.simulate_pd`) under the PD toward `targets` (cached per model and step
    count); `bad ()` is true if the simulator flagged a bad state on the way
    (`StepInfo.bad_state`/`bad_result`: NaN, infinity, a non-unit base quaternion)."""

    def run(params, state, targets, kp):
        final, trace = simulate_pd(
            model, params, state, JointPD(targets, kp), steps, contact=contact,
            num_sweeps=num_sweeps,
        )  # fmt: skip
        return final, jnp.mean(trace.info.force, axis=0), went_bad(trace)

    return jax.jit(run)


def run_mpc(
    mpc: MPC,
    duration: float,
    *,
    sim_dt: float = 0.002,
    contact: ContactModel = "smooth",
    num_sweeps: int = 20,
    params: StepParams | None = None,
    initial_state: State | None = None,
    command_schedule=None,
    replan_every: int = 1,
    feedback: bool = False,
    latency: int = 0,
    lookahead: float = 0.0,
    progress: bool = True,
) -> ClosedLoopResult:
    """Run `mpc` against the simulator for `duration` seconds (see the module docstring).

    Args:
        sim_dt: plant time step [s]; the control period `mpc.dt` must be a multiple of it.
        contact, num_sweeps: the plant's contact model (default: smooth, 20 sweeps).
        params: plant `StepParams` (default: flat ground, mu 0.8, `sim_dt`, the PD damping).
        initial_state: default: standing at rest.
        command_schedule: optional `f(t) -> (v_x, v_y, yaw_rate)` applied each period.
        replan_every: replan every this many control periods (in between, the plan's next
            knots' targets are applied): emulates a slower MPC rate.
        feedback: in between replans, add the plan's Riccati feedback on the measured state
            (`MPC.targets_at(t, state)`) instead of applying the plan's targets open loop.
        latency: control periods between a replan's measurement and the moment its plan is
            used (at most `replan_every`): emulates a solver that takes that long in real time
            (`controllers.realtime_mpc`), in simulated time. 0 (default): the plan is used at
            once, the lockstep MPC.
        lookahead: [s] passed to `MPC.plan_cycle`: solve from the state the planning model
            predicts that far ahead (latency compensation; `latency * mpc.dt` matches it).
        progress: print a line per simulated second (time, speed, cycle time).
    """
    model = mpc.model
    steps = int(round(mpc.dt / sim_dt))
    if steps < 1 or abs(steps * sim_dt - mpc.dt) > 1e-9:
        raise ValueError(f"the control period {mpc.dt} s must be a multiple of sim_dt {sim_dt} s")
    if not duration > 0:
        raise ValueError(f"duration must be positive, got {duration}")
    if replan_every < 1:
        raise ValueError(f"replan_every must be >= 1, got {replan_every}")
    if not 0 <= latency <= replan_every:
        raise ValueError(f"latency must be in [0, replan_every = {replan_every}], got {latency}")
    if not lookahead >= 0:
        raise ValueError(f"lookahead must be >= 0 [s], got {lookahead}")
    kp, kd = default_gains(model)
    if params is None:
        params = StepParams(terrain=flat(friction=0.8), dt=sim_dt, joint_damping=kd)
    if initial_state is None:
        initial_state = State(jnp.asarray(model.q_standing), jnp.zeros(model.nv))
    advance = plant_advance(model, steps, contact, num_sweeps)
    n = int(round(duration / mpc.dt))
    state = initial_state
    qs, vs = [np.asarray(state.q)], [np.asarray(state.v)]
    targets, commands, forces, times = [], [], [], []
    start = time.perf_counter()
    pending = None  # (period at which it is committed, CycleOutcome)
    for k in range(n):
        t = k * mpc.dt
        if command_schedule is not None:
            mpc.set_command(*command_schedule(t))
        replan = k > 0 and k % replan_every == 0
        if k == 0:
            u = mpc.reset(state, t)
        elif replan and latency == 0 and lookahead == 0:
            u = mpc.update(state, t)
        else:
            committed = pending is not None and pending[0] <= k
            if committed:
                mpc.commit(pending[1])
                pending = None
            if replan:  # solved from this period's state, used `latency` periods later
                outcome = mpc.plan_cycle(state, t, lookahead)
                if latency == 0:
                    mpc.commit(outcome)
                    committed = True
                else:
                    pending = (k + latency, outcome)
            # a fresh plan's first knot is applied as planned, without the feedback
            u = mpc.targets_at(t, state if feedback and not committed else None)
        state, force, bad = advance(params, state, jnp.asarray(u), kp)
        qs.append(np.asarray(state.q))
        vs.append(np.asarray(state.v))
        targets.append(u)
        commands.append(mpc.commanded_velocity())
        forces.append(np.asarray(force))
        times.append(t)
        if bool(bad):
            raise FloatingPointError(
                f"the simulation flagged a bad state (NaN, infinity or a non-unit quaternion; "
                f"StepInfo.bad_state/bad_result) in the control period at t = {t:.2f} s"
            )
        if progress and (k + 1) % int(round(1.0 / mpc.dt)) == 0:
            stats = mpc.stats.summary()
            print(
                f"t {t + mpc.dt:5.2f} s  v_x {vs[-1][0]:+.3f} m/s "
                f"(command {mpc.commanded_velocity()[0]:+.2f})"
                f"  height {qs[-1][2]:.3f} m  cycle median {1e3 * stats['median_s']:.0f} ms"
                f"  mode {mpc.mode}",
                file=sys.stderr,
                flush=True,
            )
    return ClosedLoopResult(
        t=np.asarray(times),
        q=np.asarray(qs),
        v=np.asarray(vs),
        targets=np.asarray(targets),
        command=np.asarray(commands),
        force=np.asarray(forces),
        standing_height=float(model.q_standing[2]),
        mpc_stats=mpc.stats.summary(),
        wall_time=time.perf_counter() - start,
    )
