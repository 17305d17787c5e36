"""The floating-base terms and their Jacobian rule (`dynamics.floating_base_terms`).

Fast: values against Pinocchio's C++ (`crba`, `nonLinearEffects`, `getFrameJacobian`,
`updateFramePlacements`), derivatives against Pinocchio's analytic RNEA derivatives
(`computeRNEADerivatives`) and central differences of its `crba` and frame Jacobians, all along
the configuration manifold (`q (+) dq`, Pinocchio's `integrate`). Slow (compile-heavy): the
rule against plain AD under `jacfwd`, `grad` and `vmap`, and a time step using it against the
default step.
"""

import importlib

import jax
import jax.numpy as jnp
import numpy as np
import pinocchio as pin
import pytest

import dynamics
from contact import StepParams, terrain
from dynamics import floating_base_terms, free_body
from dynamics.configuration import State

step_module = importlib.import_module("contact.step")


def _relative(ours, ref):
    ours, ref = np.asarray(ours), np.asarray(ref)
    return float(np.max(np.abs(ours - ref) / (1.0 + np.abs(ref))))


def _terms_at(model, rule):
    def terms(dq, q, v):
        q = dynamics.integrate(model, q, dq)
        return floating_base_terms.frame_terms(model, q, v, model.foot_frames, jacobian_rule=rule)

    return terms


def test_values_match_pinocchio(model, pin_model, random_states):
    """With the rule (its primal is the same function as without it)."""
    q, v, _ = random_states
    assert floating_base_terms.supports(model)
    f = jax.jit(jax.vmap(_terms_at(model, True), in_axes=(None, 0, 0)))
    mass, bias, jac, origin = f(jnp.zeros(model.nv), q[:10], v[:10])
    data = pin_model.createData()
    for k in range(10):
        m = pin.crba(pin_model, data, q[k]).copy()
        assert _relative(mass[k], np.triu(m) + np.triu(m, 1).T) < 1e-9
        assert _relative(bias[k], pin.nonLinearEffects(pin_model, data, q[k], v[k])) < 1e-9
        pin.computeJointJacobians(pin_model, data, q[k])
        pin.updateFramePlacements(pin_model, data)
        for j, name in enumerate(model.foot_names):
            fid = pin_model.getFrameId(name)
            ref = pin.getFrameJacobian(pin_model, data, fid, pin.LOCAL_WORLD_ALIGNED)
            assert _relative(jac[k, j], ref) < 1e-9
            assert _relative(origin[k, j], data.oMf[fid].translation) < 1e-9


def _pinocchio_terms(pin_model, model, q, v):
    data = pin_model.createData()
    m = pin.crba(pin_model, data, q).copy()
    pin.computeJointJacobians(pin_model, data, q)
    pin.updateFramePlacements(pin_model, data)
    jac = [
        pin.getFrameJacobian(pin_model, data, pin_model.getFrameId(n), pin.LOCAL_WORLD_ALIGNED)
        for n in model.foot_names
    ]
    return np.triu(m) + np.triu(m, 1).T, np.stack(jac)


def test_jacobian_rule_matches_pinocchio_derivatives(model, pin_model, random_states):
    """d h / d(q, v) against `computeRNEADerivatives` (analytic, a = 0); d M / dq and the foot
    Jacobians' d J / dq against central differences of Pinocchio's own `crba` and
    `getFrameJacobian` along `integrate` (step 1e-6: truncation ~1e-12, rounding ~1e-10)."""
    q, v, _ = random_states
    f = jax.jit(jax.jacfwd(_terms_at(model, True), argnums=(0, 2)))
    eps = 1e-6
    for k in range(3):
        (dm_dq, _), (dh_dq, dh_dv), (dj_dq, _), _ = f(jnp.zeros(model.nv), q[k], v[k])
        data = pin_model.createData()
        ref_dq, ref_dv, _ = pin.computeRNEADerivatives(
            pin_model, data, q[k], v[k], np.zeros(model.nv)
        )
        assert _relative(dh_dq, ref_dq) < 1e-8
        assert _relative(dh_dv, ref_dv) < 1e-8
        for d in range(model.nv):
            step = np.zeros(model.nv)
            step[d] = eps
            plus = _pinocchio_terms(pin_model, model, pin.integrate(pin_model, q[k], step), v[k])
            minus = _pinocchio_terms(pin_model, model, pin.integrate(pin_model, q[k], -step), v[k])
            assert _relative(dm_dq[..., d], (plus[0] - minus[0]) / (2 * eps)) < 1e-6
            assert _relative(dj_dq[..., d], (plus[1] - minus[1]) / (2 * eps)) < 1e-6


