"""The generated MuJoCo model against Pinocchio: masses, kinematics, dynamics and conventions.

MuJoCo's free-joint velocity is `[pdot in world, omega in body]`, Pinocchio's `[v_lin in base,
omega in base]`: `v = T qvel` with `T = blockdiag(R^T, I, I)`. Hence `M_mj = T^T M T`,
`qfrc_bias = T^T (nle - M c)` and `qacc = T^-1 (a + c)` with `c = [omega x v_lin; 0]`.
"""

import xml.etree.ElementTree as ET

import numpy as np
import pinocchio as pin
import pytest

import dynamics
from dynamics.mjcf import (
    a_from_qacc,
    mujoco_model,
    q_from_qpos,
    qacc_from_a,
    qfrc_from_tau,
    qpos_from_q,
    qvel_from_v,
    tau_from_qfrc,
    to_mjcf,
    v_from_qvel,
    velocity_transform,
)

mujoco = pytest.importorskip("mujoco")

N_STATES = 20
TOL = 1e-9


def _close(ours, ref, what, tol=TOL):
    ours, ref = np.asarray(ours), np.asarray(ref)
    err = np.max(np.abs(ours - ref) / (1.0 + np.abs(ref)))
    assert err < tol, f"{what}: max relative error {err:.2e}"


@pytest.fixture(scope="module")
def mj(model):
    return mujoco_model(model)


@pytest.fixture(scope="module")
def states(random_states):
    """The first `N_STATES` of the session's random states (conftest)."""
    return tuple(x[:N_STATES] for x in random_states)


def _full_mass_matrix(m, d):
    out = np.zeros((m.nv, m.nv))
    mujoco.mj_fullM(m, d, out)
    return out


def _set_state(model, m, d, q, v):
    d.qpos[:] = qpos_from_q(model, q)
    d.qvel[:] = qvel_from_v(model, v, q)


# ------------------------------------------------------------------ structure
def test_xml_is_valid_and_loads(model):
    for kw in ({}, {"actuators": "none", "floor_incline": 0.1, "integrator": "Euler"}):
        text = to_mjcf(model, **kw)
        root = ET.fromstring(text)
        assert root.tag == "mujoco"
        m = mujoco.MjModel.from_xml_string(text)
        assert (m.nq, m.nv) == (model.nq, model.nv)
        assert m.nu == (model.nu if kw.get("actuators", "motor") == "motor" else 0)
        assert m.ngeom == model.nfeet + 1
        d = mujoco.MjData(m)
        mujoco.mj_kinematics(m, d)
        a = kw.get("floor_incline", 0.0)  # the floor normal: ground rises along +x
        np.testing.assert_allclose(d.geom_xmat[0].reshape(3, 3)[:, 2], [-np.sin(a), 0, np.cos(a)])
    with pytest.raises(ValueError, match="actuators"):
        to_mjcf(model, actuators="position")


def test_total_mass_and_options(model, mj):
    assert abs(np.sum(mj.body_mass) - model.total_mass) < 1e-12 * model.total_mass
    np.testing.assert_allclose(mj.opt.gravity, np.asarray(model.gravity))
    assert mj.opt.timestep == 0.002
    assert mj.opt.cone == mujoco.mjtCone.mjCONE_ELLIPTIC
    assert mj.opt.integrator == mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    # Only feet against the floor: no two robot geoms can collide.
    floor = mujoco.mj_name2id(mj, mujoco.mjtObj.mjOBJ_GEOM, "floor")
    for g in range(mj.ngeom):
        for h in range(g + 1, mj.ngeom):
            collide = (mj.geom_contype[g] & mj.geom_conaffinity[h]) or (
                mj.geom_contype[h] & mj.geom_conaffinity[g]
            )
            assert bool(collide) == (floor in (g, h))
    for k, name in enumerate(model.foot_names):
        g = mujoco.mj_name2id(mj, mujoco.mjtObj.mjOBJ_GEOM, name)
        assert mj.geom_size[g, 0] == pytest.approx(float(model.foot_radius[k]))
        assert mj.geom_friction[g, 0] == pytest.approx(0.8)
    # Motors on the joints in v order, ranges from the effort limits.
    effort = np.asarray(model.effort_limit)[6:]
    np.testing.assert_allclose(mj.actuator_ctrlrange[:, 1], effort)
    np.testing.assert_array_equal(mj.actuator_trnid[:, 0], np.arange(1, model.njoints))
    np.testing.assert_array_equal(mj.actuator_gear[:, 0], 1.0)


def test_standing_keyframe(model, mj):
    d = mujoco.MjData(mj)
    mujoco.mj_resetDataKeyframe(mj, d, 0)
    _close(q_from_qpos(model, d.qpos), model.q_standing, "standing keyframe")


