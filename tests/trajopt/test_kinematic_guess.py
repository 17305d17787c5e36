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
from contact.terrain import height as terrain_height
from trajopt.gaits import make_problem
from trajopt.kinematic_guess import (
    configuration_steps,
    foot_targets,
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


def _plain_stance_midpoints(stance):
    """`stance_midpoints` by its definition, knot by knot and foot by foot."""
    n, nfeet = stance.shape
    prev, nxt, blend = np.zeros((n, nfeet)), np.zeros((n, nfeet)), np.zeros((n, nfeet))
    for i in range(nfeet):
        s = [bool(x > 0.5) for x in stance[:, i]]
        runs = []  # (first, last) knots of each stance
        for t in range(n):
            if s[t] and (t == 0 or not s[t - 1]):
                runs.append([t, t])
            if s[t]:
                runs[-1][1] = t
        full = [e - b + 1 for b, e in runs if b > 0 and e < n - 1]
        length = max(full) if full else max((e - b + 1 for b, e in runs), default=n)
        mids = []
        for b, e in runs:
            if b == 0 and e < n - 1:
                b = e - length + 1
            elif e == n - 1 and b > 0:
                e = b + length - 1
            mids.append(max(0.5 * (b + e), 0.0))
        for t in range(n):
            inside = [k for k, (b, e) in enumerate(runs) if b <= t <= e]
            if inside:
                prev[t, i] = nxt[t, i] = mids[inside[0]]
                continue
            before = [k for k, (b, e) in enumerate(runs) if e < t]
            after = [k for k, (b, e) in enumerate(runs) if b > t]
            prev[t, i] = mids[before[-1]] if before else 0.0
            nxt[t, i] = mids[after[0]] if after else (n - 1) + 0.5 * length
            lift = runs[before[-1]][1] if before else -1
            land = runs[after[0]][0] if after else n
            blend[t, i] = (t - lift) / (land - lift)
    return prev, nxt, blend


def _plain_foot_targets(problem, place=None):
    """`(feet (T+1, nfeet, 3), calls)`: the foot targets by the module docstring, knot by knot
    (our JAX kinematics for the standing offsets), with every `place(i, p)` call made."""
    model, ref, dt = problem.model, problem.data.reference, problem.dt_knot
    q0 = np.asarray(problem.data.x0.q)
    vel = np.asarray(ref.base_velocity)
    n = vel.shape[0]
    xy, yaw = [q0[0:2].astype(float)], [2.0 * np.arctan2(q0[5], q0[6])]
    for t in range(1, n):
        c, s = np.cos(yaw[-1]), np.sin(yaw[-1])
        xy.append(xy[-1] + dt * np.array([c * vel[t - 1, 0] - s * vel[t - 1, 1],
                                          s * vel[t - 1, 0] + c * vel[t - 1, 1]]))  # fmt: skip
        yaw.append(yaw[-1] + dt * vel[t - 1, 2])
    q_stand = np.array(model.q_standing, dtype=float)
    q_stand[0:2], q_stand[3:7] = 0.0, [0.0, 0.0, 0.0, 1.0]
    offsets = _foot_positions(model, q_stand[None])[0] * np.array([1.0, 1.0, 0.0])
    calls = []

    def foothold(mid, i):
        k = min(max(mid, 0.0), n - 1)
        lo, a = int(np.floor(k)), k - np.floor(k)
        hi = min(lo + 1, n - 1)
        p_xy, yw = (1 - a) * xy[lo] + a * xy[hi], (1 - a) * yaw[lo] + a * yaw[hi]
        if mid > n - 1:  # beyond the horizon: on at the last command
            extra = (mid - (n - 1)) * dt
            c, s = np.cos(yaw[-1]), np.sin(yaw[-1])
            v = vel[-1]
            p_xy = p_xy + extra * np.array([c * v[0] - s * v[1], s * v[0] + c * v[1]])
            yw = yw + extra * v[2]
        c, s = np.cos(yw), np.sin(yw)
        o = offsets[i]
        p = np.array([p_xy[0] + c * o[0] - s * o[1], p_xy[1] + s * o[0] + c * o[1], 0.0])
        if place is None:
            return p
        calls.append((i, p.copy()))
        return np.asarray(place(i, p), dtype=float)

    prev, nxt, blend = _plain_stance_midpoints(np.asarray(ref.stance))
    nfeet = len(model.foot_names)
    feet = np.zeros((n, nfeet, 3))
    terrain = jax.device_get(problem.data.params.terrain)
    radius = np.broadcast_to(np.asarray(model.foot_radius, dtype=float), (nfeet,))
    for t in range(n):
        for i in range(nfeet):
            a = 0.5 - 0.5 * np.cos(np.pi * blend[t, i])
            feet[t, i] = (1 - a) * foothold(prev[t, i], i) + a * foothold(nxt[t, i], i)
            ground = float(terrain_height(terrain, feet[t, i, 0], feet[t, i, 1]))
            feet[t, i, 2] = ground + radius[i] + float(ref.swing_height[t, i])
    return feet, calls


@pytest.mark.parametrize("seed", range(4))
def test_stance_midpoints_equal_the_knot_by_knot_definition(seed):
    """Random flags, a gait's pattern, all stance and all flight (uncut and cut stances,
    swings before the first and after the last one)."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 30))
    patterns = [
        (rng.random((n, 4)) < 0.6).astype(float),
        np.ones((n, 3)),
        np.zeros((n, 2)),
        np.asarray(make_problem("go2", "bound", 0.5, duration=0.6).data.reference.stance),
    ]
    for stance in patterns:
        for got, expected in zip(stance_midpoints(stance), _plain_stance_midpoints(stance),
                                 strict=True):  # fmt: skip
            np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("gait, speed", [("pace", 0.5), ("turn", 0.8)])
def test_foot_targets_equal_a_knot_by_knot_evaluation(gait, speed):
    """The pace has a lead-in on all feet (a first stance cut by the horizon's start); the turn
    rotates the standing offsets with the yaw; both end with feet swinging towards footholds
    beyond the horizon."""
    problem = make_problem("go2", gait, speed, duration=0.8)
    prev, nxt, _ = stance_midpoints(np.asarray(problem.data.reference.stance))
    assert np.any(nxt > problem.horizon)  # a foothold extrapolated beyond the last knot
    if gait == "pace":
        assert np.all(np.asarray(problem.data.reference.stance)[0:3] > 0.5)  # the lead-in
    base_q, feet, _ = foot_targets(problem)
    expected, _ = _plain_foot_targets(problem)
    np.testing.assert_allclose(feet, expected, rtol=0, atol=1e-9)
    assert base_q.shape == (problem.horizon + 1, 7)


def test_place_moves_each_foothold_once():
    """`place` gets the nominal footholds the knot-by-knot evaluation would give it (each
    distinct foot and point once, though a stance's foothold serves many knots), and the
    targets run between the moved footholds."""
    problem = make_problem("go2", "turn", 0.8, duration=0.8)

    def moved(i, p):
        return np.array([p[0] + 0.02 * np.sin(5.0 * p[1]), p[1] + 0.01 * i, 0.0])

    calls = []

    def place(i, p):
        calls.append((i, np.array(p, dtype=float)))
        return moved(i, p)

    _, feet, _ = foot_targets(problem, place)
    expected, plain_calls = _plain_foot_targets(problem, moved)
    np.testing.assert_allclose(feet, expected, rtol=0, atol=1e-9)
    _, nominal, _ = foot_targets(problem)
    assert np.max(np.abs(feet[..., :2] - nominal[..., :2])) > 0.005  # place did move them
    got = np.array([[i, *p] for i, p in calls])
    every = np.array([[i, *p] for i, p in plain_calls])
    # each call is one of the knot-by-knot calls, and each of those is made exactly once
    matches = np.max(np.abs(got[:, None] - every[None]), axis=-1) < 1e-9  # (calls, every)
    assert np.all(matches.sum(axis=0) == 1) and np.all(matches.any(axis=1))
    assert len(calls) < len(plain_calls) / 4
