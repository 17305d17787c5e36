"""Physical parameters of a simulation step, as a traced pytree.

Everything here is a JAX leaf (or a terrain pytree whose numbers are leaves), so one compiled
`step` serves any value: domain randomisation (`vmap` over params), identification and
gradients with respect to friction, `kappa`, stiffness or `dt`. Structural choices (which contact
model, how many solver sweeps, the terrain *kind*) are static and live elsewhere.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import jax

from .checks import NONNEGATIVE, POSITIVE, require
from .terrain import Plane, flat


@dataclass(frozen=True)
class StepParams:
    """Parameters of `contact.step`.

    terrain: the ground (its friction coefficient is the Coulomb `mu` of every contact).
    dt: time step [s].
    kappa: sharpness of the smooth model's activation `sigmoid(-(kappa * gap - bias))` [1/m].
    bias: shift of that activation (dimensionless): the weight is `sigmoid(bias)` at zero gap.
        `bias = 0` is the authors' `sigmoid(-kappa gap)` (weight 1/2 at touch); the default 8
        makes a touching contact carry 99.97 % of its impulse, so bodies do not creep into the
        ground (see `step.py`). The activation zone `bias / kappa` shrinks as `kappa -> inf`,
        which recovers the hard model.
    margin: contacts with `gap < margin` [m] enter the smooth solve (the authors' `col_height`);
        extended to `(bias + 30) / kappa` when that is larger, so the cut never makes a jump.
    stiffness: penalty model normal stiffness `k_e` [N/m].
    damping: penalty model normal damping `k_d` [N s/m] (linear, the normal force never pulls).
    friction_viscosity: penalty model tangential gain `k_f` [N s/m] before Coulomb saturation.
    joint_damping: damping `d` [N m s/rad] on every actuated joint, integrated implicitly
        (an actuator's Kd moved into the step for stability on light legs; see step.py).

    Concrete invalid values raise `ValueError` naming the argument when constructed: `dt <= 0`,
    `kappa <= 0`, a negative `stiffness`, `damping`, `friction_viscosity`, `joint_damping` or
    terrain friction, NaN anywhere (every entry of a batch). `replace` checks only the fields
    it changes, so a tangent or difference of parameters can be built from one
    (`jax.tree.map(jnp.zeros_like, params).replace(kappa=1.0)`). Traced values (inside
    `jit`/`vmap`/`grad`) cannot raise and are not checked; pytree transformations rebuild a
    `StepParams` without `__init__`, so their leaves (tracers, cotangents, `zeros_like`) are
    never validated either.
    """

    terrain: Plane = dataclasses.field(default_factory=flat)
    dt: float = 0.002
    kappa: float = 3000.0
    bias: float = 8.0
    margin: float = 0.02
    stiffness: float = 2.0e4
    damping: float = 400.0
    friction_viscosity: float = 2.0e3
    joint_damping: float = 0.0

    def replace(self, **changes) -> StepParams:
        """A copy with some parameters replaced (e.g. `params.replace(dt=0.001)`); only the
        replaced ones are checked."""
        unknown = set(changes) - set(_FIELDS)
        if unknown:
            raise TypeError(f"StepParams has no fields {sorted(unknown)}")
        new = _unflatten(None, [changes.get(n, getattr(self, n)) for n in _FIELDS])
        new._check(changes)
        return new

    def __post_init__(self):
        self._check(_FIELDS)

    def _check(self, names) -> None:
        """`ValueError` for a concrete invalid value among the fields `names`."""
        for name in names:
            if name == "terrain":
                friction = getattr(self.terrain, "friction", None)
                require("StepParams", "terrain friction", friction, NONNEGATIVE)
            elif name in _CONDITIONS:
                require("StepParams", name, getattr(self, name), _CONDITIONS[name])


_FIELDS = tuple(f.name for f in dataclasses.fields(StepParams))
_CONDITIONS = {
    "dt": POSITIVE,
    "kappa": POSITIVE,
    "stiffness": NONNEGATIVE,
    "damping": NONNEGATIVE,
    "friction_viscosity": NONNEGATIVE,
    "joint_damping": NONNEGATIVE,
}


def _flatten_with_keys(params: StepParams):
    return [(jax.tree_util.GetAttrKey(n), getattr(params, n)) for n in _FIELDS], None


def _flatten(params: StepParams):
    return [getattr(params, n) for n in _FIELDS], None


def _unflatten(_, leaves) -> StepParams:
    """Rebuild without `__init__`: transformations fill the leaves with tracers, cotangents (a
    gradient of `dt` may be negative) or placeholders, which are not parameters to validate."""
    params = object.__new__(StepParams)
    for name, leaf in zip(_FIELDS, leaves, strict=True):
        object.__setattr__(params, name, leaf)
    return params


jax.tree_util.register_pytree_with_keys(StepParams, _flatten_with_keys, _unflatten, _flatten)