# ------------------------------------------------------------------ conventions
def test_converters_roundtrip(model, states):
    q, v, tau = states
    qpos = qpos_from_q(model, q)
    np.testing.assert_array_equal(qpos[:, 3:7], q[:, [6, 3, 4, 5]])
    _close(q_from_qpos(model, qpos), q, "q roundtrip", 1e-15)
    _close(v_from_qvel(model, qvel_from_v(model, v, q), qpos), v, "v roundtrip", 1e-14)
    _close(tau_from_qfrc(model, qfrc_from_tau(model, tau, q), qpos), tau, "tau roundtrip", 1e-14)
    qvel = qvel_from_v(model, v, q)
    _close(a_from_qacc(model, qacc_from_a(model, tau, v, q), qvel, qpos), tau, "a roundtrip", 1e-13)
    for i in range(3):  # power is invariant: tau . v == qfrc . qvel
        assert np.dot(tau[i], v[i]) == pytest.approx(
            np.dot(qfrc_from_tau(model, tau[i], q[i]), qvel[i]), rel=1e-12
        )


def test_velocity_convention_by_integration(model, pin_model, mj, states):
    """Central differences of MuJoCo's own `mj_integratePos` equal those of `pinocchio.integrate`
    when the MuJoCo velocity is `qvel_from_v(v)`: the frames of qvel are as documented."""
    q, v, _ = states
    h = 1e-6
    for i in range(5):
        qpos = qpos_from_q(model, q[i])
        qvel = qvel_from_v(model, v[i], q[i])
        ends = []
        for s in (h, -h):
            x = qpos.copy()
            mujoco.mj_integratePos(mj, x, qvel, s)
            ends.append(x)
        d_mj = (ends[0] - ends[1]) / (2 * h)
        d_pin = (
            qpos_from_q(model, pin.integrate(pin_model, q[i], v[i] * h))
            - qpos_from_q(model, pin.integrate(pin_model, q[i], -v[i] * h))
        ) / (2 * h)
        _close(d_mj, d_pin, "dq/dt", 1e-7)


# ------------------------------------------------------------------ kinematics and dynamics
def test_foot_positions(model, pin_model, mj, states):
    q, _, _ = states
    d = mujoco.MjData(mj)
    pd = pin_model.createData()
    geoms = [mujoco.mj_name2id(mj, mujoco.mjtObj.mjOBJ_GEOM, n) for n in model.foot_names]
    sites = [mujoco.mj_name2id(mj, mujoco.mjtObj.mjOBJ_SITE, n) for n in model.foot_names]
    for i in range(N_STATES):
        d.qpos[:] = qpos_from_q(model, q[i])
        mujoco.mj_kinematics(mj, d)
        pin.framesForwardKinematics(pin_model, pd, q[i])
        for g, s, f in zip(geoms, sites, model.foot_frames, strict=True):
            _close(d.geom_xpos[g], pd.oMf[f].translation, "foot position")
            _close(d.site_xmat[s].reshape(3, 3), pd.oMf[f].rotation, "foot frame rotation")


def test_mass_matrix(model, pin_model, mj, states):
    q, _, _ = states
    d = mujoco.MjData(mj)
    pd = pin_model.createData()
    for i in range(N_STATES):
        d.qpos[:] = qpos_from_q(model, q[i])
        mujoco.mj_forward(mj, d)
        m_pin = pin.crba(pin_model, pd, q[i])
        m_pin = np.triu(m_pin) + np.triu(m_pin, 1).T
        t = velocity_transform(model, q[i])
        _close(_full_mass_matrix(mj, d), t.T @ m_pin @ t, "mass matrix")


def test_bias_forces(model, pin_model, mj, states):
    q, v, _ = states
    d = mujoco.MjData(mj)
    pd = pin_model.createData()
    for i in range(N_STATES):
        _set_state(model, mj, d, q[i], v[i])
        mujoco.mj_forward(mj, d)
        m_pin = pin.crba(pin_model, pd, q[i])
        m_pin = np.triu(m_pin) + np.triu(m_pin, 1).T
        c = np.zeros(model.nv)
        c[:3] = np.cross(v[i, 3:6], v[i, :3])
        ref = velocity_transform(model, q[i]).T @ (pin.nle(pin_model, pd, q[i], v[i]) - m_pin @ c)
        _close(d.qfrc_bias, ref, "qfrc_bias")


def test_forward_dynamics(model, pin_model, states):
    """No contact (constraints disabled, robot 100 m up), random applied generalised force:
    MuJoCo's `qacc` mapped to our coordinates equals `pinocchio.aba`. The forces go once through
    `qfrc_applied` and once through the motors (joints) plus `qfrc_applied` (base)."""
    q, v, tau = states
    mj = mujoco_model(model, floor=False)
    mj.opt.disableflags = int(mujoco.mjtDisableBit.mjDSBL_CONSTRAINT) | int(
        mujoco.mjtDisableBit.mjDSBL_CLAMPCTRL  # |tau| ~ 5 exceeds Solo12's 2.7 Nm ctrlrange
    )
    d = mujoco.MjData(mj)
    pd = pin_model.createData()
    for i in range(N_STATES):
        qi = q[i].copy()
        qi[2] += 100.0
        _set_state(model, mj, d, qi, v[i])
        qfrc = qfrc_from_tau(model, tau[i], qi)
        ref = pin.aba(pin_model, pd, qi, v[i], tau[i])
        d.qfrc_applied[:] = qfrc
        d.ctrl[:] = 0.0
        mujoco.mj_forward(mj, d)
        _close(a_from_qacc(model, d.qacc, d.qvel, d.qpos), ref, "aba (qfrc_applied)")
        _close(d.qacc, qacc_from_a(model, ref, v[i], qi), "qacc")
        d.qfrc_applied[:] = 0.0
        d.qfrc_applied[:6] = qfrc[:6]
        d.ctrl[:] = tau[i, 6:]
        mujoco.mj_forward(mj, d)
        _close(a_from_qacc(model, d.qacc, d.qvel, d.qpos), ref, "aba (motors)")


