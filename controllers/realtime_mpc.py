"""MPC in real time: a solver thread replans from the newest measurement while every controller
call applies the newest plan's local feedback law at the current time.

    controller = RealTimeMPC(MPC("go2", "trot", iterations=1), joint_map)
    result = control_loop.run(udp_robot, controller, safety, duration=10.0, control_dt=0.01)
    controller.close()                     # stops the solver thread (also on `reset`)
    controller.summary()                   # cycle times, overruns, plan age, ...

Why two threads: one FDDP iteration on Go2's 25-knot trot takes longer than a 20 ms control
period on this CPU (BENCHMARKS.md, "MPC"), and in lockstep the robot would wait for it. Here the
robot never waits:

- the solver thread runs `MPC.plan_cycle` from the newest measurement `(state, t)` as soon as
  the previous cycle ends (at most once per knot, `mpc.dt`), then commits the plan. The plan's
  time origin is the measurement's `t`, so the knot applied at time `t'` is the one containing
  `t' - t`: a plan that took 80 ms to solve is used from its fifth knot on.
- every call (the control loop's controller thread, `control_dt`) evaluates the newest plan at
  the call's time (`MPC.targets_at`), optionally (`feedback=True`) with its Riccati feedback on
  the measured state, `q* = u_k + clip(K_k (x (-) x_k), +-feedback_limit)`, which closes the
  loop at the call rate rather than the solver's. Off by default: measured in simulated time
  (`controllers.closed_loop.run_mpc`, Go2 trot at 0.5 m/s, replanning every 80 ms, 4 s), the
  feedback did not keep Go2 up either and tracked worse (mean v_x 0.11 m/s against 0.34 m/s
  open loop; both fell; replanning every 120 and 160 ms with feedback fell too).

Status (2026-12-02): the robot does not wait, but on this 2-core CPU one Go2 cycle (one FDDP
iteration on 25 knots) takes a median 54 ms alone on a quiet core (`benchmarks/bench_mpc.py`)
and 95 ms inside the controller process (pinned to its own core, beside the 500 Hz command loop
and the controller thread), and in simulated time the trot already falls when replanning every
80 ms. So this does not yet walk Go2 in real time here; BENCHMARKS.md ("MPC in real time") has
the numbers, where the time goes, and what was tried.

Overruns are cycles whose solve took longer than one knot (`mpc.dt`, the 50 Hz budget). The
plan age is the wall time from the measurement a plan was solved from to its commit (queueing
plus solving). A bug in the solver thread (any exception other than a failed solve, which the
MPC's own fallbacks handle) stops the thread and makes every later call raise: the control loop
logs it and the safety layer damps the robot after its command timeout.
"""

from __future__ import annotations

import threading
import time

import numpy as np

from dynamics.configuration import State

from .hardware.interface import JointCommand, JointMap, Measurement, VelocityCommand
from .mpc import MPC, MPCStats
from .state_feedback import measured_state

LOOKAHEAD_WINDOW = 5  # cycles whose median wall time sets the "auto" lookahead