@pytest.mark.slow  # 27 s of compilation; the Pinocchio derivative tests above stay fast
def test_jacobian_rule_equals_plain_autodiff_forward_reverse_and_batched():
    """Go2 only (the rule is the same code for every robot; the Pinocchio tests above cover
    each robot's values and derivatives)."""
    model = dynamics.load_robot("go2")
    rng = np.random.default_rng(7)
    q = np.stack([np.asarray(dynamics.integrate(model, jnp.asarray(model.q_standing),
                                                jnp.asarray(rng.normal(size=model.nv) * 0.5)))
                  for _ in range(4)])  # fmt: skip
    v = rng.normal(size=(4, model.nv))
    with_rule, plain = _terms_at(model, True), _terms_at(model, False)
    dq0 = jnp.zeros(model.nv)
    jac_rule = jax.jit(jax.vmap(jax.jacfwd(with_rule, argnums=(0, 2)), in_axes=(None, 0, 0)))
    jac_plain = jax.jit(jax.vmap(jax.jacfwd(plain, argnums=(0, 2)), in_axes=(None, 0, 0)))
    for ours, ref in zip(
        jax.tree_util.tree_leaves(jac_rule(dq0, q[:4], v[:4])),
        jax.tree_util.tree_leaves(jac_plain(dq0, q[:4], v[:4])),
    ):
        assert _relative(ours, ref) < 1e-10
    weights = [jnp.asarray(np.random.default_rng(i).normal(size=s.shape)) for i, s in
               enumerate(jax.eval_shape(plain, dq0, q[0], v[0]))]  # fmt: skip

    def scalar(terms):
        def f(dq, v):
            return sum(jnp.sum(w * jnp.sin(t)) for w, t in zip(weights, terms(dq, q[0], v)))

        return f

    grad_rule = jax.jit(jax.grad(scalar(with_rule), argnums=(0, 1)))(dq0, jnp.asarray(v[0]))
    grad_plain = jax.jit(jax.grad(scalar(plain), argnums=(0, 1)))(dq0, jnp.asarray(v[0]))
    for ours, ref in zip(grad_rule, grad_plain):
        assert _relative(ours, ref) < 1e-10
        assert np.max(np.abs(np.asarray(ref))) > 1e-3  # the test would see a missing term


def test_only_floating_base_trees_are_supported():
    assert not floating_base_terms.supports(free_body.box())  # no joint beyond the base
    assert floating_base_terms.supports(dynamics.load_robot("solo12"))


@pytest.mark.slow  # 26-30 s of compilation each; the FDDP tests run the rule in every solve
@pytest.mark.parametrize("contact", ["smooth", "hard", "penalty"])
def test_step_with_the_rule_equals_the_default_step(contact):
    """One Go2 step on a 10-degree incline (a foot near the surface): the same next state and
    the same Jacobian along the manifold (`q (+) dq`, `v`, `tau`) with either option."""
    model = dynamics.load_robot("go2")
    slope = terrain.incline(np.deg2rad(10.0), friction=0.7, height=-0.02)
    params = StepParams(dt=0.01, terrain=slope)
    rng = np.random.default_rng(6)
    q0 = jnp.asarray(model.q_standing)
    x = jnp.concatenate([jnp.zeros(model.nv), rng.normal(size=model.nv) * 0.3,
                         rng.normal(size=model.nu) * 5.0])  # fmt: skip

    def flat_step(x, option):
        q = dynamics.integrate(model, q0, x[: model.nv])
        state = State(q, x[model.nv : 2 * model.nv])
        nxt, info = step_module.step(
            model, params, state, x[2 * model.nv :], contact=contact, num_sweeps=10,
            rigid_body_derivatives=option,
        )  # fmt: skip
        return jnp.concatenate([nxt.q, nxt.v, info.impulse.ravel(), info.gap])

    values = {o: jax.jit(lambda x, o=o: flat_step(x, o))(x) for o in ("autodiff", "jacobian")}
    assert np.any(np.asarray(values["autodiff"][-4:]) < 0.01), "no foot near the incline"
    np.testing.assert_allclose(values["jacobian"], values["autodiff"], rtol=1e-10, atol=1e-12)
    jacobians = {
        o: jax.jit(jax.jacfwd(lambda x, o=o: flat_step(x, o)))(x) for o in ("autodiff", "jacobian")
    }
    assert np.max(np.abs(np.asarray(jacobians["autodiff"]))) > 1.0
    np.testing.assert_allclose(jacobians["jacobian"], jacobians["autodiff"], rtol=1e-8, atol=1e-9)


def test_an_unknown_option_names_the_argument():
    model = dynamics.load_robot("go2")
    state = State(jnp.asarray(model.q_standing), jnp.zeros(model.nv))
    with pytest.raises(ValueError, match="rigid_body_derivatives"):
        step_module.step(model, StepParams(), state, jnp.zeros(model.nu),
                         rigid_body_derivatives="analytic")  # fmt: skip
