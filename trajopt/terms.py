"""Residual terms of a user's own: a name, a weight and a pure function of the knot's context.

    import jax.numpy as jnp
    import trajopt
    from trajopt.terms import Term

    def base_xy(ctx):                                   # ctx: KnotContext
        return ctx.q[0:2] - ctx.target                  # (2,) [m]

    problem = trajopt.make_problem("go2", "trot", 0.5, duration=1.0, derivatives="implicit")
    problem = problem.with_terms(Term("landing", base_xy, weight=50.0, target=[0.5, 0.0],
                                      terminal=True))
    traj = trajopt.solve(problem)
    problem = problem.with_target("landing", [0.6, 0.0])   # traced: no recompilation

A term adds `0.5 w |a(r)|^2` to the cost, summed over the knots where it is evaluated: every
running knot `t = 0 .. T-1` (the knot's state, its control and the forces and torques of its
transition), or the terminal knot `T` alone (`terminal=True`: the state only). `a` is the
term's activation in residual form, so the solvers keep their Gauss-Newton model:

    Quadratic()              a(r) = r
    WeightedQuadratic(w)     a(r) = sqrt(w) * r               (w (m,) >= 0, per component)
    Bounds(lower, upper)     a(r) = max(r - upper, 0) + min(r - lower, 0)
                             (zero inside the box: cost 0.5 w dist(r, box)^2, a C1 barrier)

The term's `target` (an array of any shape, one for every knot or a `(T + 1, ...)` array of
one per knot) lives in `ProblemData.targets[name]`, traced like the weights: a new target (a
new landing point, a moved stone) reuses the compiled functions. The function reads the row of
its knot as `ctx.target`.

`KnotContext` is what a function may read. Everything is a JAX array of the knot, traced: the
function must be pure JAX (no Python branching on values, no NumPy on them). Kinematics are
computed on first use, once per knot (`ctx.kinematics`, `ctx.frame_placement(frame)`, ...).

The terms run wherever the solvers evaluate the knot model in JAX: FDDP (single and multiple
shooting) with `derivatives="unrolled"` or `"implicit"`, L-BFGS, the batched solver and the
MPC. `derivatives="compiled"` and IPOPT evaluate the knot model in CasADi-generated code and do
not run user functions: a problem with terms refuses them, naming the terms
(`check_backend`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from dynamics import centroidal, kinematics, spatial
from dynamics.backend import JaxOps
from dynamics.model import Model


# --------------------------------------------------------------------------- activations
@dataclass(frozen=True)
class Quadratic:
    """`a(r) = r`: cost `0.5 w |r|^2`."""

    def __call__(self, r):
        return r

    def check(self, size: int, name: str) -> None:
        return None


@dataclass(frozen=True)
class WeightedQuadratic:
    """`a(r) = sqrt(w) r` with per-component weights `w (m,) >= 0`: cost `0.5 w_term sum w_i
    r_i^2`."""

    weights: tuple

    def __call__(self, r):
        return jnp.sqrt(jnp.asarray(self.weights, dtype=r.dtype)) * r

    def check(self, size: int, name: str) -> None:
        w = np.asarray(self.weights, dtype=float)
        if w.shape != (size,) or not np.all(np.isfinite(w)) or np.any(w < 0):
            raise ValueError(
                f"term {name!r}: WeightedQuadratic needs {size} finite weights >= 0 (one per "
                f"residual component), got {self.weights!r}"
            )


@dataclass(frozen=True)
class Bounds:
    """`a(r) = max(r - upper, 0) + min(r - lower, 0)`: zero inside `[lower, upper]` (scalars or
    `(m,)`; +-inf for a one-sided bound), cost `0.5 w dist(r, box)^2` outside (C1)."""

    lower: float | tuple = -np.inf
    upper: float | tuple = np.inf

    def __call__(self, r):
        lo = jnp.asarray(self.lower, dtype=r.dtype)
        hi = jnp.asarray(self.upper, dtype=r.dtype)
        return jnp.maximum(r - hi, 0.0) + jnp.minimum(r - lo, 0.0)

    def check(self, size: int, name: str) -> None:
        lo = np.broadcast_to(np.asarray(self.lower, dtype=float), (size,))
        hi = np.broadcast_to(np.asarray(self.upper, dtype=float), (size,))
        if np.any(np.isnan(lo)) or np.any(np.isnan(hi)) or np.any(lo > hi):
            raise ValueError(
                f"term {name!r}: Bounds needs lower <= upper, got lower={self.lower!r}, "
                f"upper={self.upper!r}"
            )


Activation = Quadratic | WeightedQuadratic | Bounds


# --------------------------------------------------------------------------- the context
@dataclass(frozen=True, eq=False)
class KnotContext:
    """What a term's function reads at one knot (module docstring).

    model: the robot. q (nq,), v (nv,): the knot's state (Pinocchio's conventions: base linear
    and angular velocity in the base frame). u (nu,): the knot's control (PD targets [rad] or
    torques); at the terminal knot the last control. u_prev (nu,): the previous control.
    forces (nfeet, 3): the transition's average contact forces per foot [N] (contact frame:
    tangents then normal); zeros at the terminal knot. torques (nu,): the transition's peak
    joint torques [N m]; zeros at the terminal knot. t: the knot's index (traced int), time =
    t dt_knot [s]. target: the term's target row at this knot, or None. terminal: whether this
    is the terminal knot (static).
    """

    model: Model
    q: jax.Array
    v: jax.Array
    u: jax.Array
    u_prev: jax.Array
    forces: jax.Array
    torques: jax.Array
    t: jax.Array
    time: jax.Array
    target: jax.Array | None
    terminal: bool

    @functools.cached_property
    def ops(self) -> JaxOps:
        return JaxOps(self.q.dtype)

    @functools.cached_property
    def kinematics(self) -> kinematics.Kinematics:
        """Every joint's placement (`dynamics.kinematics.forward_kinematics`), once per knot."""
        return kinematics.forward_kinematics(self.ops, self.model, self.q)

    @functools.cached_property
    def joint_velocities(self) -> list:
        """Every joint's spatial velocity in its own frame (`dynamics.kinematics`)."""
        return kinematics.joint_velocities(self.ops, self.model, self.kinematics, self.v)

    def frame_placement(self, frame) -> tuple:
        """`(R (3, 3), p (3,))`: the world placement of `frame` (a name or an index)."""
        fid = self.model.frame_id(frame)
        return kinematics.frame_placement(self.ops, self.model, self.kinematics, fid)

    def frame_velocity(self, frame, reference="local_world_aligned"):
        """`(6,)` `[linear; angular]` velocity of `frame` in `reference` ("local",
        "local_world_aligned": the frame origin's velocity in world axes, "world")."""
        fid = self.model.frame_id(frame)
        return kinematics.frame_velocity(
            self.ops, self.model, self.kinematics, self.joint_velocities, fid, reference
        )

    def center_of_mass(self):
        """`(3,)` world position of the centre of mass [m]."""
        return centroidal.center_of_mass(self.ops, self.model, self.kinematics)

    def centroidal_momentum(self):
        """`(6,)` `h_G = [linear; angular about the com]`, world axes (Pinocchio's `hg`)."""
        return centroidal.centroidal_momentum(
            self.ops, self.model, self.kinematics, self.joint_velocities
        )

    def base_rotation(self):
        """`(3, 3)` the base's world rotation, from `q[3:7]` (`[x, y, z, w]`)."""
        return spatial.quat_to_rotation(self.ops, self.q[3:7])


