"""Cross-check of the contact time-stepper against MuJoCo, an independent engine (issue 3).

Scenario (identical in both engines): the robot starts at its standing pose lifted 0.2 m, at
rest, and falls onto flat ground (mu = 0.8) while a joint PD controller holds the standing joint
angles with the same gains (`dynamics.actuator.default_gains`, the robot record's) and the same
effort clipping as `dynamics.actuator.pd_torque`, computed each step from the current state
(MuJoCo's `qpos/qvel` mapped to our convention), at dt = 2 ms for 3 s. MuJoCo runs the MJCF
generated from the same `dynamics.Model` (`dynamics.mjcf`: same inertias, foot spheres and
friction, no meshes, exact elliptic cone, near-rigid contact), torques applied through
`qfrc_applied`. Our `hard` and `smooth` models are compared; all quantities are averaged over
the last 0.5 s.

What is compared, with the tolerance and why:

- Both settled (every velocity component < 0.05 over the last 0.5 s) and upright: otherwise
  the averages mean nothing. Go2's light joint damping (Kd = 2) leaves a slowly decaying sway
  of ~0.01-0.03 rad/s at 3 s in both engines (MuJoCo reaches 1e-4 only after ~7 s).
- Sum of normal forces = m g within 1 % in each engine separately: static equilibrium, with
  no tolerance for modelling differences (measured: < 0.02 %).
- Net horizontal force < 1 % of m g: equilibrium again (measured: < 0.01 %).
- Base height within 2 mm of MuJoCo. Both engines hang the same mass on the same PD gains, so
  the sag of the legs is the same; MuJoCo's soft contact penetrates ~0.1 mm (solref 4 ms,
  solimp 0.95-0.99) and ours ~0 (hard) or ~bias/kappa (smooth, the activation shift, which
  does not sink the robot); what is left is the landing history: the feet slide a little on
  impact and the final stance width (hence how much the legs sag and the base pitches) is not
  a unique function of the gains (feet end up 0.1-1.3 mm apart). Measured: 0.10-0.17 mm
  (0.7 mm with an earlier variant of the hard model's speculative contact).
- Base orientation within 0.5 deg (same reason; measured <= 0.02 deg, and 0.2 deg with the
  earlier variant; Go2's ~0.8 deg pitch under its front/rear mass split is reproduced by both).
- Each foot's normal force within 3 % of m g of MuJoCo's. Four feet on a plane are statically
  indeterminate: three equilibrium equations (vertical force, roll and pitch moments) for four
  normal forces leave a one-parameter family (the "diagonal" mode +FL -FR -RL +RR), which only
  the compliance of the legs (the PD gains, the same in both) and of the contact (MuJoCo's soft
  constraint, none in ours) and the landing history select. So the fore/aft split (set by the
  centre of mass) must agree closely, but the diagonal mode may differ by a few percent.
  Measured: < 0.03 % of m g.
- Each foot's tangential force within 3 % of m g of MuJoCo's. These are not small: the PD
  legs sag, the feet want to splay outward and static friction holds them, so each foot
  carries an inward horizontal force (Go2 ~13 N of 40 N normal, Solo12 ~2.5 N of 6 N), an
  internal force of the closed chain (they cancel in the sum) that is indeterminate in the same
  way. Both engines give the same internal forces (measured: < 0.3 % of m g apart) and
  keep them inside the friction cone (checked, with 2 % slack for MuJoCo's soft cone).

The four JAX compilations (2 robots x 2 contact models) take most of this module's ~25 s.
`pytest -s` prints the measured differences (`test_print_summary`).
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import contact
import dynamics
from dynamics.actuator import default_gains, standing_controller
from dynamics.mjcf import (
    mujoco_model,
    q_from_qpos,
    qfrc_from_tau,
    qpos_from_q,
    v_from_qvel,
)

mujoco = pytest.importorskip("mujoco")

ROBOTS = ("go2", "solo12")
CONTACTS = ("hard", "smooth")
DT = 0.002
DURATION = 3.0
AVERAGE = 0.5  # seconds averaged at the end
LIFT = 0.2
MU = 0.8
NUM_STEPS = int(round(DURATION / DT))
NUM_AVG = int(round(AVERAGE / DT))

HEIGHT_TOL = 2e-3  # m
ANGLE_TOL = np.deg2rad(0.5)  # rad
FOOT_FORCE_TOL = 0.03  # fraction of m g, per foot and component (normal, tangential)
SUM_TOL = 0.01  # fraction of m g
REST_SPEED = 0.05  # max |v| component over the averaging window


@functools.cache
def _robot(name):
    return dynamics.load_robot(name)


def _initial_q(model):
    q0 = np.asarray(model.q_standing, dtype=float).copy()
    q0[2] += LIFT
    return q0


def _rotation(quat_xyzw):
    x, y, z, w = np.asarray(quat_xyzw) / np.linalg.norm(quat_xyzw)
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
            [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
            [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
        ]
    )


def _settled(qs, vs, forces, feet):
    """Averages over the last `AVERAGE` seconds of a trajectory in our convention."""
    quat = qs[-NUM_AVG:, 3:7].mean(axis=0)
    return {
        "height": float(qs[-NUM_AVG:, 2].mean()),
        "rotation": _rotation(quat),
        "force": forces[-NUM_AVG:].mean(axis=0),  # (4, 3) world frame [N]
        "feet": feet[-NUM_AVG:].mean(axis=0),  # (4, 3) contact points [m]
        "speed": float(np.max(np.abs(vs[-NUM_AVG:]))),
    }


@functools.cache
def run_mujoco(name):
    model = _robot(name)
    kp, kd = default_gains(dynamics.load_robot(name))
    target = np.asarray(model.q_standing, dtype=float)[7:]
    limit = np.asarray(model.effort_limit, dtype=float)[6:]
    mj = mujoco_model(model, timestep=DT, friction=MU, actuators="none")
    d = mujoco.MjData(mj)
    d.qpos[:] = qpos_from_q(model, _initial_q(model))
    d.qvel[:] = 0.0
    geoms = [mujoco.mj_name2id(mj, mujoco.mjtObj.mjOBJ_GEOM, n) for n in model.foot_names]
    qs, vs, forces, feet = [], [], [], []
    wrench = np.zeros(6)
    tau = np.zeros(model.nv)
    for _ in range(NUM_STEPS):
        q = q_from_qpos(model, d.qpos)
        v = v_from_qvel(model, d.qvel, d.qpos)
        tau[6:] = np.clip(kp * (target - q[7:]) - kd * v[6:], -limit, limit)  # = pd_torque
        d.qfrc_applied[:] = qfrc_from_tau(model, tau, q)
        mujoco.mj_step(mj, d)
        f = np.zeros((model.nfeet, 3))
        for i in range(d.ncon):
            con = d.contact[i]
            mujoco.mj_contactForce(mj, d, i, wrench)  # contact frame: [normal, t1, t2]
            # the frame's first row (normal) points from geom1 to geom2; the force acts on geom2
            world = con.frame.reshape(3, 3).T @ wrench[:3]
            if con.geom2 in geoms:
                f[geoms.index(con.geom2)] += world
            else:
                f[geoms.index(con.geom1)] -= world
        qs.append(q_from_qpos(model, d.qpos))
        vs.append(v_from_qvel(model, d.qvel, d.qpos))
        forces.append(f)
        feet.append(d.geom_xpos[geoms] - np.asarray(model.foot_radius)[:, None] * [0, 0, 1])
    return _settled(np.array(qs), np.array(vs), np.array(forces), np.array(feet))


@functools.cache
def run_ours(name, contact_model):
    model = _robot(name)
    params = contact.StepParams(terrain=contact.flat(friction=MU), dt=DT)
    controller = standing_controller(model, *default_gains(model))
    state = dynamics.State(jnp.asarray(_initial_q(model)), jnp.zeros(model.nv))
    sim = jax.jit(
        lambda s: contact.simulate(model, params, s, controller, NUM_STEPS, contact=contact_model)
    )
    _, (states, infos) = sim(state)
    return _settled(
        np.asarray(states.q), np.asarray(states.v), np.asarray(infos.force), np.asarray(infos.point)
    )


def _weight(name):
    model = _robot(name)
    return float(model.total_mass) * float(-np.asarray(model.gravity)[2])


@pytest.mark.parametrize("name", ROBOTS)
def test_mujoco_settles(name):
    """The reference itself: at rest, upright, equilibrium of forces."""
    ref, weight = run_mujoco(name), _weight(name)
    assert ref["speed"] < REST_SPEED
    assert ref["rotation"][2, 2] > np.cos(np.deg2rad(2.0))
    assert abs(ref["force"][:, 2].sum() - weight) < SUM_TOL * weight
    assert np.all(np.abs(ref["force"][:, :2].sum(axis=0)) < SUM_TOL * weight)
    # inside the friction cone (MuJoCo's cone is soft: a little slack)
    f = ref["force"]
    assert np.all(np.linalg.norm(f[:, :2], axis=1) <= 1.02 * MU * f[:, 2])


@pytest.mark.parametrize("contact_model", CONTACTS)
@pytest.mark.parametrize("name", ROBOTS)
def test_settled_state_and_forces_match_mujoco(name, contact_model):
    ours, ref, weight = run_ours(name, contact_model), run_mujoco(name), _weight(name)
    f, g = ours["force"], ref["force"]
    report = (
        f"{name}/{contact_model}: height {ours['height']:.5f} vs MuJoCo {ref['height']:.5f} m; "
        f"normal forces {np.round(f[:, 2], 3)} vs {np.round(g[:, 2], 3)} N; "
        f"tangential {np.round(f[:, :2], 3).tolist()} vs {np.round(g[:, :2], 3).tolist()} N; "
        f"m g = {weight:.3f} N"
    )

    # at rest, and static equilibrium on our side
    assert ours["speed"] < REST_SPEED, report
    assert abs(f[:, 2].sum() - weight) < SUM_TOL * weight, report
    assert np.all(np.abs(f[:, :2].sum(axis=0)) < SUM_TOL * weight), report
    assert np.all(np.linalg.norm(f[:, :2], axis=1) <= MU * f[:, 2] * (1 + 1e-6)), report

    # the settled pose
    assert abs(ours["height"] - ref["height"]) < HEIGHT_TOL, report
    relative = ours["rotation"].T @ ref["rotation"]
    angle = np.arccos(np.clip((np.trace(relative) - 1.0) / 2.0, -1.0, 1.0))
    assert angle < ANGLE_TOL, f"{report}; orientation differs by {np.rad2deg(angle):.3f} deg"

    # the contact forces, foot by foot
    normal_err = np.max(np.abs(f[:, 2] - g[:, 2])) / weight
    tangent_err = np.max(np.abs(f[:, :2] - g[:, :2])) / weight
    assert normal_err < FOOT_FORCE_TOL, f"{report}; normal error {normal_err:.2%} of m g"
    assert tangent_err < FOOT_FORCE_TOL, f"{report}; tangential error {tangent_err:.2%} of m g"


def test_print_summary(capsys):
    """Not a check: prints the compared numbers (`pytest -s`) for the record."""
    lines = []
    for name in ROBOTS:
        ref, weight = run_mujoco(name), _weight(name)
        for contact_model in CONTACTS:
            ours = run_ours(name, contact_model)
            relative = ours["rotation"].T @ ref["rotation"]
            angle = np.arccos(np.clip((np.trace(relative) - 1.0) / 2.0, -1.0, 1.0))
            f, g = ours["force"], ref["force"]
            lines.append(
                f"{name:7s} {contact_model:6s} dz {1e3 * (ours['height'] - ref['height']):+.3f} mm"
                f"  dangle {np.rad2deg(angle):.3f} deg"
                f"  max dFn {np.max(np.abs(f[:, 2] - g[:, 2])) / weight:.3%} mg"
                f"  max dFt {np.max(np.abs(f[:, :2] - g[:, :2])) / weight:.3%} mg"
                f"  sumFn/mg-1 {f[:, 2].sum() / weight - 1:+.2e}"
                f" (MuJoCo {g[:, 2].sum() / weight - 1:+.2e})"
                f"  max dfoot {1e3 * np.max(np.abs(ours['feet'] - ref['feet'])):.2f} mm"
            )
    with capsys.disabled():
        print("\n" + "\n".join(lines))
