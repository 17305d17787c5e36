"""Receding-horizon control (MPC) with the FDDP shooting solver on the differentiable contact model.

Every control period (one knot, `dt`, 20 ms by default) the controller

1. moves the plan's start to the measured state `x0 = (q, v, u_prev = last targets)`,
2. shifts the gait phase and the velocity command into the references (the problem's traced
   `ProblemData`: nothing recompiles when the command, the gait pattern or x0 change),
3. warm-starts FDDP from the previous plan shifted by the knots that elapsed
   (`Trajectory.shifted`) and runs a few iterations within a wall-clock budget,
4. hands out the first knot's joint PD targets (the plan's control is constant over a knot,
   exactly what the PD between two updates applies).

Fallbacks: a cycle whose solve fails (status "diverged", non-finite cost or controls) keeps the
previous plan, shifted; after `max_failures` consecutive failures the controller switches to
a safe stand (the standing joint targets) until `reset`.

    mpc = MPC("go2", gait="trot", command=(0.5, 0.0, 0.0))
    mpc.reset(state)                       # solves the first plan (more iterations)
    targets = mpc.update(state, t)         # each control period, t [s] since reset
    mpc.set_command(0.3, 0.0, 0.2)         # any time: [v_x, v_y] base frame [m/s], yaw rate
    mpc.set_gait("walk")                   # any time: same problem structure, new pattern
    mpc.gait_clock(t)                      # (3,) the gait clock a policy observes at t

    mpc = MPC(problem)                     # a `trajopt.Problem` of your own as the planner

A problem built elsewhere (`trajopt.make_problem`, or a `trajopt.Problem` of one's own) sets the
robot, horizon, knot duration, sub-steps, contact model and weights. A gait-library problem (its
name is a gait) keeps the gait's moving references; any other keeps its own references, with
the base velocity set to the command once one is given.

The gait's phase at time `t` [s] since reset is `trajopt.gait_clock.gait_phase(t, gait_period)`:
the references of the cycle at `t` are `trajopt.gaits.gait_reference(..., start_time=t)` with
that period, so a policy distilled from the MPC observes, through `gait_clock`, the phase its
expert's references were built at.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import time
from dataclasses import dataclass, field

import jax
import numpy as np

from dynamics.configuration import State
from trajopt import problem as P
from trajopt.engine.fddp import TIMING_PARTS, check_linearize_threads
from trajopt.engine.fddp_step import LINEARIZE_PARTS
from trajopt.gait_clock import check_gait_period, gait_clock, gait_phase
from trajopt.gaits import (
    available_gaits,
    check_gait,
    default_guess,
    gait_period,
    gait_reference,
    gait_weights,
    make_problem,
    traced_weights,
)
from trajopt.solver import solve
from trajopt.trajectory import Trajectory

FAILED_STATUSES = ("diverged",)


@dataclass
class CycleRecord:
    """One MPC cycle: time [s] since reset, wall time of the cycle [s], solver status,
    iterations, cost, knots shifted, the mode after the cycle ("mpc", "fallback", "stand"), and
    where the cycle's time went (`cycle_timing`; None when no solve ran)."""

    t: float
    wall_time: float
    status: str
    iterations: int
    cost: float
    shift: int
    mode: str
    timing: dict | None = None


def cycle_timing(wall_time: float, solver_timing: dict | None,
                 linearize_parts: dict | None = None) -> dict | None:  # fmt: skip
    """A cycle's wall time [s] split into `TIMING_PARTS`: the solve's linearisation, Riccati
    passes and line searches (`fddp.solve_fddp`'s `SolveResult.timing`), and "other", the rest of
    the cycle (the solver's own rest, the prediction, the references, the warm start, the plan's
    assembly): `wall_time - linearize - backward - line_search`; with the solve's
    `linearize_parts` (one-call iterations: `fddp_step.LINEARIZE_PARTS`), those too, as parts
    of "linearize". None without a solver timing (a standing cycle, a solve that raised, a
    solver without one)."""
    if not solver_timing:
        return None
    parts = {k: float(solver_timing.get(k, 0.0)) for k in TIMING_PARTS[:-1]}
    parts["other"] = max(wall_time - sum(parts.values()), 0.0)
    for k in LINEARIZE_PARTS:
        if linearize_parts and k in linearize_parts:
            parts[k] = float(linearize_parts[k])
    return parts


