"""MPC in real time: a solver replans from the newest measurement while every controller call
applies the newest plan at the current time.

    controller = realtime_mpc_controller("go2", joint_map, iterations=1, process=True, core=1)
    controller.prepare()                   # the first plan and the compilation, before the robot
    result = control_loop.run(udp_robot, controller, safety, duration=10.0, control_dt=0.01)
    controller.shutdown()                  # stops the solver thread and process
    controller.summary()                   # cycle times, overruns, plan age, lookahead, ...

Why: one FDDP iteration on Go2's 25-knot trot can take longer than a 20 ms control period on a
CPU (`benchmarks/bench_mpc.py`), and in lockstep the robot would wait for it. Here the robot
never waits:

- a solver thread runs one cycle after the other from the newest measurement `(state, t)` (at
  most once per `min_period`), either itself (`MPC.plan_cycle` on `mpc`) or through a
  `controllers.mpc_process.SolverProcess` (`solver=`: the solve in a process of its own, away
  from this interpreter's command loop and controller thread), then commits the plan.
- latency compensation (`lookahead`): a cycle solves not from the measured state but from the
  state the planning model predicts `lookahead` after it under the plan in use (`MPC.predict`),
  and its plan starts there: by default ("auto") the recent median plan age, i.e. when the plan
  will arrive. Without it the plan starts at the measurement's time and is used from the knot
  containing the current time, from a state the robot left a cycle ago.
- every call (the control loop's controller thread, `control_dt`) evaluates the newest plan at
  the call's time (`MPC.targets_at`), optionally (`feedback=True`) with its Riccati feedback on
  the measured state, `q* = u_k + clip(K_k (x (-) x_k), +-feedback_limit)`, which closes the
  loop at the call rate rather than the solver's. Off by default: in simulated time
  (`controllers.closed_loop.run_mpc` with slow replanning, with and without latency and the
  lookahead) the feedback tracked worse than the plan's targets open loop and did not keep Go2
  up either.
- `prepare` solves the first plan (and compiles) before the robot runs, so `reset` takes one
  warm-started solve: the full first solve, compilation included, is long enough for a robot
  with passive joints to fall before the first command.

The configuration that walks in real time: the compiled derivatives (`derivatives="compiled"`,
the example's default), one FDDP iteration per cycle in a solver process on its own core, the
lookahead and `REAL_TIME_WEIGHTS`; with them Go2 trots at 0.5 m/s against MuJoCo in real time
over UDP at 50 Hz with its joints under their velocity limits (`examples/deploy_network.py`).
At the gait library's control-rate weight the re-solved plans chatter and the calves pass their
velocity limits.

Overruns are cycles whose solve took longer than one knot (`mpc.dt`, the 50 Hz budget). The
plan age is the wall time from the measurement a plan was solved from to its commit (queueing
plus solving). A slow computer degrades the MPC, it does not stop it: the calls keep serving the
newest plan at their own time, the "auto" lookahead stretches to the measured plan age, and
`summary` reports both, with the age of the plan each call used (`call_plan_age_*`: the call's
time less the plan's start, from the first cycle after `reset` on). A call past the end of the
newest plan's horizon (a solver stalled for a whole horizon) gets the standing targets, four
feet down, not the last knot's swing pose; those calls are counted (`expired_calls`).

A bug in the solver thread (any exception other than a failed solve, which the MPC's own
fallbacks handle) stops the thread and makes every later call raise: the control loop
logs it and the safety layer damps the robot after its command timeout.
"""

from __future__ import annotations

import threading
import time
from typing import Literal

import numpy as np

from dynamics.configuration import State
from hardware.interface import JointCommand, JointMap, Measurement, VelocityCommand

from .mpc import MPC, ONE_ITERATION_WEIGHTS, MPCStats
from .mpc_process import SolverProcess
from .state_feedback import measured_state

