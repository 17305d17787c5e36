"""The rigid-body algorithms as CasADi `Function`s over `SX` symbols (for the IPOPT backend).

The PyPI `pin` wheel has no `pinocchio.casadi`, so these are built from this package's own
backend-generic algorithms (`CasadiOps`), the same code that runs on JAX arrays. Model arrays
enter as numeric constants.

    fd = casadi_forward_dynamics(model)     # fd(q, v, tau) -> qdd   (ABA)
    id = casadi_inverse_dynamics(model)     # id(q, v, a)   -> tau   (RNEA)
"""

from __future__ import annotations

import functools

import casadi as ca
import numpy as np

from . import articulated_body as _aba
from . import centroidal as _centroidal
from . import composite_inertia as _crba
from . import kinematics as _kin
from . import newton_euler as _rnea
from .backend import CasadiOps
from .model import Model

_OPS = CasadiOps()


def numpy_model(model: Model) -> Model:
    """The model with every array as float64 NumPy (CasADi needs host constants)."""
    import jax

    return jax.tree_util.tree_map(lambda x: np.asarray(x, dtype=float), model)


def _symbols(model: Model, *names):
    sizes = {"q": model.nq, "v": model.nv, "a": model.nv, "tau": model.nv}
    return [ca.SX.sym(n, sizes[n]) for n in names]


@functools.lru_cache(maxsize=32)
def _cached(kind: str, model: Model, extra=None) -> ca.Function:
    m = numpy_model(model)
    if kind == "fd":
        q, v, tau = _symbols(m, "q", "v", "tau")
        kin = _kin.forward_kinematics(_OPS, m, q)
        return ca.Function(
            "forward_dynamics",
            [q, v, tau],
            [_aba.aba(_OPS, m, kin, v, tau)],
            ["q", "v", "tau"],
            ["qdd"],
        )
    if kind == "id":
        q, v, a = _symbols(m, "q", "v", "a")
        kin = _kin.forward_kinematics(_OPS, m, q)
        return ca.Function(
            "inverse_dynamics",
            [q, v, a],
            [_rnea.rnea(_OPS, m, kin, v, a)],
            ["q", "v", "a"],
            ["tau"],
        )
    if kind == "crba":
        (q,) = _symbols(m, "q")
        kin = _kin.forward_kinematics(_OPS, m, q)
        return ca.Function("mass_matrix", [q], [_crba.crba(_OPS, m, kin)], ["q"], ["M"])
    if kind == "com":
        (q,) = _symbols(m, "q")
        kin = _kin.forward_kinematics(_OPS, m, q)
        return ca.Function(
            "center_of_mass", [q], [_centroidal.center_of_mass(_OPS, m, kin)], ["q"], ["com"]
        )
    if kind == "frames":
        frames, reference = extra
        (q,) = _symbols(m, "q")
        kin = _kin.forward_kinematics(_OPS, m, q)
        ids = [m.frame_id(f) for f in frames]
        pos = ca.horzcat(*[_kin.frame_placement(_OPS, m, kin, i)[1] for i in ids]).T
        jac = ca.vertcat(*[_kin.frame_jacobian(_OPS, m, kin, i, reference) for i in ids])
        return ca.Function("frame_kinematics", [q], [pos, jac], ["q"], ["positions", "jacobians"])
    raise ValueError(kind)


# The Model is hashed by identity (eq=False), so one Function is built per model object.
def casadi_forward_dynamics(model: Model) -> ca.Function:
    """`qdd = f(q (nq,), v (nv,), tau (nv,))` by the articulated-body algorithm."""
    return _cached("fd", model)


def casadi_inverse_dynamics(model: Model) -> ca.Function:
    """`tau = f(q (nq,), v (nv,), a (nv,))` by recursive Newton-Euler."""
    return _cached("id", model)


def casadi_mass_matrix(model: Model) -> ca.Function:
    """`M = f(q (nq,))`, `(nv, nv)`, by CRBA."""
    return _cached("crba", model)


def casadi_center_of_mass(model: Model) -> ca.Function:
    """`com = f(q (nq,))`, `(3,)` in the world."""
    return _cached("com", model)


def casadi_frame_kinematics(model: Model, frames, reference="local_world_aligned") -> ca.Function:
    """`(positions (k, 3), jacobians (6k, nv)) = f(q)` for the frames (names or indices)."""
    return _cached("frames", model, (tuple(frames), reference))