class RealTimeMPC:
    """`Controller` running `mpc` in a solver thread (see the module docstring).

    Args:
        mpc: the receding-horizon planner (`controllers.mpc.MPC`).
        joint_map: the robot's joints (gains default to its `kp_default`, `kd_default`).
        feedback: add the plan's Riccati feedback on the measured state (default False: the
            plan's targets open loop between commits; see the module docstring).
        min_period: [s] the solver starts a new cycle at most this often (default `mpc.dt`).
        lookahead: [s] latency compensation (`MPC.plan_cycle`): each cycle solves from the state
            the planning model predicts this far after the measurement, and its plan starts
            there. "auto" (default): the median wall time of the last `LOOKAHEAD_WINDOW` cycles
            (the warm-up cycle's at first), rounded up to whole knots; 0 turns it off.
    """

    def __init__(self, mpc: MPC, joint_map: JointMap, *, kp=None, kd=None, feedback=False,
                 min_period: float | None = None, lookahead: float | str = "auto"):  # fmt: skip
        self.mpc = mpc
        self.joint_map = joint_map
        self.kp = joint_map.kp_default if kp is None else kp
        self.kd = joint_map.kd_default if kd is None else kd
        self.feedback = bool(feedback)
        self.min_period = mpc.dt if min_period is None else float(min_period)
        if not self.min_period >= 0:
            raise ValueError(f"min_period must be >= 0 [s], got {min_period}")
        if not (lookahead == "auto" or (isinstance(lookahead, (int, float)) and lookahead >= 0)):
            raise ValueError(f"lookahead must be 'auto' or a time >= 0 [s], got {lookahead!r}")
        self.lookahead = lookahead
        self.lookaheads: list = []
        self.lock = threading.Lock()
        self.command: VelocityCommand | None = None
        self.error: str | None = None
        self.plan_ages: list = []
        self.calls = 0
        self._newest = None  # (State, t, perf_counter at the call)
        self._warmup_cycles = 0
        self._prepared = None  # the plan `prepare` solved
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    # ------------------------------------------------------------------ Controller
    def prepare(self, state: State | None = None) -> None:
        """Solve the first plan before the robot is connected (default: from the model's
        standing pose at rest) and compile everything a cycle runs. `reset` then starts from
        that plan with one warm-started solve from the measurement instead of the full first
        solve: without it, the first solve (0.5-2 s with compilation) leaves a real robot
        unattended while its joints are passive."""
        if state is None:
            model = self.mpc.model
            state = State(np.asarray(model.q_standing, float), np.zeros(model.nv))
        self.close()
        self.mpc.reset(state, 0.0)
        self._warm_cycle(state)
        self._prepared = self.mpc.plan

    def reset(self, measurement: Measurement) -> None:
        """Stop a running solver thread, solve the first plan from `measurement` (from the
        prepared plan with the per-cycle iterations after `prepare`, otherwise the full first
        solve) and run one warm-started cycle (both compile), compile the feedback law if it is
        used, then start the solver thread."""
        self.close()
        state = measured_state(measurement)
        self.command, self.error, self.plan_ages, self.calls = None, None, [], 0
        self.lookaheads = []
        self._newest = None
        if self._prepared is not None:
            self.mpc.reset(state, 0.0, init=self._prepared, iterations=self.mpc.iterations)
        else:
            self.mpc.reset(state, 0.0)
        self._warm_cycle(state)
        self._warmup_cycles = len(self.mpc.stats.cycles)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._solve_loop, daemon=True, name="mpc-solver")
        self._thread.start()

    def _warm_cycle(self, state: State) -> None:
        """One warm-started cycle at t = 0 (with the prediction if it is used): compiles both,
        and its wall time is the "auto" lookahead's first estimate."""
        lookahead = 0.0 if self.lookahead == 0 else self.mpc.dt
        self.mpc.commit(self.mpc.plan_cycle(state, 0.0, lookahead))
        # with a state, targets_at also sets last_targets (the next solve's u_prev) to the
        # corrected targets: only when the feedback is applied
        self.mpc.targets_at(0.0, state if self.feedback else None)

    def __call__(self, measurement: Measurement, t: float, command: VelocityCommand):
        state = measured_state(measurement)
        with self.lock:
            if self.error is not None:
                raise RuntimeError(f"the MPC solver thread stopped: {self.error}")
            if self._thread is None:
                raise RuntimeError("RealTimeMPC: call reset(measurement) before the first call")
            if command != self.command:
                self.mpc.set_command(command.vx, command.vy, command.yaw_rate)
                self.command = command
            self._newest = (state, float(t), time.perf_counter())
            q_target = self.mpc.targets_at(t, state if self.feedback else None)
            self.calls += 1
        return JointCommand.create(
            np.asarray(q_target, dtype=float), self.kp, self.kd, nu=self.joint_map.nu,
            timestamp=measurement.timestamp,
        )  # fmt: skip

    def close(self) -> None:
        """Stop the solver thread (waits for the cycle in progress)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30.0)
            self._thread = None

    # ------------------------------------------------------------------ the solver thread
    def _solve_loop(self) -> None:
        solved_t = -np.inf
        next_start = time.perf_counter() + self.min_period  # the reset's plan is fresh
        while not self._stop.is_set():
            with self.lock:
                newest = self._newest
            wait = next_start - time.perf_counter()
            if newest is None or newest[1] <= solved_t or wait > 0:
                self._stop.wait(max(wait, 5e-4))
                continue
            state, t, called = newest
            next_start = time.perf_counter() + self.min_period
            lookahead = self._lookahead()
            try:
                outcome = self.mpc.plan_cycle(state, t, lookahead)
            except Exception as exc:  # a bug, not a failed solve (plan_cycle handles those)
                with self.lock:
                    self.error = f"{type(exc).__name__}: {exc}"
                return
            with self.lock:
                self.mpc.commit(outcome)
                self.plan_ages.append(time.perf_counter() - called)
                self.lookaheads.append(lookahead)
            solved_t = t

    def _lookahead(self) -> float:
        """This cycle's lookahead [s] (see the class docstring)."""
        if self.lookahead != "auto":
            return float(self.lookahead)
        # the warm-up cycle of `reset` and the solver's (not the first plan's long solve)
        cycles = self.mpc.stats.cycles[max(self._warmup_cycles - 1, 0) :]
        walls = [c.wall_time for c in cycles[-LOOKAHEAD_WINDOW:]]
        dt = self.mpc.dt
        return dt * max(int(np.ceil(np.median(walls) / dt - 1e-9)), 1) if walls else dt

    # ------------------------------------------------------------------ reporting
    @property
    def stats(self) -> MPCStats:
        return self.mpc.stats

    def summary(self) -> dict:
        """The MPC's cycle statistics (`MPCStats.summary`, the two warm-up solves of `reset`
        excluded; `{"cycles": 0}` and the fields below if none ran) plus:
        `overruns` (cycles longer than `mpc.dt`), `plan_age_median_s`, `plan_age_p99_s`,
        `calls` and the solver thread's `error` (None if it ran cleanly)."""
        cycles = self.mpc.stats.cycles[self._warmup_cycles :]
        out = MPCStats(list(cycles)).summary()
        walls = np.array([c.wall_time for c in cycles])
        out["overruns"] = int(np.sum(walls > self.mpc.dt)) if len(walls) else 0
        ages = np.array(self.plan_ages)
        out["plan_age_median_s"] = float(np.median(ages)) if len(ages) else float("nan")
        out["plan_age_p99_s"] = float(np.percentile(ages, 99)) if len(ages) else float("nan")
        out["calls"] = self.calls
        looks = np.array(self.lookaheads)
        out["lookahead_median_s"] = float(np.median(looks)) if len(looks) else float("nan")
        out["error"] = self.error
        return out


def realtime_mpc_controller(robot: str, joint_map: JointMap, gait: str = "trot",
                            horizon: float = 0.5, iterations: int = 1,
                            feedback: bool = False, lookahead: float | str = "auto",
                            **problem_options) -> RealTimeMPC:  # fmt: skip
    """The receding-horizon planner (`controllers.mpc.MPC`, standing command until the first
    `VelocityCommand`; `problem_options` such as `substeps`, `contact` go to it) in real time
    (`RealTimeMPC`)."""
    planner = MPC(robot, gait, (0.0, 0.0, 0.0), horizon=horizon, iterations=iterations,
                  **problem_options)  # fmt: skip
    return RealTimeMPC(planner, joint_map, feedback=feedback, lookahead=lookahead)
