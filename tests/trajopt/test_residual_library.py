"""The residual library (`trajopt.residual_library`) against Pinocchio C++ on random Go2 states
(frames, velocities, centre of mass, centroidal momentum, SE(3)/SO(3) logarithms; 1e-9), and
its Jacobians against central differences over the state's tangent (q (+) dq, v + dv)."""

import jax
import jax.numpy as jnp
import numpy as np
import pinocchio as pin
import pytest

import dynamics
from dynamics.configuration import integrate
from trajopt import residual_library as lib
from trajopt.problem import KnotState
from trajopt.terms import context

TOL = 1e-9
FOOT = "FL_foot"


@pytest.fixture(scope="module")
def go2():
    return dynamics.load_robot("go2")


@pytest.fixture(scope="module")
def pinocchio_go2():
    model = dynamics.load_pinocchio("go2").model
    return model, model.createData()


@pytest.fixture(scope="module")
def states(go2):
    keys = jax.random.split(jax.random.PRNGKey(7), 8)
    rng = np.random.default_rng(3)
    return [(np.asarray(dynamics.random_configuration(go2, k)), rng.normal(size=go2.nv),
             rng.normal(size=go2.nu), rng.normal(size=(go2.nfeet, 3)) * 50.0)
            for k in keys]  # fmt: skip


def value(model, term, q, v, u=None, forces=None):
    """The term's activated residual at `(q, v, u, forces)`, knot 0, its target's first row."""
    u = np.zeros(model.nu) if u is None else u
    forces = np.zeros((model.nfeet, 3)) if forces is None else forces
    x = KnotState(jnp.asarray(q), jnp.asarray(v), jnp.zeros(model.nu))
    row = None if term.target is None else jnp.asarray(term.target, dtype=float)
    ctx = context(model, x, jnp.asarray(u), jnp.asarray(forces), jnp.zeros(model.nu), 0, 0.02,
                  row, term.terminal)  # fmt: skip
    return np.asarray(term.evaluate(ctx))


def test_frame_terms_match_pinocchio(go2, pinocchio_go2, states):
    pm, pd = pinocchio_go2
    fid = pm.getFrameId(FOOT)
    for q, v, _, _ in states:
        pin.forwardKinematics(pm, pd, q, v)
        pin.updateFramePlacements(pm, pd)
        placement = pd.oMf[fid]
        r = value(go2, lib.frame_translation(go2, FOOT, np.zeros(3)), q, v)
        np.testing.assert_allclose(r, placement.translation, atol=TOL)
        # against a target placement a known motion away: the residual is that motion's log
        offset = pin.exp6(pin.Motion(np.array([0.01, -0.02, 0.03, 0.2, -0.1, 0.3])))
        target = placement * offset.inverse()
        r = value(go2, lib.frame_placement(go2, FOOT, target.translation, target.rotation), q, v)
        np.testing.assert_allclose(r[:3], placement.translation - target.translation, atol=TOL)
        np.testing.assert_allclose(r[3:], pin.log3(target.rotation.T @ placement.rotation),
                                   atol=TOL)  # fmt: skip
        for reference, pin_reference in (("local", pin.LOCAL), ("world", pin.WORLD),
                                         ("local_world_aligned", pin.LOCAL_WORLD_ALIGNED)):
            ours = value(go2, lib.frame_velocity(go2, FOOT, part="both", reference=reference),
                         q, v)  # fmt: skip
            ref = pin.getFrameVelocity(pm, pd, fid, pin_reference)
            np.testing.assert_allclose(ours, np.r_[ref.linear, ref.angular], atol=TOL)


def test_centroidal_terms_match_pinocchio(go2, pinocchio_go2, states):
    pm, pd = pinocchio_go2
    for q, v, _, _ in states:
        com = pin.centerOfMass(pm, pd, q, v)
        np.testing.assert_allclose(value(go2, lib.com_position(go2, np.zeros(3)), q, v), com,
                                   atol=TOL)  # fmt: skip
        np.testing.assert_allclose(value(go2, lib.com_velocity(go2), q, v), pd.vcom[0], atol=TOL)
        pin.computeCentroidalMomentum(pm, pd, q, v)
        np.testing.assert_allclose(value(go2, lib.centroidal_momentum(go2), q, v),
                                   np.r_[pd.hg.linear, pd.hg.angular], atol=TOL)  # fmt: skip


def test_state_control_and_contact_terms(go2, states):
    for q, v, u, forces in states:
        rotation = pin.Quaternion(q[6], q[3], q[4], q[5]).toRotationMatrix()
        target = rotation @ pin.exp3(np.array([0.1, 0.2, -0.3]))
        r = value(go2, lib.base_pose(go2, [0.1, 0.2, 0.3], target), q, v)
        np.testing.assert_allclose(r[:3], q[:3] - [0.1, 0.2, 0.3], atol=TOL)
        np.testing.assert_allclose(r[3:], [-0.1, -0.2, 0.3], atol=TOL)
        r = value(go2, lib.joint_state(go2, np.ones(12), np.full(12, 2.0)), q, v)
        np.testing.assert_allclose(r, np.r_[q[7:] - 1.0, v[6:] - 2.0], atol=TOL)
        np.testing.assert_allclose(value(go2, lib.control(go2, np.ones(12)), q, v, u), u - 1.0)
        f = forces[2]
        np.testing.assert_allclose(value(go2, lib.contact_force(go2, 2, [1.0, 2.0, 3.0]), q, v,
                                         forces=forces), f - [1.0, 2.0, 3.0])  # fmt: skip
        margin = 0.7 * f[2] - np.sqrt(f[0] ** 2 + f[1] ** 2 + lib.FRICTION_EPS)
        r = value(go2, lib.friction_cone_margin(go2, "RL_foot", 0.7), q, v, forces=forces)
        np.testing.assert_allclose(r, [min(margin, 0.0)], atol=TOL)  # zero inside the cone


