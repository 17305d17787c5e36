"""JAX rigid-body dynamics against Pinocchio C++ on 100 random states per robot (float64, 1e-9)."""

import jax
import numpy as np
import pinocchio as pin
import pytest

import dynamics

TOL = 1e-9


def _close(ours, ref, what):
    ours, ref = np.asarray(ours), np.asarray(ref)
    err = np.max(np.abs(ours - ref) / (1.0 + np.abs(ref)))
    assert err < TOL, f"{what}: max relative error {err:.2e}"


@pytest.fixture(scope="module")
def data(pin_model):
    return pin_model.createData()


def _pin_batch(fn, *arrays):
    return np.stack([fn(*xs) for xs in zip(*arrays)])


def test_forward_dynamics_aba(model, pin_model, data, random_states):
    q, v, tau = random_states
    ours = jax.jit(jax.vmap(lambda *a: dynamics.forward_dynamics(model, *a)))(q, v, tau)
    ref = _pin_batch(lambda *a: pin.aba(pin_model, data, *a).copy(), q, v, tau)
    _close(ours, ref, "aba")


def test_forward_dynamics_cholesky(model, pin_model, data, random_states):
    q, v, tau = random_states
    ours = jax.jit(jax.vmap(lambda *a: dynamics.forward_dynamics_cholesky(model, *a)))(q, v, tau)
    ref = _pin_batch(lambda *a: pin.aba(pin_model, data, *a).copy(), q, v, tau)
    _close(ours, ref, "crba + cholesky")


def test_rnea_and_bias_forces(model, pin_model, data, random_states):
    q, v, a = random_states
    ours = jax.jit(jax.vmap(lambda *x: dynamics.rnea(model, *x)))(q, v, a)
    _close(ours, _pin_batch(lambda *x: pin.rnea(pin_model, data, *x).copy(), q, v, a), "rnea")
    nle = jax.jit(jax.vmap(lambda *x: dynamics.bias_forces(model, *x)))(q, v)
    _close(
        nle, _pin_batch(lambda *x: pin.nonLinearEffects(pin_model, data, *x).copy(), q, v), "nle"
    )
    g = jax.jit(jax.vmap(lambda x: dynamics.gravity_forces(model, x)))(q)
    _close(
        g, _pin_batch(lambda x: pin.computeGeneralizedGravity(pin_model, data, x).copy(), q), "g"
    )


def test_mass_matrix(model, pin_model, data, random_states):
    q, _, _ = random_states

    def ref(x):
        m = pin.crba(pin_model, data, x).copy()
        return np.triu(m) + np.triu(m, 1).T  # Pinocchio fills the upper triangle

    ours = jax.jit(jax.vmap(lambda x: dynamics.mass_matrix(model, x)))(q)
    _close(ours, _pin_batch(ref, q), "crba")


def test_forward_kinematics_and_frames(model, pin_model, data, random_states):
    q, v, _ = random_states
    frames = model.foot_names + (model.frame_names[-1],)
    fk = jax.jit(jax.vmap(lambda x: dynamics.forward_kinematics(model, x)))
    placements = jax.jit(jax.vmap(lambda x: dynamics.frame_placements(model, x, frames)))
    rot, pos = fk(q)
    frot, fpos = placements(q)
    for k in range(len(q)):
        pin.forwardKinematics(pin_model, data, q[k], v[k])
        pin.updateFramePlacements(pin_model, data)
        for i in range(model.njoints):
            _close(rot[k, i], data.oMi[i + 1].rotation, "joint rotation")
            _close(pos[k, i], data.oMi[i + 1].translation, "joint translation")
        for j, f in enumerate(frames):
            fid = pin_model.getFrameId(f)
            _close(frot[k, j], data.oMf[fid].rotation, f"{f} rotation")
            _close(fpos[k, j], data.oMf[fid].translation, f"{f} translation")


@pytest.mark.parametrize(
    "reference, pin_reference",
    [
        (dynamics.LOCAL, pin.LOCAL),
        (dynamics.WORLD, pin.WORLD),
        (dynamics.LOCAL_WORLD_ALIGNED, pin.LOCAL_WORLD_ALIGNED),
    ],
)
def test_frame_jacobians_and_velocities(
    model, pin_model, data, random_states, reference, pin_reference
):
    q, v, _ = random_states
    frames = model.foot_names
    jac = jax.jit(jax.vmap(lambda x: dynamics.frame_jacobians(model, x, frames, reference)))(q)
    vel_fn = jax.vmap(lambda x, y: dynamics.frame_velocity(model, x, y, frames[0], reference))
    vel = jax.jit(vel_fn)(q, v)
    for k in range(len(q)):
        pin.computeJointJacobians(pin_model, data, q[k])
        pin.forwardKinematics(pin_model, data, q[k], v[k])
        pin.updateFramePlacements(pin_model, data)
        for j, f in enumerate(frames):
            fid = pin_model.getFrameId(f)
            _close(jac[k, j], pin.getFrameJacobian(pin_model, data, fid, pin_reference), f"J {f}")
        ref_v = pin.getFrameVelocity(
            pin_model, data, pin_model.getFrameId(frames[0]), pin_reference
        )
        _close(vel[k], ref_v.vector, "frame velocity")


def test_center_of_mass_and_centroidal_momentum(model, pin_model, data, random_states):
    q, v, _ = random_states
    com = jax.jit(jax.vmap(lambda x: dynamics.center_of_mass(model, x)))(q)
    hg = jax.jit(jax.vmap(lambda x, y: dynamics.centroidal_momentum(model, x, y)))(q, v)
    ag = jax.jit(jax.vmap(lambda x: dynamics.centroidal_momentum_matrix(model, x)))(q[:10])
    for k in range(len(q)):
        _close(com[k], pin.centerOfMass(pin_model, data, q[k]), "com")
        pin.computeCentroidalMomentum(pin_model, data, q[k], v[k])
        _close(hg[k], data.hg.vector, "centroidal momentum")
    for k in range(10):
        _close(ag[k], pin.computeCentroidalMap(pin_model, data, q[k]), "centroidal map")


def test_integrate_and_difference(model, pin_model, random_states):
    q, v, _ = random_states
    q1 = np.roll(q, 1, axis=0)
    ours_int = jax.jit(jax.vmap(lambda x, y: dynamics.integrate(model, x, y)))(q, v)
    ours_diff = jax.jit(jax.vmap(lambda x, y: dynamics.difference(model, x, y)))(q, q1)
    for k in range(len(q)):
        _close(ours_int[k], pin.integrate(pin_model, q[k], v[k]), "integrate")
        _close(ours_diff[k], pin.difference(pin_model, q[k], q1[k]), "difference")
    # difference inverts integrate, including the small-angle (Taylor) branch
    small = v * 1e-6
    back = jax.vmap(lambda x, y: dynamics.difference(model, x, dynamics.integrate(model, x, y)))
    np.testing.assert_allclose(back(q, small), small, atol=1e-15, rtol=1e-9)
