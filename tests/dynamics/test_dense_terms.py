"""The dense world-frame rigid-body terms (`dynamics.dense_terms`) against Pinocchio's C++.

Every robot on the shared random states, plus a hand-built tree with what the robots lack
(unaligned revolute and prismatic joints, two roots, a fixed base), float64, 1e-9 as in
`test_dynamics_vs_pinocchio.py`; and the time step with the dense terms equals the step with
the per-joint recursions, values and derivatives, on a sloped terrain (normals off the z axis).
"""

import dataclasses
import importlib

import jax
import jax.numpy as jnp
import numpy as np
import pinocchio as pin
import pytest

import dynamics
from contact import StepParams, terrain
from dynamics import dense_terms, free_body
from dynamics.configuration import State
from dynamics.model import model_from_pinocchio

TOL = 1e-9
step_module = importlib.import_module("contact.step")


def _close(ours, ref, what):
    ours, ref = np.asarray(ours), np.asarray(ref)
    err = np.max(np.abs(ours - ref) / (1.0 + np.abs(ref)))
    assert err < TOL, f"{what}: max relative error {err:.2e}"


def _terms(model, frames):
    def terms(q, v):
        rotation, translation = dense_terms.world_placements(model, q)
        mass, bias = dense_terms.mass_and_bias(model, rotation, translation, v)
        jac, (frame_r, frame_p) = dense_terms.frame_jacobians(model, rotation, translation, frames)
        return rotation, translation, mass, bias, jac, frame_r, frame_p

    return jax.jit(jax.vmap(terms))


def _check_against_pinocchio(model, pin_model, q, v, frame_names):
    frames = [model.frame_names.index(f) for f in frame_names]
    rot, pos, mass, bias, jac, frame_r, frame_p = _terms(model, frames)(q, v)
    data = pin_model.createData()
    for k in range(len(q)):
        pin.forwardKinematics(pin_model, data, q[k], v[k])
        pin.computeJointJacobians(pin_model, data, q[k])
        pin.updateFramePlacements(pin_model, data)
        for i in range(model.njoints):
            _close(rot[k, i], data.oMi[i + 1].rotation, "joint rotation")
            _close(pos[k, i], data.oMi[i + 1].translation, "joint translation")
        m = pin.crba(pin_model, data, q[k]).copy()
        _close(mass[k], np.triu(m) + np.triu(m, 1).T, "mass matrix")
        _close(bias[k], pin.nonLinearEffects(pin_model, data, q[k], v[k]), "bias forces")
        for j, name in enumerate(frame_names):
            fid = pin_model.getFrameId(name)
            ref = pin.getFrameJacobian(pin_model, data, fid, pin.LOCAL_WORLD_ALIGNED)
            _close(jac[k, j], ref, f"Jacobian of {name}")
            _close(frame_r[k, j], data.oMf[fid].rotation, f"rotation of {name}")
            _close(frame_p[k, j], data.oMf[fid].translation, f"position of {name}")


def test_robots_match_pinocchio(model, pin_model, random_states):
    q, v, _ = random_states
    assert dense_terms.supports(model)
    _check_against_pinocchio(model, pin_model, q[:20], v[:20], model.foot_names)


def _odd_tree():
    """A free-flyer body with an unaligned revolute-prismatic-revolute(x) chain and a second
    branch, plus a fixed-base second root (a revolute pendulum hung from the world)."""
    pm = pin.Model()
    rng = np.random.default_rng(3)

    def body(joint):
        inertia = pin.Inertia.Random()
        pm.appendBodyToJoint(joint, inertia, pin.SE3.Identity())

    def placement():
        return pin.SE3(pin.exp3(rng.normal(size=3)), rng.normal(size=3) * 0.2)

    axis = rng.normal(size=3)
    axis /= np.linalg.norm(axis)
    slide = rng.normal(size=3)
    slide /= np.linalg.norm(slide)
    base = pm.addJoint(0, pin.JointModelFreeFlyer(), pin.SE3.Identity(), "base")
    body(base)
    a = pm.addJoint(base, pin.JointModelRevoluteUnaligned(axis), placement(), "a")
    body(a)
    b = pm.addJoint(a, pin.JointModelPrismaticUnaligned(slide), placement(), "b")
    body(b)
    c = pm.addJoint(b, pin.JointModelRX(), placement(), "c")
    body(c)
    d = pm.addJoint(base, pin.JointModelPZ(), placement(), "d")
    body(d)
    e = pm.addJoint(0, pin.JointModelRY(), placement(), "e")
    body(e)
    names = []
    for joint in (c, d, e, base):
        names.append(f"tip_{joint}")
        pm.addFrame(pin.Frame(names[-1], joint, placement(), pin.FrameType.OP_FRAME))
    pm.armature = np.abs(rng.normal(size=pm.nv))
    model = model_from_pinocchio(
        pm, name="odd", foot_names=tuple(names), foot_radius=0.01, q_standing=pin.neutral(pm)
    )
    return model, pm, tuple(names)