def test_footholds_match_pinocchio(go2, pinocchio_go2, states):
    """`s_i (p_i,xy - p*_i,xy)`: each stance foot's Pinocchio frame position from its foothold,
    zero for a foot in swing (s = 0)."""
    pm, pd = pinocchio_go2
    rng = np.random.default_rng(5)
    rows = np.concatenate([rng.normal(size=(3, 4, 2)), np.array([1.0, 0.0, 1.0, 1.0])[None, :, None]
                           * np.ones((3, 4, 1))], axis=2)  # fmt: skip
    term = lib.footholds(go2, rows)
    for q, v, _, _ in states:
        pin.framesForwardKinematics(pm, pd, q)
        feet = np.array([pd.oMf[pm.getFrameId(f)].translation[:2] for f in go2.foot_names])
        x = KnotState(jnp.asarray(q), jnp.asarray(v), jnp.zeros(go2.nu))
        ctx = context(go2, x, x.u_prev, jnp.zeros((4, 3)), x.u_prev, 1, 0.02,
                      jnp.asarray(rows[1]), False)  # fmt: skip
        expected = (rows[1, :, 2:3] * (feet - rows[1, :, :2])).ravel()
        np.testing.assert_allclose(np.asarray(term.evaluate(ctx)), expected, atol=TOL)
        assert np.all(np.asarray(term.evaluate(ctx))[2:4] == 0.0)  # FR in swing


def test_a_term_at_one_knot_is_zero_at_the_others(go2, states):
    q, v, _, _ = states[0]
    term = lib.frame_translation(go2, FOOT, np.zeros(3), knot=3)
    x = KnotState(jnp.asarray(q), jnp.asarray(v), jnp.zeros(go2.nu))
    rows = jnp.zeros(3)
    at = [np.asarray(term.evaluate(context(go2, x, x.u_prev, jnp.zeros((4, 3)), x.u_prev, t,
                                           0.02, rows, False))) for t in (2, 3)]  # fmt: skip
    assert np.all(at[0] == 0.0) and np.all(at[1] != 0.0)


@pytest.mark.parametrize("make", [
    lambda m: lib.frame_placement(m, FOOT, [0.2, 0.1, 0.0], pin.exp3(np.array([0.3, 0.2, 0.1]))),
    lambda m: lib.frame_velocity(m, FOOT, part="both", reference="local"),
    lambda m: lib.com_velocity(m),
    lambda m: lib.centroidal_momentum(m),
    lambda m: lib.base_pose(m, [0.0, 0.0, 0.3], pin.exp3(np.array([0.1, -0.2, 0.3]))),
])  # fmt: skip
def test_jacobians_match_central_differences(go2, states, make):
    """d r / d(dq, dv) at `(q (+) dq, v + dv)`, forward-mode JAX against central differences
    (step 1e-6, so the error is about 1e-8 relative)."""
    term = make(go2)
    q, v, _, _ = states[1]

    def r(tangent):
        q1 = integrate(go2, jnp.asarray(q), tangent[: go2.nv])
        x = KnotState(q1, jnp.asarray(v) + tangent[go2.nv :], jnp.zeros(go2.nu))
        ctx = context(go2, x, x.u_prev, jnp.zeros((4, 3)), x.u_prev, 0, 0.02,
                      jnp.asarray(term.target, dtype=float), False)  # fmt: skip
        return term.evaluate(ctx)

    zero = jnp.zeros(2 * go2.nv)
    jac = np.asarray(jax.jit(jax.jacfwd(r))(zero))
    f = jax.jit(r)
    eps = 1e-6
    fd = np.stack([(np.asarray(f(zero.at[i].set(eps))) - np.asarray(f(zero.at[i].set(-eps))))
                   / (2 * eps) for i in range(2 * go2.nv)], axis=1)  # fmt: skip
    np.testing.assert_allclose(jac, fd, atol=1e-6 * (1.0 + np.abs(fd).max()))


def test_bad_frames_feet_and_settings_name_the_term(go2):
    with pytest.raises(ValueError, match="term 'no_such_frame_translation': unknown frame"):
        lib.frame_translation(go2, "no_such_frame", np.zeros(3))
    with pytest.raises(ValueError, match="term 'hand_force': unknown foot 'hand'"):
        lib.contact_force(go2, "hand")
    with pytest.raises(ValueError, match=r"term 'com_position': target must have shape \(3,\)"):
        lib.com_position(go2, [0.0, 0.3])
    with pytest.raises(ValueError, match="term 'FL_foot_velocity': part must be one of"):
        lib.frame_velocity(go2, FOOT, part="linear_x")
    with pytest.raises(ValueError, match="term 'FR_foot_friction_cone': mu must be positive"):
        lib.friction_cone_margin(go2, "FR_foot", mu=0.0)
    with pytest.raises(ValueError, match="knot must be a knot index >= 0"):
        lib.frame_translation(go2, FOOT, np.zeros(3), knot=-1)
