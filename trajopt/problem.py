"""Trajectory optimisation problems: knot dynamics, named weighted cost terms, references.

A problem has `T` knots of duration `dt_knot = substeps * params.dt`. The optimiser's state at a
knot is `KnotState(q, v, u_prev)`: the robot state plus the previous control (so the control
rate is a cost on `(x, u)`). Controls `u (nu,)` are either joint PD targets [rad] ("pd", the
deployable form: `tau = clip(Kp (u - q_j) - Kd qd)`, re-evaluated every simulation sub-step) or
joint torques ("torque": `tau = tau_max tanh(u / tau_max)`, so torque bounds always hold).

Costs are Gauss-Newton residuals, Crocoddyl-style: `cost = sum_terms 0.5 w_term |r_term|^2`.
Running residuals depend on the knot state, the control, the contact forces of the knot's
transition and the knot's reference; the terminal residual on the final state. Every term is
reported separately (`term_costs`) so a user sees what dominates.

    term                    residual (per knot)
    base_linear_velocity    v_base,xy - v_ref,xy               (base frame)
    base_angular_velocity   omega_base - (0, 0, yaw_rate_ref)  (base frame)
    base_height             z_base - h_ref
    base_orientation        (R^T e_z)_xy                         roll and pitch
    foot_clearance          (1 - stance_i) (gap_i - h_swing,i)  swing feet follow a height profile
    foot_slip               stance_i v_foot,i,xy                 stance feet do not slide
    gait_contact            stance_i gap_i                       stance feet on the ground (soft)
    torque                  tau / tau_max
    torque_limits           max(|tau| / tau_max - 0.95, 0)      keeps the motor torque in bounds
    control_rate            (u - u_prev) / dt_knot
    joint_posture           q_j - q_j,ref
    joint_limits            max(q_j - q_hi, 0) + max(q_lo - q_j, 0)
    contact_force           (f_i - stance_i m g e_z / n_stance) / (m g)    (transition forces)
    terminal_state          base height, velocity and orientation at the final knot

The gait reference only shapes the contact sequence: contacts come out of the smooth contact
model (contact-implicit), and every term above is soft.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np

from contact import ContactModel, StepParams
from contact.plant import JointPD, delivered_torque, peak_torque, simulate_pd
from dynamics.actuator import pd_torque
from dynamics.configuration import State, difference, integrate
from dynamics.model import Model

from . import built_in_terms
from .terms import (
    KnotContext,
    Term,
    check_names,
    check_output,
    check_target,
    context,
    target_rows,
)

RUNNING_TERMS = tuple(term.name for term in built_in_terms.RUNNING)
TERMINAL_TERMS = tuple(term.name for term in built_in_terms.TERMINAL)
COST_TERMS = RUNNING_TERMS + TERMINAL_TERMS
ControlKind = Literal["pd", "torque"]
CONTROL_KINDS: tuple[ControlKind, ...] = ("pd", "torque")
# `Problem.derivatives`: those of `contact.step`, and "compiled" (the implicit ones in C)
ProblemDerivatives = Literal["unrolled", "implicit", "compiled"]
DERIVATIVES: tuple[ProblemDerivatives, ...] = ("unrolled", "implicit", "compiled")
# the contact models of the CasADi model (`trajopt.engine.casadi_model`), and so of "compiled"
CASADI_CONTACTS: tuple[ContactModel, ...] = ("hard", "smooth")
# The planners' impulse solve sweeps until its Coulomb fixed-point residual is at most
# CONTACT_TOLERANCE [m/s] (`contact.coulomb.solve_impulses(tolerance=)`), at most MAX_SWEEPS
# sweeps; `Problem(contact_tolerance=None, num_sweeps=n)` is the paper's fixed-sweep model.
CONTACT_TOLERANCE = 1e-4
MAX_SWEEPS = 2000


@jax.tree_util.register_dataclass
@dataclass
class KnotState:
    """Optimiser state at a knot: `q (nq,)`, `v (nv,)`, previous control `u_prev (nu,)`."""

    q: jax.Array
    v: jax.Array
    u_prev: jax.Array


@jax.tree_util.register_dataclass
@dataclass
class Reference:
    """Per-knot references, leading axis `T + 1` (the last row is the terminal reference).

    base_velocity (T+1, 3): `[v_x, v_y, yaw_rate]` in the base frame [m/s, rad/s].
    base_height (T+1,): base height above the terrain at the base's xy [m].
    stance (T+1, nfeet): 1 where a foot should be in contact, 0 in swing.
    swing_height (T+1, nfeet): desired foot clearance [m] (used where stance = 0).
    joint_posture (T+1, nu): nominal joint positions [rad].
    """

    base_velocity: jax.Array
    base_height: jax.Array
    stance: jax.Array
    swing_height: jax.Array
    joint_posture: jax.Array


@jax.tree_util.register_dataclass
@dataclass
class ProblemData:
    """Everything of a problem that may change without recompiling (all traced).

    x0: initial `KnotState`; params: contact `StepParams`; weights: `{term: weight}` (the
    fixed terms' and the problem's own `terms`'); reference: `Reference`; gains: `(kp, kd)` of
    the PD actuator; targets: `{term name: (T + 1, ...) rows}` of the problem's own terms that
    have a target (`trajopt.terms`).
    """

    x0: KnotState
    params: StepParams
    weights: dict
    reference: Reference
    gains: jax.Array
    targets: dict = dataclasses.field(default_factory=dict)


@dataclass(frozen=True, eq=False)
class Problem:
    """A trajectory optimisation problem: static structure + traced `data`.

    model: the robot. horizon: number of knots T (>= 1). substeps: simulation steps per knot.
    contact: "hard" | "smooth" | "penalty". control: "pd" | "torque".
    contact_tolerance: the impulse solve of every step sweeps until its Coulomb fixed-point
    residual is at most this [m/s] (default `CONTACT_TOLERANCE`), at most `num_sweeps` sweeps
    (default `MAX_SWEEPS`): the plan rests on converged contact, and the implicit derivatives
    are the computed step's. None: the paper's model, exactly `num_sweeps` sweeps (the policy
    trainer's; the IPOPT backend's, which differentiates through them).
    name: e.g. "trot"; robot: the robot's name. data: `ProblemData`. terms: the problem's own
    residual terms (`trajopt.terms.Term`, added by `with_terms`) next to the fixed ones.
    derivatives: how the solvers' Jacobians differentiate the impulse solve (`contact.step`):
    "implicit" (default: at the solution, the derivative of the exact Coulomb fixed point,
    which a converged solve's computed step has; with the paper's fixed sweeps it differs from
    the computed step's by a few per cent at 10 sweeps, BENCHMARKS.md "Derivatives through
    contact"), "unrolled" (through the sweeps, the derivative of the computed step; forward
    mode through a converged solve's loop, dearer), or "compiled": the implicit derivatives,
    evaluated for FDDP's knot linearisation by C code that CasADi generates
    (`trajopt.engine.compiled_knots`: hard and smooth contact on plane terrains; a C compiler at the
    first use). The dynamics themselves are the same either way.
    """

    model: Model
    data: ProblemData
    horizon: int
    substeps: int = 1
    contact: ContactModel = "smooth"
    num_sweeps: int = MAX_SWEEPS
    control: ControlKind = "pd"
    name: str = "custom"
    derivatives: ProblemDerivatives = "implicit"
    terms: tuple = ()
    contact_tolerance: float | None = CONTACT_TOLERANCE

    def __post_init__(self):
        validate(self)

    @property
    def dt_knot(self) -> float:
        return float(self.data.params.dt) * self.substeps

    @property
    def nu(self) -> int:
        return self.model.nu

    @property
    def nx(self) -> int:
        """Tangent dimension of a `KnotState`: `2 nv + nu`."""
        return 2 * self.model.nv + self.model.nu

    def replace(self, **changes) -> Problem:
        return dataclasses.replace(self, **changes)

    def replace_data(self, **changes) -> Problem:
        return dataclasses.replace(self, data=dataclasses.replace(self.data, **changes))

    def with_terms(self, *terms: Term) -> Problem:
        """This problem with `terms` added (`trajopt.terms`): their weights go to
        `data.weights`, their targets to `data.targets`. Checked before any solve: names,
        targets, and each function evaluated once at the initial state."""
        weights = dict(self.data.weights)
        targets = dict(self.data.targets)
        for term in terms:
            weights[term.name] = jnp.asarray(float(term.weight))
            rows = target_rows(term, self.horizon)
            if rows is not None:
                targets[term.name] = rows
        data = dataclasses.replace(self.data, weights=weights, targets=targets)
        return dataclasses.replace(self, data=data, terms=tuple(self.terms) + tuple(terms))

    def with_target(self, name: str, target) -> Problem:
        """This problem with term `name`'s target replaced: one target of the term's shape
        (every knot) or `(T + 1, ...)` (one per knot). Traced: the compiled functions serve."""
        term = self.term(name)
        rows = check_target(term, target, self.horizon, self.data.targets.get(name))
        return self.replace_data(targets={**self.data.targets, name: rows})

    def term(self, name: str) -> Term:
        """The problem's own term `name`."""
        for term in self.terms:
            if term.name == name:
                return term
        raise KeyError(f"no term {name!r}; the problem's own terms are "
                       f"{[t.name for t in self.terms]}")  # fmt: skip


def validate(problem: Problem) -> None:
    """Clear errors for inputs that cannot be solved."""
    from contact import CONTACT_MODELS

    if not isinstance(problem.horizon, int | np.integer) or problem.horizon < 1:
        raise ValueError(f"horizon must be a positive number of knots, got {problem.horizon!r}")
    if not isinstance(problem.substeps, int | np.integer) or problem.substeps < 1:
        raise ValueError(f"substeps must be a positive integer, got {problem.substeps!r}")
    if problem.contact not in CONTACT_MODELS:
        raise ValueError(f"contact must be one of {CONTACT_MODELS}, got {problem.contact!r}")
    if not isinstance(problem.num_sweeps, int | np.integer) or problem.num_sweeps < 1:
        raise ValueError(f"num_sweeps must be a positive integer, got {problem.num_sweeps!r}")
    tolerance = problem.contact_tolerance
    if tolerance is not None and not (isinstance(tolerance, int | float) and 0 < tolerance < 1):
        raise ValueError(
            f"contact_tolerance must be None or a residual in m/s between 0 and 1, "
            f"got {tolerance!r}"
        )
    if problem.derivatives not in DERIVATIVES:
        raise ValueError(f"derivatives must be one of {DERIVATIVES}, got {problem.derivatives!r}")
    if problem.derivatives == "compiled":
        from contact.terrain import Plane

        if problem.contact not in CASADI_CONTACTS:
            raise ValueError(
                f"derivatives='compiled' supports the hard and smooth contact models, "
                f"got contact={problem.contact!r}"
            )
        terrain = problem.data.params.terrain
        if not isinstance(terrain, Plane):
            raise ValueError(
                f"derivatives='compiled' supports plane terrains, got {type(terrain).__name__}"
            )
    if problem.control not in CONTROL_KINDS:
        raise ValueError(f"control must be one of {CONTROL_KINDS}, got {problem.control!r}")
    validate_terms(problem)
    own = {t.name for t in problem.terms}
    unknown = set(problem.data.weights) - set(COST_TERMS) - own
    if unknown:
        raise ValueError(f"unknown cost terms {sorted(unknown)}; known terms: {COST_TERMS}"
                         + (f" and the problem's own {sorted(own)}" if own else ""))
    for name, w in jax.device_get(problem.data.weights).items():  # one transfer
        if not np.isfinite(w) or w < 0:
            raise ValueError(f"weight of {name!r} must be finite and >= 0, got {w}")
    x0 = problem.data.x0
    model = problem.model
    shapes = {"q": (model.nq,), "v": (model.nv,), "u_prev": (model.nu,)}
    for field, shape in shapes.items():
        value = np.asarray(getattr(x0, field))
        if value.shape != shape:
            raise ValueError(f"initial state {field} must have shape {shape}, got {value.shape}")
        if not np.all(np.isfinite(value)):
            raise ValueError(f"initial state {field} contains NaN or inf: {value}")
    ref = problem.data.reference
    if np.asarray(ref.base_velocity).shape != (problem.horizon + 1, 3):
        raise ValueError(
            f"reference.base_velocity must have shape ({problem.horizon + 1}, 3), "
            f"got {np.asarray(ref.base_velocity).shape}"
        )
    dt = float(problem.data.params.dt)
    if not dt > 0:
        raise ValueError(f"params.dt must be positive, got {dt}")
    nvb, nqb = model.nv - model.nu, model.nq - model.nu
    effort = np.asarray(model.effort_limit)[nvb:]
    if not np.all(effort > 0):
        raise ValueError(
            f"infeasible torque bounds: effort limits must be > 0 for every actuated joint, got "
            f"{dict(zip(model.actuated_joint_names, effort.tolist()))}"
        )
    lo = np.asarray(model.lower_position_limit)[nqb:]
    hi = np.asarray(model.upper_position_limit)[nqb:]
    bad = [n for n, a, b in zip(model.actuated_joint_names, lo, hi) if a > b]
    if bad:
        raise ValueError(f"infeasible joint bounds (lower > upper) for joints {bad}")


def validate_terms(problem: Problem) -> None:
    """The problem's own terms (`trajopt.terms`): unique names, none a fixed term's; a target
    row set for exactly the terms made with a target, of `(T + 1, ...)` rows; a backend that
    runs them; and each function evaluated once at the initial state (a float vector, finite;
    once per term and problem structure, not at every `replace`)."""
    terms = tuple(problem.terms)
    if not terms:
        return
    check_names(terms, COST_TERMS)
    names = {t.name for t in terms}
    targets = problem.data.targets
    stray = sorted(set(targets) - names)
    if stray:
        raise ValueError(f"data.targets has {stray}, which are none of the problem's terms")
    for term in terms:
        has = term.name in targets
        if has != (term.target is not None):
            raise ValueError(f"term {term.name!r}: data.targets must hold a target for it "
                             f"exactly when it was made with one")  # fmt: skip
        if has and np.shape(targets[term.name])[:1] != (problem.horizon + 1,):
            raise ValueError(f"term {term.name!r}: data.targets must have "
                             f"{problem.horizon + 1} rows (one per knot), got shape "
                             f"{np.shape(targets[term.name])}")  # fmt: skip
        if term.name not in problem.data.weights:
            raise ValueError(f"term {term.name!r} has no weight in data.weights")
    for term in terms:
        _check_term_output(term, problem)


_CHECKED_TERMS: dict = {}  # (term, model name, horizon) -> residual size


def _check_term_output(term: Term, problem: Problem):
    key = (term, problem.model.name, problem.horizon)
    if key in _CHECKED_TERMS:
        return _CHECKED_TERMS[key]
    model, data = problem.model, problem.data
    x0 = data.x0
    t = problem.horizon if term.terminal else 0
    zero_forces = jnp.zeros((model.nfeet, 3), dtype=x0.v.dtype)
    zero_torques = jnp.zeros(model.nu, dtype=x0.v.dtype)
    rows = data.targets.get(term.name)
    ctx = knot_context(problem, data, x0, x0.u_prev, zero_forces, zero_torques, t, term.terminal)
    ctx = ctx.with_target(None if rows is None else jnp.asarray(rows)[t])
    _CHECKED_TERMS[key] = size = check_output(term, ctx)
    return size


def knot_context(problem: Problem, data: ProblemData, x: KnotState, u, forces, torques, t,
                 terminal: bool, ref_t=None) -> KnotContext:  # fmt: skip
    """The JAX `KnotContext` of knot `t`: its state, control, transition forces and torques, gait
    reference row `ref_t` (default knot t's) and terrain (targets are set per term by
    `evaluate_terms`)."""
    ref_t = reference_at(data.reference, t) if ref_t is None else ref_t
    return context(problem.model, x, u, forces, torques, t, problem.dt_knot, None, terminal,
                   ref_t, data.params.terrain)  # fmt: skip


def evaluate_terms(terms, ctx: KnotContext, targets: dict) -> dict:
    """`{name: activated residual}` of `terms` at the knot of `ctx`, each reading its own row of
    `targets` (`{name: (T + 1, ...) rows}`, indexed at `ctx.t`)."""
    out = {}
    for term in terms:
        rows = targets.get(term.name)
        out[term.name] = term.evaluate(ctx.with_target(None if rows is None else rows[ctx.t]))
    return out


# ------------------------------------------------------------------------------ knot dynamics
def joint_command(problem: Problem, data: ProblemData, u) -> JointPD:
    """The plant's held joint command for control `u (nu,)` (see module docstring): the PD
    toward `u` with the problem's gains, or (`control="torque"`) the feed-forward torque
    `tau_max tanh(u / tau_max)` with no feedback."""
    model = problem.model
    if problem.control == "pd":
        return JointPD(u, data.gains[0], data.gains[1])
    limit = jnp.asarray(model.effort_limit)[model.nv - model.nu :]
    return JointPD(jnp.zeros_like(u), 0.0, 0.0, 0.0, limit * jnp.tanh(u / limit))


def joint_torque(problem: Problem, data: ProblemData, state: State, u):
    """Actuator torques `(nu,)` for control `u` at `state` (see module docstring)."""
    c = joint_command(problem, data, u)
    return pd_torque(problem.model, state, c.q_target, c.kp, c.kd, c.qd_target, c.tau_ff)


def transition(problem: Problem, data: ProblemData, x: KnotState, u):
    """One knot: `substeps` simulation steps under control `u`.

    Returns `(x_next, forces (nfeet, 3), torques (nu,))`: the next knot state (with
    `u_prev = u`), the contact forces averaged over the knot [N, world], and the joint torque
    of the sub-step with the largest magnitude per joint (actuator torque plus the implicit
    joint damping `-d qd+` of `params.joint_damping`, i.e. what the motor delivers).
    """
    return transition_with_residual(problem, data, x, u)[:3]


def step_derivatives(problem: Problem) -> str:
    """The `contact.step` derivatives of the problem's transition: "compiled" is "implicit"
    (the same derivative, which `trajopt.engine.compiled_knots` evaluates in C for FDDP)."""
    return "implicit" if problem.derivatives == "compiled" else problem.derivatives


def transition_with_residual(problem: Problem, data: ProblemData, x: KnotState, u):
    """`transition`'s `(x_next, forces, torques)` and the largest Coulomb fixed-point residual
    of the knot's impulse solves [m/s] (`contact.StepInfo.residual`, max over the substeps;
    0 for penalty contact). A residual far from 0 says `problem.num_sweeps` did not converge the
    contact solve at this knot: the knot's dynamics, and the derivatives taken through its
    sweeps, are those of an approximation of the Coulomb fixed point (with the step's implicit
    derivatives they would be of the fixed point instead: BENCHMARKS.md, "Derivatives through
    contact")."""

    def observe(step):  # what the knot reports of each sub-step
        torque = delivered_torque(problem.model, data.params, step)
        return step.info.force, torque, step.info.residual

    final, (forces, taus, residuals) = simulate_pd(
        problem.model,
        data.params,
        State(x.q, x.v),
        joint_command(problem, data, u),
        problem.substeps,
        observe=observe,
        contact=problem.contact,
        num_sweeps=problem.num_sweeps,
        tolerance=problem.contact_tolerance,
        derivatives=step_derivatives(problem),
        # the solvers take whole Jacobians of this (jacfwd over a knot's state and control)
        rigid_body_derivatives="jacobian",
    )
    return KnotState(final.q, final.v, u), jnp.mean(forces, axis=0), peak_torque(taus), jnp.max(
        residuals
    )


def retract(problem: Problem, x: KnotState, dx):
    """`x (+) dx` for a tangent vector `dx = [dq, dv, du_prev] (nx,)`."""
    nv = problem.model.nv
    return KnotState(
        integrate(problem.model, x.q, dx[:nv]), x.v + dx[nv : 2 * nv], x.u_prev + dx[2 * nv :]
    )


def local(problem: Problem, x: KnotState, y: KnotState):
    """`y (-) x (nx,)`: the tangent vector from `x` to `y`."""
    return jnp.concatenate([difference(problem.model, x.q, y.q), y.v - x.v, y.u_prev - x.u_prev])


# ------------------------------------------------------------------------------ residuals
def running_residuals(
    problem: Problem, data: ProblemData, x: KnotState, u, forces, torques, ref_t=None, t=0
) -> dict:
    """`{term: residual vector}` at knot `t` (unweighted, activated): the built-in running terms
    (`trajopt.built_in_terms`) and the problem's own (`problem.terms`), all through
    `evaluate_terms`; `ref_t` is the knot's reference row (default knot t's)."""
    ctx = knot_context(problem, data, x, u, forces, torques, t, False, ref_t)
    own = tuple(term for term in problem.terms if not term.terminal)
    return evaluate_terms(built_in_terms.RUNNING + own, ctx, data.targets)


def terminal_residuals(problem: Problem, data: ProblemData, x: KnotState, ref_t=None) -> dict:
    """`{term: residual vector}` at the terminal knot T: the built-in `terminal_state` and the
    problem's own terminal terms (control `u_prev`, no forces or torques); `ref_t` is the
    reference row (default knot T's)."""
    model = problem.model
    forces = jnp.zeros((model.nfeet, 3), dtype=x.v.dtype)
    torques = jnp.zeros(model.nu, dtype=x.v.dtype)
    ctx = knot_context(problem, data, x, x.u_prev, forces, torques, problem.horizon, True, ref_t)
    own = tuple(term for term in problem.terms if term.terminal)
    return evaluate_terms(built_in_terms.TERMINAL + own, ctx, data.targets)


def weighted(residuals: dict, weights: dict) -> jax.Array:
    """Stack `sqrt(w) r` over the terms present in `weights` (sorted names, fixed layout)."""
    parts = [jnp.sqrt(weights[k]) * residuals[k] for k in sorted(weights) if k in residuals]
    return jnp.concatenate(parts) if parts else jnp.zeros(0)


def term_costs(residuals: dict, weights: dict) -> dict:
    """`{term: 0.5 w |r|^2}` for the weighted terms."""
    return {k: 0.5 * weights[k] * jnp.sum(residuals[k] ** 2) for k in weights if k in residuals}


def reference_at(reference: Reference, t):
    return jax.tree_util.tree_map(lambda a: a[t], reference)


def initial_knot_state(model: Model, state: State, u_prev=None, host: bool = False) -> KnotState:
    """A `KnotState` from a robot `State`; `u_prev` defaults to the standing joint targets.
    `host`: NumPy arrays (float copies) rather than JAX ones (a jitted function or the generated
    C takes them as they are: an MPC cycle skips a transfer per array)."""
    if u_prev is None:
        u_prev = np.asarray(model.q_standing)[model.nq - model.nu :]
    if host:
        return KnotState(*(np.array(a, dtype=float) for a in (state.q, state.v, u_prev)))
    return KnotState(jnp.asarray(state.q), jnp.asarray(state.v), jnp.asarray(u_prev))
