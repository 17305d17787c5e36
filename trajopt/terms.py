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

`KnotContext` is what a function may read: the knot's state, control, transition forces and
torques, time, target row and gait reference row, and kinematics computed on first use, once
per knot (`ctx.kinematics`, `ctx.frame_placement(frame)`, `ctx.foot_gaps()`, ...).

A function written with `ctx.ops` (the backend-generic operations of `dynamics.backend`) and
slicing runs in JAX and in CasADi: `derivatives="compiled"` generates it into its C and IPOPT
takes it. The gait's own terms are written so (`trajopt.built_in_terms`). A function written
with `jax.numpy` runs in JAX only: in the solvers' JAX knots, beside the generated C of
`derivatives="compiled"` (`trajopt.engine.casadi_model.term_split` says which terms and why), and
IPOPT refuses it by name.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from contact import signed_distance
from contact.foot_contacts import compute_foot_contacts
from dynamics import centroidal, kinematics, spatial
from dynamics.backend import JaxOps
from dynamics.model import Model


# --------------------------------------------------------------------------- activations
@dataclass(frozen=True)
class Quadratic:
    """`a(r) = r`: cost `0.5 w |r|^2`."""

    def __call__(self, ops, r):
        return r

    def check(self, size: int, name: str) -> None:
        return None


@dataclass(frozen=True)
class WeightedQuadratic:
    """`a(r) = sqrt(w) r` with per-component weights `w (m,) >= 0`: cost `0.5 w_term sum w_i
    r_i^2`."""

    weights: tuple

    def __call__(self, ops, r):
        return ops.const(np.sqrt(np.asarray(self.weights, dtype=float))) * r

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

    def __call__(self, ops, r):
        lo = ops.const(np.asarray(self.lower, dtype=float))
        hi = ops.const(np.asarray(self.upper, dtype=float))
        return ops.maximum(r - hi, 0.0) + ops.minimum(r - lo, 0.0)

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
class TerrainSurface:
    """The ground of a JAX knot: `contact.terrain` distances and `compute_foot_contacts`."""

    def __init__(self, terrain):
        self.terrain = terrain

    def ground_distance(self, ctx: KnotContext, xy):
        """Signed distance [m] of the point `(x, y, 0)` above the terrain (negative below)."""
        point = jnp.array([xy[0], xy[1], 0.0])
        return signed_distance(self.terrain, point)[0]

    def foot_contacts(self, ctx: KnotContext) -> tuple:
        """`(gaps (nfeet,), [velocity (3,) per foot])`: each foot sphere's signed distance to the
        terrain [m] and its velocity in its contact frame `[t1, t2, n]` [m/s]."""
        feet = compute_foot_contacts(ctx.model, self.terrain, ctx.q)
        velocity = jnp.einsum("kab,b->ka", feet.jacobian, ctx.v)
        return feet.gap, [velocity[i] for i in range(velocity.shape[0])]


@dataclass(frozen=True, eq=False)
class KnotContext:
    """What a term's function reads at one knot (module docstring).

    model: the robot. q (nq,), v (nv,): the knot's state (Pinocchio's conventions: base linear
    and angular velocity in the base frame). u (nu,): the knot's control (PD targets [rad] or
    torques); at the terminal knot the last control. u_prev (nu,): the previous control.
    forces (nfeet, 3): the transition's average contact forces per foot [N] (world frame);
    zeros at the terminal knot. torques (nu,): the transition's peak joint torques [N m]; zeros
    at the terminal knot. t: the knot's index (traced int), time = t dt [s], dt: the knot's
    duration [s]. target: the term's target row at this knot, or None. terminal: whether this
    is the terminal knot (static). reference: the gait's reference row at this knot
    (`trajopt.problem.Reference`'s fields: base_velocity (3,), base_height, stance (nfeet,),
    swing_height (nfeet,), joint_posture (nu,)). surface: the ground (`ground_distance`,
    `foot_contacts`). ops: the array backend (`dynamics.backend`): `JaxOps` in JAX,
    `CasadiOps` where the knot is generated into C.
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
    dt: float = 0.0
    reference: object = None
    surface: object = None
    ops: object = None
    cache: dict = dataclasses.field(default_factory=dict)

    def __post_init__(self):
        if self.ops is None:
            object.__setattr__(self, "ops", JaxOps(self.q.dtype))

    def with_target(self, row) -> KnotContext:
        """This knot with another term's target row; the kinematics computed so far are
        shared."""
        return dataclasses.replace(self, target=row)

    def _once(self, key, compute):
        if key not in self.cache:
            self.cache[key] = compute()
        return self.cache[key]

    @property
    def kinematics(self) -> kinematics.Kinematics:
        """Every joint's placement (`dynamics.kinematics.forward_kinematics`), once per knot."""
        return self._once(
            "kinematics", lambda: kinematics.forward_kinematics(self.ops, self.model, self.q)
        )

    @property
    def joint_velocities(self) -> list:
        """Every joint's spatial velocity in its own frame (`dynamics.kinematics`)."""
        return self._once("joint_velocities", lambda: kinematics.joint_velocities(
            self.ops, self.model, self.kinematics, self.v))  # fmt: skip

    def force(self, foot: int):
        """`(3,)` the transition's average contact force on `foot` (an index) [N, world]."""
        return self.forces[foot] if self.ops.name == "jax" else self.forces[foot, :].T

    def foot_gaps(self):
        """`(nfeet,)` each foot sphere's signed distance to the terrain [m]."""
        return self._once("feet", lambda: self.surface.foot_contacts(self))[0]

    def foot_velocities(self) -> list:
        """Per foot, `(3,)` its velocity in its contact frame `[t1, t2, n]` [m/s]."""
        return self._once("feet", lambda: self.surface.foot_contacts(self))[1]

    def ground_distance(self, xy):
        """Signed distance [m] of the point `(xy, 0)` above the terrain."""
        return self.surface.ground_distance(self, xy)

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
        """`a(r(ctx))`, the activated residual `(m,)` (unweighted), in `ctx.ops`' backend."""
        r = self.residual(ctx)
        return self.activation(ctx.ops, jnp.asarray(r) if ctx.ops.name == "jax" else r)


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
            terminal: bool, reference=None, terrain=None) -> KnotContext:  # fmt: skip
    """The JAX `KnotContext` of one knot from the knot state `x` (`q`, `v`, `u_prev`), its gait
    `reference` row and its `terrain` (`contact.terrain`)."""
    t = jnp.asarray(t)
    surface = None if terrain is None else TerrainSurface(terrain)
    return KnotContext(model, x.q, x.v, u, x.u_prev, forces, torques, t, t * dt_knot,
                       target_row, terminal, dt_knot, reference, surface)  # fmt: skip


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