# --------------------------------------------------------------------------- terms
@dataclass(frozen=True)
class Term:
    """A residual term (module docstring).

    name: unique among the problem's terms and its built-in ones. residual: `ctx -> (m,)`
    float array, pure JAX. weight: `w >= 0` (traced: `ProblemData.weights[name]`). target:
    real numbers of any shape, or None (the function gets `ctx.target = None`); with
    `per_knot`, `(T + 1, ...)`: one row per knot. terminal: evaluated at the terminal knot
    only, else at every running knot. activation: `Quadratic()`, `WeightedQuadratic(w)` or
    `Bounds(lo, hi)`.
    """

    name: str
    residual: Callable[[KnotContext], jax.Array]
    weight: float = 1.0
    target: object = None
    terminal: bool = False
    activation: Activation = Quadratic()
    per_knot: bool = False

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name.isidentifier():
            raise ValueError(f"a term's name must be an identifier string, got {self.name!r}")
        if not callable(self.residual):
            raise TypeError(f"term {self.name!r}: residual must be a function of a KnotContext, "
                            f"got {type(self.residual).__name__}")  # fmt: skip
        w = float(self.weight)
        if not np.isfinite(w) or w < 0:
            raise ValueError(f"term {self.name!r}: weight must be finite and >= 0, got {w}")
        if not isinstance(self.activation, Quadratic | WeightedQuadratic | Bounds):
            raise TypeError(f"term {self.name!r}: activation must be Quadratic, "
                            f"WeightedQuadratic or Bounds, got {self.activation!r}")  # fmt: skip

    def __hash__(self):  # the target may be an array: a term is its own identity
        return id(self)

    def __eq__(self, other):
        return self is other

    def evaluate(self, ctx: KnotContext) -> jax.Array:
        """`a(r(ctx))`, the activated residual `(m,)` (unweighted)."""
        return self.activation(jnp.asarray(self.residual(ctx)))