@dataclass
class CycleOutcome:
    """What one cycle's solve produced (`MPC.plan_cycle`), before `MPC.commit`: its time `t`
    [s], wall time [s], knots shifted, the solved `plan` (None if the solve failed), the
    shifted previous plan `warm` (None when standing), and the status ("stand" when the
    controller is in its safe stand and did not solve), and where the time went
    (`cycle_timing`, None without a solve)."""

    t: float
    wall_time: float
    shift: int
    plan: Trajectory | None
    warm: Trajectory | None
    status: str
    timing: dict | None = None


@dataclass
class MPCStats:
    cycles: list = field(default_factory=list)

    def summary(self) -> dict:
        """Median / 99th percentile / max cycle wall time [s], achieved rate [Hz] at the median,
        counts of fallbacks and stand cycles, `iterations_per_cycle` (`{FDDP iterations: cycles}`),
        and `timing_median_s`: the median [s] of each
        part of a cycle (`cycle_timing`: linearize, backward, line_search, other) over the
        cycles that solved (None if none did)."""
        if not self.cycles:
            return {"cycles": 0}
        wall = np.array([c.wall_time for c in self.cycles])
        return {
            "cycles": len(self.cycles),
            "median_s": float(np.median(wall)),
            "p99_s": float(np.percentile(wall, 99)),
            "max_s": float(np.max(wall)),
            "rate_hz_at_median": float(1.0 / np.median(wall)),
            "fallback_cycles": sum(c.mode == "fallback" for c in self.cycles),
            "stand_cycles": sum(c.mode == "stand" for c in self.cycles),
            "iterations_per_cycle": iteration_counts(self.cycles),
            "timing_median_s": timing_medians(self.cycles),
        }


def iteration_counts(cycles) -> dict:
    """`{iterations: number of cycles}` over the cycles that solved (a time budget may stop a
    cycle before its iteration count)."""
    counts = collections.Counter(int(c.iterations) for c in cycles if c.mode == "mpc")
    return dict(sorted(counts.items()))


def timing_medians(cycles) -> dict | None:
    """`{part: median [s]}` over `TIMING_PARTS` of the cycles' `timing` (those that have one),
    and of each of `LINEARIZE_PARTS` over the cycles that have it (those whose iterations ran in
    one C call); None if no cycle has a timing."""
    timed = [c.timing for c in cycles if c.timing]
    if not timed:
        return None
    medians = {k: float(np.median([t[k] for t in timed])) for k in TIMING_PARTS}
    for k in LINEARIZE_PARTS:
        values = [t[k] for t in timed if k in t]
        if values:
            medians[k] = float(np.median(values))
    return medians


# The weights of a gait-library planner that runs one FDDP iteration per cycle, over the
# gait's (`trajopt.gaits.gait_weights`; a caller's `weights` override both): the control rate at
# 1e-3 against the library's 1e-5. A plan that one iteration re-solves every cycle chatters at
# the library's weight: joint targets far apart from one knot to the next. On Go2 with its rotor
# inertia the 10 s trot in our simulator then fell (0.23 m/s); at 1e-3 it walked at 0.49 m/s,
# as with two iterations at the library's weights. `controllers.realtime_mpc` plans with them
# at any iteration count.
ONE_ITERATION_WEIGHTS = {"control_rate": 1e-3}