def test_unaligned_prismatic_and_two_roots_match_pinocchio():
    model, pm, names = _odd_tree()
    assert model.joint_types == (
        "free_flyer", "revolute", "prismatic", "revolute", "prismatic", "revolute"
    )  # fmt: skip
    assert dense_terms.supports(model)
    rng = np.random.default_rng(4)
    q = np.stack([pin.randomConfiguration(pm, -np.ones(pm.nq), np.ones(pm.nq)) for _ in range(8)])
    v = rng.normal(size=(8, pm.nv))
    _check_against_pinocchio(model, pm, q, v, names)


def test_free_bodies_match_pinocchio():
    model = free_body.box()
    pm = free_body.box_pinocchio_model()
    rng = np.random.default_rng(5)
    q = np.stack([pin.randomConfiguration(pm, -np.ones(7), np.ones(7)) for _ in range(8)])
    _check_against_pinocchio(model, pm, q, rng.normal(size=(8, 6)), model.foot_names)


def test_a_free_flyer_below_the_root_is_not_supported():
    fake = dataclasses.replace(free_body.box(), parents=(0,))  # only `supports` reads it
    assert not dense_terms.supports(fake)


@pytest.mark.parametrize(
    "contact",
    # hard shares the smooth model's code but for the weights (12 s): in the slow suite
    [pytest.param("hard", marks=pytest.mark.slow), "smooth", "penalty"],
)
def test_step_equals_the_per_joint_recursions(contact, monkeypatch):
    """One Go2 step on a 10-degree incline, from a state with a foot near the surface: the dense
    terms and the per-joint recursions give the same state (all three contact models) and, for
    the smooth model, the same derivative along a random direction."""
    model = dynamics.load_robot("go2")
    slope = terrain.incline(np.deg2rad(10.0), friction=0.7, height=-0.02)
    params = StepParams(dt=0.01, terrain=slope)
    rng = np.random.default_rng(6)
    q0 = np.asarray(model.q_standing)
    x = jnp.concatenate([q0, rng.normal(size=model.nv) * 0.3, rng.normal(size=model.nu) * 5.0])

    traced_with_dense_terms = []

    def flat_step(x):
        traced_with_dense_terms.append(dense_terms.supports(model))
        state = State(x[: model.nq], x[model.nq : model.nq + model.nv])
        nxt, info = step_module.step(
            model, params, state, x[model.nq + model.nv :], contact=contact, num_sweeps=10
        )
        return jnp.concatenate([nxt.q, nxt.v, info.impulse.ravel(), info.gap])

    direction = jnp.asarray(rng.normal(size=x.shape))

    def directional(x):  # a fresh trace each call; the derivative for the smooth model only
        if contact != "smooth":  # (the per-joint Jacobian takes 20 s to compile)
            value = jax.jit(lambda x: flat_step(x))(x)
            return value, jnp.zeros_like(value)
        return jax.jit(lambda x: jax.jvp(flat_step, (x,), (direction,)))(x)

    dense_value, dense_tangent = directional(x)
    assert np.any(np.asarray(dense_value[-4:]) < 0.01), "no foot near the incline"
    monkeypatch.setattr(dense_terms, "supports", lambda model: False)
    value, tangent = directional(x)
    assert traced_with_dense_terms == [True, False]
    np.testing.assert_allclose(dense_value, value, rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(dense_tangent, tangent, rtol=1e-7, atol=1e-8)
    if contact == "smooth":
        assert np.max(np.abs(np.asarray(tangent))) > 1.0  # the direction moves the step


def test_terms_under_nested_vmap_equal_one_by_one(model, random_states):
    """The batched trajectory solver vmaps problems x knots: the terms there equal the ones
    computed state by state (XLA 0.10.2 once rejected a batched rotation product here)."""
    q, v, _ = random_states
    q, v = q[:6].reshape(2, 3, -1), v[:6].reshape(2, 3, -1)

    def terms(q, v):
        rotation, translation = dense_terms.world_placements(model, q)
        jac, _ = dense_terms.frame_jacobians(model, rotation, translation, model.foot_frames)
        return (*dense_terms.mass_and_bias(model, rotation, translation, v), jac)

    batched = jax.jit(jax.vmap(jax.vmap(terms)))(q, v)
    for i in range(2):
        for j in range(3):
            for ours, one in zip(batched, jax.jit(terms)(q[i, j], v[i, j])):
                np.testing.assert_allclose(ours[i, j], one, rtol=1e-12, atol=1e-12)