def target_rows(term: Term, horizon: int):
    """The term's target as `(T + 1, ...)` rows, or None without one: `per_knot` targets as
    they are (their leading axis must be `T + 1`), else the one target repeated. Errors name
    the term."""
    if term.target is None:
        return None
    value = np.asarray(term.target)
    if not np.issubdtype(value.dtype, np.number) or np.iscomplexobj(value):
        raise TypeError(f"term {term.name!r}: target must be real numbers, got {value.dtype}")
    if not np.all(np.isfinite(value)):
        raise ValueError(f"term {term.name!r}: target contains NaN or inf: {value}")
    value = np.asarray(value, dtype=float)
    if not term.per_knot:
        return jnp.broadcast_to(jnp.asarray(value), (horizon + 1,) + value.shape)
    if value.ndim == 0 or value.shape[0] != horizon + 1:
        raise ValueError(f"term {term.name!r}: a per-knot target's leading axis must be the "
                         f"{horizon + 1} knots, got shape {value.shape}")  # fmt: skip
    return jnp.asarray(value)


def check_target(term: Term, rows, horizon: int, previous=None):
    """A new target for `term` as `(T + 1, ...)` rows: one target of the shape the term was made
    with (repeated over the knots) or one per knot. Errors name the term and the shapes."""
    value = np.asarray(rows, dtype=float)
    if not np.all(np.isfinite(value)):
        raise ValueError(f"term {term.name!r}: target contains NaN or inf: {value}")
    if previous is None:
        raise ValueError(f"term {term.name!r} was made without a target")
    shape = tuple(previous.shape[1:])
    if value.shape == shape:
        return jnp.broadcast_to(jnp.asarray(value), (horizon + 1,) + shape)
    if value.shape == (horizon + 1,) + shape:
        return jnp.asarray(value)
    raise ValueError(
        f"term {term.name!r}: target must have shape {shape} (every knot) or "
        f"{(horizon + 1,) + shape} (one per knot), got {value.shape}"
    )


def context(model: Model, x, u, forces, torques, t, dt_knot: float, target_row,
            terminal: bool) -> KnotContext:  # fmt: skip
    """The `KnotContext` of one knot from the knot state `x` (`q`, `v`, `u_prev`)."""
    t = jnp.asarray(t)
    return KnotContext(model, x.q, x.v, u, x.u_prev, forces, torques, t, t * dt_knot,
                       target_row, terminal)  # fmt: skip


def check_names(terms: tuple, built_in: tuple) -> None:
    """Unique names, none of them in `built_in` (the problem's fixed terms)."""
    seen = set()
    for term in terms:
        if not isinstance(term, Term):
            raise TypeError(f"terms must be trajopt.terms.Term, got {type(term).__name__}")
        if term.name in built_in:
            raise ValueError(f"term {term.name!r}: the name of a built-in term; choose another")
        if term.name in seen:
            raise ValueError(f"duplicate term name {term.name!r}")
        seen.add(term.name)


def check_output(term: Term, ctx: KnotContext) -> int:
    """Evaluate `term` once at `ctx` (concrete arrays) and return its residual size; a clear
    error, naming the term, for a function that raises, returns a non-float, not a vector, or
    NaN/inf."""
    try:
        raw = term.residual(ctx)
    except Exception as exc:
        raise ValueError(f"term {term.name!r}: its function raised {type(exc).__name__}: "
                         f"{exc}") from exc  # fmt: skip
    value = np.asarray(raw)
    if not np.issubdtype(value.dtype, np.floating):
        raise TypeError(f"term {term.name!r}: the function must return a float array, got "
                        f"{value.dtype} {value!r}")  # fmt: skip
    if value.ndim != 1 or value.size == 0:
        raise ValueError(f"term {term.name!r}: the function must return a vector (m,), got "
                         f"shape {value.shape}")  # fmt: skip
    if not np.all(np.isfinite(value)):
        raise ValueError(f"term {term.name!r}: the function returned NaN or inf at the initial "
                         f"state: {value}")  # fmt: skip
    term.activation.check(value.size, term.name)
    return int(value.size)