def test_unaligned_prismatic_and_non_depth_first_joint_order():
    """A toy tree whose Pinocchio joint order (base, A, B, C with C under A) differs from
    MuJoCo's depth-first order (base, A, C, B), with an unaligned revolute and a prismatic
    joint: the converters permute, and dynamics and foot positions still agree."""
    from dynamics.model import model_from_pinocchio

    rng = np.random.default_rng(3)

    def inertia():
        return pin.Inertia(
            rng.uniform(0.5, 2.0), rng.normal(size=3) * 0.1, np.diag(rng.uniform(0.01, 0.02, 3))
        )

    pm = pin.Model()
    joints = [
        (0, pin.JointModelFreeFlyer(), pin.SE3.Identity(), "base"),
        (1, pin.JointModelRY(), pin.SE3(pin.utils.rotate("x", 0.3), np.array([0.2, 0.1, 0])), "A"),
        (1, pin.JointModelPZ(), pin.SE3(np.eye(3), np.array([-0.2, 0.0, 0.0])), "B"),
        (
            2,
            pin.JointModelRevoluteUnaligned(np.array([0.6, 0.8, 0.0])),
            pin.SE3(pin.utils.rotate("z", 0.5), np.array([0.0, 0.0, -0.3])),
            "C",
        ),
    ]
    for parent, jm, placement, name in joints:
        j = pm.addJoint(parent, jm, placement, name)
        pm.appendBodyToJoint(j, inertia(), pin.SE3.Identity())
    for name, joint, pos in (("fa", 4, [0.0, 0.0, -0.2]), ("fb", 3, [0.0, 0.05, -0.1])):
        pm.addFrame(pin.Frame(name, joint, 0, pin.SE3(np.eye(3), np.array(pos)), pin.OP_FRAME))
    pm.lowerPositionLimit[:] = -1.0
    pm.upperPositionLimit[:] = 1.0
    model = model_from_pinocchio(
        pm, name="toy", foot_names=("fa", "fb"), foot_radius=0.02, q_standing=pin.neutral(pm)
    )
    mj = mujoco_model(model)
    assert [mj.joint(i).name for i in range(mj.njnt)] == ["base", "A", "C", "B"]
    mj.opt.disableflags = int(mujoco.mjtDisableBit.mjDSBL_CONSTRAINT)
    d = mujoco.MjData(mj)
    pd = pm.createData()
    for _ in range(5):
        q = pin.randomConfiguration(pm)
        v, tau = rng.normal(size=pm.nv), rng.normal(size=pm.nv)
        _close(q_from_qpos(model, qpos_from_q(model, q)), q, "q roundtrip", 1e-15)
        _set_state(model, mj, d, q, v)
        d.qfrc_applied[:] = qfrc_from_tau(model, tau, q)
        mujoco.mj_forward(mj, d)
        _close(a_from_qacc(model, d.qacc, d.qvel, d.qpos), pin.aba(pm, pd, q, v, tau), "aba")
        pin.framesForwardKinematics(pm, pd, q)
        for k, f in enumerate(model.foot_frames):
            _close(d.geom_xpos[1 + k], pd.oMf[f].translation, "foot position")


# ------------------------------------------------------------------ physics smoke test
def test_go2_drop_settles_on_its_feet():
    model = dynamics.load_robot("go2")
    mj = mujoco_model(model, actuators="none")
    d = mujoco.MjData(mj)
    q0 = np.asarray(model.q_standing, dtype=float).copy()
    q0[2] += 0.1
    d.qpos[:] = qpos_from_q(model, q0)
    joints_ref = d.qpos[7:].copy()
    kp, kd = 80.0, 3.0
    for _ in range(int(2.0 / mj.opt.timestep)):
        d.qfrc_applied[6:] = kp * (joints_ref - d.qpos[7:]) - kd * d.qvel[6:]
        mujoco.mj_step(mj, d)
    assert np.all(np.isfinite(d.qpos))
    geoms = [mujoco.mj_name2id(mj, mujoco.mjtObj.mjOBJ_GEOM, n) for n in model.foot_names]
    heights = d.geom_xpos[geoms, 2]
    np.testing.assert_allclose(heights, np.asarray(model.foot_radius), atol=3e-3)
    assert np.max(np.abs(d.qvel)) < 0.05  # at rest
    up = d.xmat[1].reshape(3, 3)[:, 2]
    assert up[2] > 0.99  # upright
    in_contact = {int(g) for k in range(d.ncon) for g in d.contact.geom[k]}
    assert d.ncon == 4 and set(geoms) <= in_contact
