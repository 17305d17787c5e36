"""Derivatives of the JAX dynamics: against `pinocchio.computeABADerivatives`, central finite
differences and `jax.test_util.check_grads` (forward and reverse mode)."""

import jax
import jax.numpy as jnp
import numpy as np
import pinocchio as pin
import pytest
from jax.test_util import check_grads

import dynamics

N_STATES = 10


def _tangent_fd(model):
    """`(dq (nv,), v, tau) -> qdd` with `q` perturbed on the manifold, as Pinocchio does."""

    def fd(q, dq, v, tau):
        return dynamics.forward_dynamics(model, dynamics.integrate(model, q, dq), v, tau)

    return fd


# The robot of the checks that run on one robot only: reverse mode is the transposition of the
# same code for every robot (its ABA Jacobian compiles for about 20 s per robot) and
# `check_grads` follows the same code path; ANYmal C has aligned and unaligned revolute joints.
SHARED_PATH_ROBOT = "anymal_c"


@pytest.fixture(scope="module")
def aba_jacobians(model, random_states):
    """Forward-mode (and on `SHARED_PATH_ROBOT` reverse-mode, else None) Jacobians of ABA
    w.r.t. (dq, v, tau) on N_STATES states."""
    q, v, tau = (x[:N_STATES] for x in random_states)
    fd = _tangent_fd(model)
    dq0 = jnp.zeros(model.nv)
    fwd = jax.jit(jax.vmap(jax.jacfwd(fd, argnums=(1, 2, 3)), in_axes=(0, None, 0, 0)))
    rev = None
    if model.name == SHARED_PATH_ROBOT:
        rev = jax.jit(jax.vmap(jax.jacrev(fd, argnums=(1, 2, 3)), in_axes=(0, None, 0, 0)))
        rev = rev(q, dq0, v, tau)
    return (q, v, tau), fwd(q, dq0, v, tau), rev


def test_aba_derivatives_match_pinocchio(pin_model, aba_jacobians):
    (q, v, tau), fwd, rev = aba_jacobians
    data = pin_model.createData()
    for k in range(N_STATES):
        pin.computeABADerivatives(pin_model, data, q[k], v[k], tau[k])
        minv = np.triu(data.Minv) + np.triu(data.Minv, 1).T
        refs = (data.ddq_dq, data.ddq_dv, minv)
        for mode in (m for m in (fwd, rev) if m is not None):
            for ours, ref, name in zip(mode, refs, ("dq", "dv", "dtau")):
                ours = np.asarray(ours[k])
                rel = np.max(np.abs(ours - ref)) / np.max(np.abs(ref))
                assert rel < 1e-7, f"d qdd / {name}: relative error {rel:.2e}"


def test_aba_derivatives_match_central_differences(model, aba_jacobians):
    (q, v, tau), fwd, _ = aba_jacobians
    fd = jax.jit(_tangent_fd(model))
    # Central differences: truncation O(h^2 f''') plus round-off O(1e-16 / h); h = 1e-6 keeps
    # both near 1e-7..1e-6 of the Jacobian's scale here, hence the 1e-5 bound.
    eps = 1e-6
    for k in range(3):
        args = [jnp.zeros(model.nv), jnp.asarray(v[k]), jnp.asarray(tau[k])]
        for which in range(3):
            cols = []
            for i in range(model.nv):
                plus = list(args)
                minus = list(args)
                plus[which] = args[which].at[i].add(eps)
                minus[which] = args[which].at[i].add(-eps)
                cols.append((fd(q[k], *plus) - fd(q[k], *minus)) / (2 * eps))
            numeric = np.stack(cols, axis=1)
            ours = np.asarray(fwd[which][k])
            rel = np.max(np.abs(ours - numeric)) / np.max(np.abs(numeric))
            assert rel < 1e-5, f"argument {which}: relative error vs central differences {rel:.2e}"


@pytest.mark.slow  # ~25 s of eager check_grads; ABA's forward and reverse Jacobians are
# checked against Pinocchio (test_aba_derivatives_match_pinocchio) in the fast suite
def test_check_grads_on_main_functions(model, random_states):
    """`check_grads` (fwd and rev) on every main function, run eagerly (jit would recompile for
    each of check_grads' jvp/vjp calls). One robot (`SHARED_PATH_ROBOT`): the code path is
    shared by all robots and the Pinocchio derivative tests above cover each of them in forward
    mode."""
    if model.name != SHARED_PATH_ROBOT:
        pytest.skip(
            f"check_grads runs on {SHARED_PATH_ROBOT} only (shared code path, ~30 s per robot)"
        )
    q, v, tau = (jnp.asarray(x[0]) for x in random_states)
    dq = jnp.asarray(random_states[1][1]) * 0.1

    def on_tangent(f):
        return lambda dq_: f(dynamics.integrate(model, q, dq_))

    cases = {
        "forward_dynamics": (
            lambda dq_, v_, t_: dynamics.forward_dynamics(
                model, dynamics.integrate(model, q, dq_), v_, t_
            ),
            (dq, v, tau),
        ),
        "rnea": (
            lambda dq_, v_, a_: dynamics.rnea(model, dynamics.integrate(model, q, dq_), v_, a_),
            (dq, v, tau),
        ),
        "mass_matrix": (on_tangent(lambda x: dynamics.mass_matrix(model, x)), (dq,)),
        "foot_positions": (
            on_tangent(lambda x: dynamics.frame_placements(model, x, model.foot_names)[1]),
            (dq,),
        ),
        "foot_jacobian": (
            on_tangent(lambda x: dynamics.frame_jacobian(model, x, model.foot_names[0])),
            (dq,),
        ),
        "centroidal_momentum": (
            lambda dq_, v_: dynamics.centroidal_momentum(
                model, dynamics.integrate(model, q, dq_), v_
            ),
            (dq, v),
        ),
        "difference": (
            lambda dq_: dynamics.difference(model, q, dynamics.integrate(model, q, dq_)),
            (dq,),
        ),
    }
    for name, (f, args) in cases.items():
        try:
            check_grads(f, args, order=1, modes=("fwd", "rev"), atol=1e-5, rtol=1e-5)
        except AssertionError as exc:  # name the function that failed
            raise AssertionError(f"check_grads failed for {name}: {exc}") from None


def test_float32_matches_float64(model, random_states):
    """float32 forward dynamics agree with float64 to 2e-3 of the acceleration scale.

    ABA accumulates round-off over the tree and the free-flyer's 6x6 inverse; with unit-scale
    random states the observed float32 error is ~1e-5..1e-4 relative, so 2e-3 is a safe bound
    that still catches a wrong dtype path (which gives O(1) errors or float64 results).
    """
    q, v, tau = random_states
    m32 = model.astype(jnp.float32)
    f32 = jax.jit(jax.vmap(lambda *a: dynamics.forward_dynamics(m32, *a)))
    out32 = f32(*(jnp.asarray(x[:20], dtype=jnp.float32) for x in (q, v, tau)))
    assert out32.dtype == jnp.float32
    f64 = jax.jit(jax.vmap(lambda *a: dynamics.forward_dynamics(model, *a)))
    out64 = f64(q[:20], v[:20], tau[:20])
    scale = np.max(np.abs(out64), axis=1, keepdims=True)
    err = np.max(np.abs(np.asarray(out32, dtype=np.float64) - out64) / scale)
    assert err < 2e-3, f"float32 relative error {err:.2e}"