class MPC:
    """Receding-horizon FDDP on a gait problem or a problem of one's own (module docstring).

    Args:
        robot: robot name for `dynamics.load_robot` (the planner is the gait-library problem),
            or a `trajopt.Problem` to plan with (its horizon, knot duration, sub-steps, contact
            model and weights; `horizon`, `dt`, `substeps` and `problem_options` are then not
            given).
        gait: a gait of `trajopt.gaits.GAITS` (default "trot", or the problem's own gait).
        command: `(v_x, v_y, yaw_rate)` base-frame velocity command [m/s, m/s, rad/s] (default
            0.5 m/s forward; for a problem that is not a gait's, its own references).
        horizon: planning horizon [s] (default 0.5); dt: knot and control period [s] (default
            0.02); substeps: simulation steps per knot in the planning model (default 2).
        iterations: FDDP iterations per cycle (a gait-library planner with one plans with
            `ONE_ITERATION_WEIGHTS` over the gait's); warmup_iterations: for the first plan.
        time_budget: wall-clock budget per cycle [s] (None: only the iteration count).
        max_failures: consecutive failed cycles before the safe stand.
        feedback_limit: bound [rad] on the Riccati feedback's correction of each joint target
            (`targets_at` with a state).
        linearize_threads: 1, or 2 to linearise the two halves of the horizon at the same time
            in each cycle (`trajopt.engine.jax_knots.JaxKnots.linearize_in_two_threads`; needs a
            second core).
        problem_options: passed to `trajopt.gaits.make_problem` (contact, weights, params,
            period: the gait period [s], default the gait's on the robot, `gait_period`;
            lead_in [periods], default the gait's on the robot; both kept by every cycle).
    """

    def __init__(
        self,
        robot: str | P.Problem = "go2",
        gait: str | None = None,
        command=None,
        *,
        horizon: float | None = None,
        dt: float | None = None,
        substeps: int | None = None,
        iterations: int = 1,
        warmup_iterations: int = 20,
        time_budget: float | None = None,
        max_failures: int = 3,
        feedback_limit: float = 0.3,
        linearize_threads: int = 1,
        **problem_options,
    ):
        if iterations < 1 or warmup_iterations < 1:
            raise ValueError("iterations and warmup_iterations must be >= 1")
        period = problem_options.get("period")
        self.period = None if period is None else check_gait_period(period, "period")
        self.lead_in = problem_options.get("lead_in")  # None: the gait's on the robot
        if isinstance(robot, P.Problem):
            given = {"horizon": horizon, "dt": dt, "substeps": substeps, **problem_options}
            given = sorted(k for k, v in given.items() if v is not None)
            if given:
                raise ValueError(
                    f"MPC(problem): {', '.join(given)} come from the problem; build the problem "
                    "with them instead"
                )
            P.validate(robot)
            self.problem = robot
            own_gait = robot.name if robot.name in available_gaits() else None
            gait = own_gait if gait is None else gait
            if gait is not None and command is None:
                command = (0.5, 0.0, 0.0)
        else:
            gait = "trot" if gait is None else gait
            command = (0.5, 0.0, 0.0) if command is None else command
            horizon = 0.5 if horizon is None else horizon
            dt = 0.02 if dt is None else dt
            substeps = 2 if substeps is None else substeps
            if horizon < dt:
                raise ValueError(f"horizon {horizon} s is shorter than one knot of {dt} s")
            check_gait(gait)
            if iterations == 1:
                problem_options["weights"] = {**ONE_ITERATION_WEIGHTS,
                                              **(problem_options.get("weights") or {})}  # fmt: skip
            self.problem = make_problem(
                robot, gait, 0.0, duration=horizon, dt=dt, substeps=substeps, **problem_options
            )
        if gait is not None:
            check_gait(gait)
        self.model = self.problem.model
        self.dt = float(self.problem.dt_knot)
        self.gait = gait
        self.weight_overrides = dict(problem_options.get("weights") or {})
        self.command = None if command is None else self._check_command(command)
        self.iterations = int(iterations)
        self.warmup_iterations = int(warmup_iterations)
        self.time_budget = time_budget
        self.max_failures = int(max_failures)
        if not feedback_limit >= 0:
            raise ValueError(f"feedback_limit must be >= 0 [rad], got {feedback_limit}")
        self.feedback_limit = float(feedback_limit)
        self.linearize_threads = check_linearize_threads(
            linearize_threads, self.problem.derivatives
        )
        self._local = jax.jit(functools.partial(P.local, self.problem))
        # one contact step of the planning model (`predict`)
        self._substeps = jax.jit(_knot_transitions(self.problem.replace(substeps=1)))
        nqb = self.model.nq - self.model.nu
        self.stand_targets = np.asarray(self.model.q_standing)[nqb:].copy()
        self.plan: Trajectory | None = None
        self.plan_time = 0.0
        # the plan before the current one, and its time origin: it serves `targets_at` before
        # the current plan's start (a plan solved with a lookahead starts in the future)
        self._previous: tuple[Trajectory, float] | None = None
        self.last_targets = self.stand_targets.copy()
        self.failures = 0
        self.mode = "mpc"
        self.stats = MPCStats()

    # ------------------------------------------------------------------ gait timing
    @property
    def gait_period(self) -> float:
        """The period [s] of the current gait's pattern in the references."""
        if self.gait is None:
            raise ValueError(
                "this MPC plans a problem without a gait (its own references): it has no gait "
                "period or clock; set_gait(...) gives it one"
            )
        return self.period if self.period is not None else gait_period(self.model.name, self.gait)

    def gait_phase(self, t: float) -> float:
        """The gait's cycle phase in [0, 1) at `t` [s] since reset
        (`trajopt.gait_clock.gait_phase`): the phase the references of a cycle at `t` start
        from."""
        return float(gait_phase(t, self.gait_period))

    def gait_clock(self, t: float) -> np.ndarray:
        """The gait clock `(3,)` at `t` [s] since reset (`trajopt.gait_clock.gait_clock`): what a
        policy distilled from this MPC observes at that time."""
        return gait_clock(t, self.gait_period)

    # ------------------------------------------------------------------ commands
    @staticmethod
    def _check_command(command) -> np.ndarray:
        c = np.asarray(command, dtype=float).reshape(-1)
        if c.shape != (3,) or not np.all(np.isfinite(c)):
            raise ValueError(
                f"command must be 3 finite numbers (v_x, v_y, yaw_rate), got {command!r}"
            )
        return c

    def commanded_velocity(self) -> np.ndarray:
        """`(v_x, v_y, yaw_rate)` `(3,)` the planner tracks: the command, or (a problem without
        one) its own base-velocity reference at the first knot."""
        if self.command is not None:
            return self.command.copy()
        return np.asarray(self.problem.data.reference.base_velocity[0], dtype=float)

    def set_command(self, v_x: float, v_y: float = 0.0, yaw_rate: float = 0.0) -> None:
        """Change the velocity command (base frame) from the next cycle on."""
        self.command = self._check_command((v_x, v_y, yaw_rate))

    def set_gait(self, gait: str) -> None:
        """Switch the gait pattern from the next cycle on (no recompilation)."""
        check_gait(gait)
        self.gait = gait
        # the gait's own weights (traced data: no recompilation either)
        weights = traced_weights(gait_weights(self.model.name, gait, self.weight_overrides))
        own = {t.name: self.problem.data.weights[t.name] for t in self.problem.terms}
        self.problem = self.problem.replace_data(weights={**weights, **own})

    def set_target(self, name: str, target) -> None:
        """Move the problem's own term `name`'s target (`trajopt.terms`; its shape, or one row
        per knot of the horizon) from the next cycle on, without recompiling."""
        self.problem = self.problem.with_target(name, target)

    # ------------------------------------------------------------------ the cycle
    def _problem_at(self, state: State, t: float, u_prev=None) -> P.Problem:
        pr = self.problem
        if self.gait is None:  # the problem's own references
            ref = pr.data.reference
        else:
            ref = gait_reference(self.model, self.gait, 0.0, pr.horizon, self.dt, start_time=t,
                                 period=self.gait_period, lead_in=self.lead_in,
                                 host=True)  # fmt: skip
        if self.command is not None:
            ref = dataclasses.replace(
                ref, base_velocity=np.tile(np.asarray(self.command, float), (pr.horizon + 1, 1))
            )
        u_prev = self.last_targets if u_prev is None else u_prev
        x0 = P.initial_knot_state(self.model, state, u_prev, host=True)
        return pr.replace_data(x0=x0, reference=ref)

    def reset(self, state: State, t: float = 0.0, *, init: Trajectory | None = None,
              iterations: int | None = None) -> np.ndarray:  # fmt: skip
        """Start over from `state` at time `t`: solve a first plan with `iterations` (default
        `warmup_iterations`) from `init` (default: the kinematic gait guess) and return the
        first targets `(nu,)`. A plan solved beforehand from a nearby state (the standing pose,
        `RealTimeMPC.prepare`) as `init` with a few iterations makes the reset as quick as a
        cycle."""
        if init is not None and init.horizon != self.problem.horizon:
            raise ValueError(
                f"init has {init.horizon} knots; this MPC's horizon has {self.problem.horizon}"
            )
        if iterations is not None and iterations < 1:
            raise ValueError(f"iterations must be >= 1, got {iterations}")
        self.last_targets = self.stand_targets.copy()
        problem = self._problem_at(state, t)
        start = time.perf_counter()
        plan = solve(
            problem,
            max_iterations=self.warmup_iterations if iterations is None else int(iterations),
            verbose=False,
            **({"guess": self._first_guess()} if init is None else {"init": init}),
        )  # fmt: skip
        self.adopt(plan, t, time.perf_counter() - start)
        return self.last_targets.copy()

    def _first_guess(self) -> str:
        """The first plan's start: the gait's own (`trajopt.gaits.default_guess`), or the
        solver's choice for a problem without a gait."""
        return "auto" if self.gait is None else default_guess(self.model.name, self.gait)

    def adopt(self, plan: Trajectory, t: float = 0.0, wall_time: float = 0.0) -> None:
        """Start over with `plan` (solved elsewhere, e.g. by `reset` in a solver process) as the
        current plan from time `t` [s]: failures, mode, statistics and the previous plan are
        cleared, as by `reset`."""
        if plan.horizon != self.problem.horizon:
            raise ValueError(
                f"plan has {plan.horizon} knots; this MPC's horizon has {self.problem.horizon}"
            )
        self.failures = 0
        self.mode = "mpc"
        self.stats = MPCStats()
        self.plan, self._previous = None, None
        timing = (
            cycle_timing(wall_time, plan.meta.get("timing"), plan.meta.get("linearize_parts"))
            if wall_time > 0
            else None
        )
        self._accept(plan, t, wall_time, shift=0, timing=timing)

    def update(self, state: State, t: float) -> np.ndarray:
        """One receding-horizon cycle at time `t` [s] from the measured `state`; returns the
        joint PD targets `(nu,)` to apply until the next cycle."""
        if self.plan is None:
            return self.reset(state, t)
        self.commit(self.plan_cycle(state, t))
        return self.last_targets.copy()

    def plan_cycle(self, state: State, t: float, lookahead: float = 0.0) -> CycleOutcome:
        """The solve of one cycle (`update` = `commit(plan_cycle(...))`), without changing the
        controller: a real-time caller runs it in a solver thread while the current plan
        keeps serving `targets_at`, then commits the outcome.

        `lookahead` [s] (rounded to whole sub-steps of the planning model, `dt / substeps`)
        compensates the solve's own latency: the plan is solved not from the measured `state` at
        `t` but from the state the planning model predicts at `t + lookahead` under the current
        plan's targets (`predict`), and starts there (its time origin is `t + lookahead`; until
        then `targets_at` keeps serving the current plan, whose targets the prediction assumed).
        With a solve that takes about `lookahead`, the new plan then starts where the robot is
        when it arrives instead of in its past."""
        if self.plan is None:
            raise RuntimeError("plan_cycle needs a first plan: call reset(state) first")
        if not lookahead >= 0:
            raise ValueError(f"lookahead must be >= 0 [s], got {lookahead}")
        start = time.perf_counter()
        u_prev = None
        if self.mode != "stand" and lookahead > 0:
            state, t, u_prev = self.predict(state, t, lookahead)
        shift = max(int(round((t - self.plan_time) / self.dt)), 0)
        if self.mode == "stand":
            return CycleOutcome(t, time.perf_counter() - start, shift, None, None, "stand")
        warm = self.plan.shifted(shift)
        problem = self._problem_at(state, t, u_prev)
        try:
            plan = solve(
                problem,
                init=warm,
                max_iterations=self.iterations,
                time_budget=self.time_budget,
                verbose=False,
                linearize_threads=self.linearize_threads,
            )
            failed = (
                plan.status in FAILED_STATUSES
                or not np.isfinite(plan.cost)
                or not np.all(np.isfinite(plan.u))
            )
        except (FloatingPointError, np.linalg.LinAlgError):
            failed, plan = True, None
        status = "error" if plan is None else plan.status
        wall = time.perf_counter() - start
        meta = {} if plan is None else plan.meta
        timing = cycle_timing(wall, meta.get("timing"), meta.get("linearize_parts"))
        return CycleOutcome(t, wall, shift, None if failed else plan, warm, status, timing)

    def predict(self, state: State, t: float, lookahead: float):
        """The planning model's prediction of the robot `lookahead` [s] ahead, rounded to whole
        sub-steps of `h = dt / substeps`: `n = round(lookahead / h)`.

        From `state` at `t` [s], each sub-step `j < n` applies the current plan's targets at
        `t + j h` (`targets_at` without feedback: what the robot receives until a new plan
        arrives) through one contact step of the planning model with its PD actuator (a knot of
        `trajopt.problem.transition` is `substeps` of these). Returns
        `(State, t + n h, u_prev)`: the predicted state, its time, and the last targets applied
        on the way (the control-rate residual's previous control; the current `last_targets`
        when `n = 0`). Does not change the controller."""
        if self.plan is None:
            raise RuntimeError("predict needs a plan: call reset(state) first")
        h = self.dt / self.problem.substeps
        n = max(int(round(lookahead / h)), 0)
        x = P.initial_knot_state(self.model, state, self.last_targets, host=True)
        if n == 0:
            return State(x.q, x.v), t, x.u_prev
        # one call for the n sub-steps, the targets padded to a fixed length (a lookahead of
        # another length does not compile again mid-run)
        targets = np.zeros((max(n, self.problem.horizon * self.problem.substeps), self.model.nu))
        targets[:n] = [self._plan_targets(t + j * h) for j in range(n)]
        x = self._substeps(self.problem.data, x, targets, n)
        return State(np.asarray(x.q), np.asarray(x.v)), t + n * h, targets[n - 1].copy()

    def commit(self, outcome: CycleOutcome) -> None:
        """Make a cycle's outcome the current plan (see the module docstring's fallbacks)."""
        o = outcome
        if o.status == "stand":
            self._record(o.t, o.wall_time, "stand", 0, float("nan"), o.shift)
            self.last_targets = self.stand_targets.copy()
            return
        if o.plan is not None:
            self.failures = 0
            self._accept(o.plan, o.t, o.wall_time, o.shift, o.timing)
            return
        # keep the previous plan, shifted; after max_failures, stand
        self.failures += 1
        self._previous = (self.plan, self.plan_time)
        self.plan, self.plan_time = o.warm, o.t
        self.mode = "stand" if self.failures >= self.max_failures else "fallback"
        self.last_targets = (
            self.stand_targets.copy() if self.mode == "stand" else np.asarray(o.warm.u[0]).copy()
        )
        self._record(o.t, o.wall_time, o.status, 0, float("nan"), o.shift, o.timing)

    def targets_at(self, t: float, state: State | None = None) -> np.ndarray:
        """The current plan's PD targets `(nu,)` for time `t` [s] without replanning (the knot
        that contains `t`, the last one beyond the horizon); the stand targets when standing.

        With the measured `state`, the plan's Riccati feedback is added (FDDP's local control
        law of its last step, `Trajectory.feedback`):

            u = u_k + clip(K_k (x (-) x_k), -feedback_limit, feedback_limit)

        with `x = (q, v, u_prev)` the measured state and the last targets, `x_k` the plan's knot
        state, `(-)` the tangent difference (`trajopt.problem.local`). Between two solves this
        closes the loop at the caller's rate, not the solver's."""
        if self.plan is None or self.mode == "stand":
            return self.stand_targets.copy()
        u = self._plan_targets(t)
        k = self._knot_at(t)
        if state is not None and self.plan.feedback is not None and k is not None:
            u = u + self._feedback_term(k, state)
        self.last_targets = u
        return self.last_targets.copy()

    def _knot_at(self, t: float) -> int | None:
        """The current plan's knot containing `t` (the last one beyond the horizon), or None
        before the plan's start when an earlier plan serves `t`."""
        if t < self.plan_time - 1e-9 and self._previous is not None:
            return None
        k = int(np.floor((t - self.plan_time) / self.dt + 1e-9))
        return min(max(k, 0), self.plan.horizon - 1)

    def _plan_targets(self, t: float) -> np.ndarray:
        """The plan's targets `(nu,)` at `t`: the current plan's knot containing `t`; before its
        start (a plan solved with a lookahead), the previous plan's."""
        k = self._knot_at(t)
        if k is not None:
            return np.asarray(self.plan.u[k], dtype=float).copy()
        plan, origin = self._previous
        j = int(np.floor((t - origin) / self.dt + 1e-9))
        return np.asarray(plan.u[min(max(j, 0), plan.horizon - 1)], dtype=float).copy()

    def _feedback_term(self, k: int, state: State) -> np.ndarray:
        """`clip(K_k (x (-) x_k))` `(nu,)` (see `targets_at`)."""
        plan = self.plan
        u_prev_k = plan.u[k - 1] if k > 0 else plan.u_prev0
        if u_prev_k is None:
            u_prev_k = self.last_targets
        x_k = P.KnotState(plan.q[k], plan.v[k], u_prev_k)
        x = P.KnotState(np.asarray(state.q), np.asarray(state.v), self.last_targets)
        dx = np.asarray(self._local(x_k, x))
        correction = np.asarray(plan.feedback[k]) @ dx
        return np.clip(correction, -self.feedback_limit, self.feedback_limit)

    def _accept(self, plan: Trajectory, t: float, wall: float, shift: int,
                timing: dict | None = None) -> None:  # fmt: skip
        if self.plan is not None and self.mode != "stand":
            self._previous = (self.plan, self.plan_time)
        self.plan, self.plan_time, self.mode = plan, t, "mpc"
        self.last_targets = np.asarray(plan.u[0], dtype=float).copy()
        self._record(t, wall, plan.status, plan.iterations, float(plan.cost), shift, timing)

    def _record(self, t, wall, status, iterations, cost, shift, timing=None) -> None:
        self.stats.cycles.append(
            CycleRecord(t, wall, status, iterations, cost, shift, self.mode, timing)
        )


def _knot_transitions(problem: P.Problem):
    """`(data, x, us (N, nu), n) -> x_n`: the first `n <= N` knots of `problem`'s planning
    model from `x`, the `i`-th with the targets `us[i]` (`MPC.predict`: one call for all of
    them; `n` is traced, so any `n` runs the same compiled loop)."""

    def knots(data, x, us, n):
        def knot(i, x):
            return P.transition(problem, data, x, us[i])[0]

        return jax.lax.fori_loop(0, n, knot, x)

    return knots
