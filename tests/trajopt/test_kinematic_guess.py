"""The kinematic warm start of gait problems: footholds, swing arcs, IK and holding torques.

Checked with our own JAX kinematics (the guess itself uses Pinocchio's C++): the feet are where
the gait puts them, stance feet do not move, swing feet clear the ground by the reference, and
the base follows the command.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import dynamics
from trajopt.gaits import make_problem
from trajopt.kinematic_guess import (
    configuration_steps,
    holding_torques,
    kinematic_guess,
    pinocchio_feet,
    stance_midpoints,
)


@pytest.fixture(scope="module", params=["trot", "bound", "turn"])
def guess(request):
    gait = request.param
    problem = make_problem("go2", gait, 0.8 if gait == "turn" else 0.5, duration=0.8)
    q, v, us = kinematic_guess(problem)
    return problem, q, v, us


def _foot_positions(model, q):
    """`(T+1, nfeet, 3)` foot frame origins by our JAX kinematics."""
    names = model.foot_names
    placements = jax.jit(jax.vmap(lambda qt: dynamics.frame_placements(model, qt, names)[1]))
    return np.asarray(placements(jnp.asarray(q)))


def test_feet_follow_the_gait(guess):
    problem, q, v, us = guess
    model = problem.model
    feet = _foot_positions(model, q)  # (T+1, 4, 3) foot frame origins (sphere centres)
    radius = float(np.max(model.foot_radius))
    stance = np.asarray(problem.data.reference.stance) > 0.5
    swing_height = np.asarray(problem.data.reference.swing_height)
    # knot 0 is the initial state; from knot 1 on the IK places the feet
    for t in range(1, q.shape[0]):
        for i in range(4):
            expected = radius + (0.0 if stance[t, i] else swing_height[t, i])
            assert feet[t, i, 2] == pytest.approx(expected, abs=1e-5), (t, i)
    # a stance foot stays where it is within the stance (no slip in the guess)
    for i in range(4):
        for t in range(2, q.shape[0]):
            if stance[t, i] and stance[t - 1, i]:
                np.testing.assert_allclose(feet[t, i, :2], feet[t - 1, i, :2], atol=1e-5)
    assert np.ptp(feet[:, :, 2]) > 0.05  # the feet actually lift


def test_base_follows_the_command(guess):
    problem, q, v, us = guess
    ref = np.asarray(problem.data.reference.base_velocity)
    dt = problem.dt_knot
    yaw = np.unwrap(2.0 * np.arctan2(q[:, 5], q[:, 6]))
    np.testing.assert_allclose(np.diff(yaw) / dt, ref[:-1, 2], atol=1e-9)
    speed = np.linalg.norm(np.diff(q[:, 0:2], axis=0), axis=1) / dt
    np.testing.assert_allclose(speed, np.linalg.norm(ref[:-1, 0:2], axis=1), atol=1e-9)
    np.testing.assert_allclose(q[1:, 2], float(problem.model.q_standing[2]), atol=1e-12)
    assert us.shape == (problem.horizon, problem.nu) and np.all(np.isfinite(us))
    assert v.shape == (problem.horizon + 1, problem.model.nv)


def test_holding_torques_balance_the_weight_at_the_standing_pose():
    """Standing on four feet: the joint torques plus the four equal vertical foot forces must
    satisfy the joint rows of the static equilibrium g(q) = tau + J^T f (Pinocchio's RNEA at
    rest is g(q)); the guess's torque is exactly that, so the knee torques carry the load."""
    model = dynamics.load_robot("go2")
    q = np.asarray(model.q_standing)[None]
    tau = holding_torques(model, q, np.ones((1, 4)))[0]
    g = np.asarray(dynamics.gravity_forces(model, q[0]))[6:]
    weight = model.total_mass * 9.81
    jac = np.asarray(dynamics.frame_jacobians(model, q[0], model.foot_names))[:, 0:3, 6:]
    f = np.array([0.0, 0.0, weight / 4])
    np.testing.assert_allclose(tau + sum(j.T @ f for j in jac), g, atol=1e-9)
    assert np.all(np.abs(tau) < np.asarray(model.effort_limit)[6:])


def test_stance_midpoints_of_a_simple_pattern():
    stance = np.array([[1, 1, 0, 0, 1, 1, 1, 0]], dtype=float).T  # one foot, 8 knots
    prev, nxt, blend = stance_midpoints(stance)
    # first stance [0, 1] began before the horizon: extended to length 3 -> [-1, 1], mid 0
    assert prev[0, 0] == nxt[0, 0] == 0.0
    assert prev[4, 0] == nxt[4, 0] == 5.0  # stance [4, 6]
    assert prev[2, 0] == 0.0 and nxt[2, 0] == 5.0
    assert blend[2, 0] == pytest.approx(1 / 3) and blend[3, 0] == pytest.approx(2 / 3)
    assert nxt[7, 0] == pytest.approx(7 + 1.5)  # the horizon ends in swing


def test_configuration_steps_are_pinocchios_difference():
    """`configuration_steps` (the guess's knot velocities times dt) equals Pinocchio's own
    `difference` of the free-flyer model, knot to knot, on large random motions."""
    import pinocchio as pin

    problem = make_problem("go2", "trot", 0.5, duration=0.1)
    pin_model = pinocchio_feet(problem.model)[0]
    pin.seed(3)
    q = np.array([pin.randomConfiguration(pin_model, -np.ones(pin_model.nq), np.ones(pin_model.nq))
                  for _ in range(6)])  # fmt: skip
    expected = [pin.difference(pin_model, a, b) for a, b in zip(q[:-1], q[1:], strict=True)]
    np.testing.assert_allclose(configuration_steps(q), expected, rtol=0, atol=1e-12)