LOOKAHEAD_WINDOW = 5  # cycles whose median wall time sets the "auto" lookahead
# The real-time planner's weights over the gait's (`trajopt.gaits.gait_weights`; a caller's
# `weights` override both), at any iteration count: the one-iteration planner's
# (`controllers.mpc.ONE_ITERATION_WEIGHTS`, a control-rate weight of 1e-3 against the
# library's 1e-5). A plan re-solved every cycle from a state a cycle old chatters at the
# library's weight: calf targets far apart from one knot to the next, the PD drives the calves
# past their velocity limit and the safety layer damps the robot. With 1e-3 the joints stay
# under their limits.
REAL_TIME_WEIGHTS = ONE_ITERATION_WEIGHTS


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
            there. "auto" (default): the median plan age of the last `LOOKAHEAD_WINDOW` cycles
            (the warm-up cycle's wall time at first), rounded up to whole sub-steps of the
            planning model (`mpc.dt / substeps`); 0 turns it off.
        solver: a `controllers.mpc_process.SolverProcess` built with the same MPC options as
            `mpc`: the solves then run in that process (its own interpreter, optionally its own
            core) and `mpc` only serves and commits its plans; None (default): in a thread of
            this process, on `mpc` itself.
    """

    def __init__(self, mpc: MPC, joint_map: JointMap, *, kp=None, kd=None, feedback=False,
                 min_period: float | None = None, lookahead: float | Literal["auto"] = "auto",
                 solver: SolverProcess | None = None):  # fmt: skip
        self.mpc = mpc
        self.solver = solver
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
        self.call_plan_ages: list = []  # [s] per call: its time less the served plan's start
        self.expired_calls = 0
        self.calls = 0
        self._newest = None  # (State, t, perf_counter at the call)
        self._warmup_cycles = 0
        self._prepared = None  # the plan `prepare` solved (in this process or the solver's)
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    # ------------------------------------------------------------------ Controller
    def prepare(self, state: State | None = None) -> None:
        """Solve the first plan before the robot is connected (default: from the model's
        standing pose at rest) and compile everything a cycle runs. `reset` then starts from
        that plan with one warm-started solve from the measurement instead of the full first
        solve: without it, the first solve (with compilation) leaves a real robot unattended
        while its joints are passive."""
        if state is None:
            model = self.mpc.model
            state = State(np.asarray(model.q_standing, float), np.zeros(model.nv))
        self.close()
        if self.solver is not None:
            self._adopt(self.solver.prepare(state, self._first_lookahead(), self.mpc.command))
        else:
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
        self.call_plan_ages, self.expired_calls = [], 0
        self.lookaheads = []
        self._newest = None
        if self.solver is not None:  # the process starts from its own prepared plan
            self._adopt(self.solver.reset(state, self._first_lookahead(), self.mpc.command))
        else:
            if self._prepared is not None:
                self.mpc.reset(state, 0.0, init=self._prepared, iterations=self.mpc.iterations)
            else:
                self.mpc.reset(state, 0.0)
            self._warm_cycle(state)
        # with a state, targets_at also sets last_targets (the next solve's u_prev) to the
        # corrected targets: only when the feedback is applied
        self.mpc.targets_at(0.0, state if self.feedback else None)
        self._warmup_cycles = len(self.mpc.stats.cycles)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._solve_loop, daemon=True, name="mpc-solver")
        self._thread.start()

    def _first_lookahead(self) -> float:
        """The warm-up cycle's lookahead: one knot (compiles the prediction) unless it is off."""
        return 0.0 if self.lookahead == 0 else self.mpc.dt

    def _warm_cycle(self, state: State) -> None:
        """One warm-started cycle at t = 0 (with the prediction if it is used): compiles both,
        and its wall time is the "auto" lookahead's first estimate."""
        self.mpc.commit(self.mpc.plan_cycle(state, 0.0, self._first_lookahead()))

    def _adopt(self, solved) -> None:
        """Take the solver process's first plan and warm-up cycle: `((plan, wall), outcome)`."""
        (plan, wall), warm = solved
        self.mpc.adopt(plan, 0.0, wall)
        self.mpc.commit(warm)

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
            q_target = self._targets(float(t), state)
            self.calls += 1
        return JointCommand.create(
            np.asarray(q_target, dtype=float), self.kp, self.kd, nu=self.joint_map.nu,
            timestamp=measurement.timestamp,
        )  # fmt: skip

    def _targets(self, t: float, state: State) -> np.ndarray:
        """The newest plan's targets at `t` (its feedback on `state` if used), or the standing
        targets past the end of its horizon (module docstring); with `self.lock`."""
        plan = self.mpc.plan
        if plan is None or self.mpc.mode == "stand" or not self.plan_ages:
            # before the first cycle since `reset` commits, the reset's plan has no loop time
            return self.mpc.targets_at(t, state if self.feedback else None)
        age = t - self.mpc.plan_time
        self.call_plan_ages.append(age)
        if age >= plan.horizon * self.mpc.dt:
            self.expired_calls += 1
            return np.asarray(self.mpc.stand_targets, dtype=float).copy()
        return self.mpc.targets_at(t, state if self.feedback else None)

    def close(self) -> None:
        """Stop the solver thread (waits for the cycle in progress); a solver process keeps
        running for the next `reset` (`shutdown` stops it too)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30.0)
            self._thread = None

    def shutdown(self) -> None:
        """`close`, and stop the solver process if there is one."""
        self.close()
        if self.solver is not None:
            self.solver.close()

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
                if self.solver is not None:
                    with self.lock:
                        command, last = self.mpc.command.copy(), self.mpc.last_targets.copy()
                    outcome = self.solver.cycle(state, t, lookahead, command, last)
                else:
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
        with self.lock:
            latencies = list(self.plan_ages[-LOOKAHEAD_WINDOW:])
        if not latencies:  # the warm-up cycle of `reset` (not the first plan's long solve)
            latencies = [c.wall_time for c in self.mpc.stats.cycles[self._warmup_cycles - 1 :]]
        step = self.mpc.dt / self.mpc.problem.substeps
        if not latencies:
            return step
        return step * max(int(np.ceil(np.median(latencies) / step - 1e-9)), 1)

    # ------------------------------------------------------------------ reporting
    @property
    def stats(self) -> MPCStats:
        return self.mpc.stats

    def summary(self) -> dict:
        """The MPC's cycle statistics (`MPCStats.summary`, the two warm-up solves of `reset`
        excluded; `{"cycles": 0}` and the fields below if none ran; `timing_median_s`: the
        median seconds of a cycle's linearisation, backward pass, line search and the rest,
        `controllers.mpc.cycle_timing`) plus:
        `overruns` (cycles longer than `mpc.dt`), `plan_age_median_s`, `plan_age_p99_s`,
        `plan_age_max_s`, the age of the plan each call served (`call_plan_age_median_s`,
        `_p99_s`, `_max_s`), `expired_calls` (standing targets: past the plan's horizon),
        `calls`, the `lookahead_median_s` and `_max_s`, and the solver thread's `error` (None
        if it ran cleanly)."""
        cycles = self.mpc.stats.cycles[self._warmup_cycles :]
        out = MPCStats(list(cycles)).summary()
        walls = np.array([c.wall_time for c in cycles])
        out["overruns"] = int(np.sum(walls > self.mpc.dt)) if len(walls) else 0
        ages = np.array(self.plan_ages)
        out["plan_age_median_s"] = float(np.median(ages)) if len(ages) else float("nan")
        out["plan_age_p99_s"] = float(np.percentile(ages, 99)) if len(ages) else float("nan")
        out["plan_age_max_s"] = float(np.max(ages)) if len(ages) else float("nan")
        served = np.array(self.call_plan_ages)
        for name, value in (("median", 50), ("p99", 99), ("max", 100)):
            out[f"call_plan_age_{name}_s"] = (
                float(np.percentile(served, value)) if len(served) else float("nan")
            )
        out["expired_calls"] = self.expired_calls
        out["calls"] = self.calls
        looks = np.array(self.lookaheads)
        out["lookahead_median_s"] = float(np.median(looks)) if len(looks) else float("nan")
        out["lookahead_max_s"] = float(np.max(looks)) if len(looks) else float("nan")
        out["error"] = self.error
        return out


def realtime_mpc_controller(robot: str, joint_map: JointMap, gait: str = "trot",
                            horizon: float = 0.5, iterations: int = 1,
                            feedback: bool = False, lookahead: float | Literal["auto"] = "auto",
                            process: bool = False, core: int | None = None,
                            **problem_options) -> RealTimeMPC:  # fmt: skip
    """The receding-horizon planner (`controllers.mpc.MPC`, standing command until the first
    `VelocityCommand`; `problem_options` such as `substeps`, `contact`, `weights` go to it, the
    weights over `REAL_TIME_WEIGHTS`) in real time (`RealTimeMPC`). `process`: solve in a
    `SolverProcess` (pinned to `core` if given) instead of a thread; call `shutdown()` at the
    end."""
    weights = {**REAL_TIME_WEIGHTS, **(problem_options.pop("weights", None) or {})}
    options = dict(robot=robot, gait=gait, command=(0.0, 0.0, 0.0), horizon=horizon,
                   iterations=iterations, weights=weights, **problem_options)  # fmt: skip
    planner = MPC(**options)
    solver = SolverProcess(options, core=core) if process else None
    return RealTimeMPC(planner, joint_map, feedback=feedback, lookahead=lookahead, solver=solver)
