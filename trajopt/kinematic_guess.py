"""A kinematic warm start for gait problems: footholds, swing arcs and leg inverse kinematics.

The optimiser starts far better from a trajectory that already steps than from standing still
(FDDP from a standing rollout leaves the feet of a pace, bound or pronk on the ground). The
guess is built from the problem's references alone:

1. Base: its xy integrates the commanded base-frame velocity `[v_x, v_y]` rotated by the yaw
   that integrates the commanded yaw rate; its height is the reference height above the
   terrain; roll and pitch are zero.
2. Footholds (Raibert-style, without feedback): foot i in stance stands at
   `p_base(t_mid) + R_z(yaw(t_mid)) n_i`, where `n_i` is its standing offset from the base
   (world axes, from `q_standing`) and `t_mid` the middle of the current stance (clamped to
   t >= 0, so the first stance is the initial foothold). In swing it moves from the previous
   to the next foothold along a cosine blend, at the reference clearance `swing_height`.
3. Joints: damped Gauss-Newton inverse kinematics of every foot position with the base pose
   fixed (Pinocchio, `LOCAL_WORLD_ALIGNED` foot Jacobians), warm-started knot to knot.
4. Controls: for PD targets, `u = q_j + tau_ff / kp` where `tau_ff` is the static torque that
   holds the weight equally on the stance feet (`tau = g_j(q) - J_c^T f`, `f = m g / n_stance`
   vertical), so the PD does not sag under load; for torque control `u = tau_ff`.

States for multiple shooting: the kinematic knots, velocities by finite differences.
"""

from __future__ import annotations

import jax
import numpy as np
from scipy.linalg import lapack

from contact.terrain import height as terrain_height

from . import problem as P

IK_ITERATIONS = 30
IK_DAMPING = 1e-6


def configuration_steps(q: np.ndarray) -> np.ndarray:
    """`(T, nv)`: `q[t+1] (-) q[t]` of free-flyer configurations `q (T+1, 7 + n_j)` (base
    `[p, quat xyzw]` in the world): the base twist `log6(M_t^-1 M_{t+1})` in the base frame
    (linear, angular), then the joint differences. Pinocchio's SE(3) log, in NumPy."""
    import pinocchio as pin

    base = np.array([
        pin.log6(pin.XYZQUATToSE3(a).actInv(pin.XYZQUATToSE3(b))).vector
        for a, b in zip(q[:-1, 0:7], q[1:, 0:7], strict=True)
    ]).reshape(-1, 6)  # fmt: skip
    return np.concatenate([base, q[1:, 7:] - q[:-1, 7:]], axis=1)


def pinocchio_feet(model):
    """`(pin_model, data, foot_frame_ids)` of the robot's Pinocchio model (C++ kinematics).
    The functions below take it as `pin_feet` to share one `data` (they overwrite it)."""
    from dynamics.robots import load_pinocchio

    pin_model = load_pinocchio(model.name).model
    return pin_model, pin_model.createData(), [pin_model.getFrameId(f) for f in model.foot_names]


def _yaw_quaternions(yaw: np.ndarray) -> np.ndarray:
    """`(n, 4)` quaternions `[x, y, z, w]` of rotations by `yaw (n,)` about z."""
    yaw = np.asarray(yaw, dtype=float)
    zero = np.zeros_like(yaw)
    return np.stack([zero, zero, np.sin(0.5 * yaw), np.cos(0.5 * yaw)], axis=-1)


def base_path(reference: P.Reference, dt: float, xy0, yaw0: float):
    """`(xy (T+1, 2), yaw (T+1,))` integrating the base-frame velocity reference (explicit
    Euler at the knots, as the velocity cost sees it):
    `yaw[t] = yaw[t-1] + dt w_z[t-1]`, `xy[t] = xy[t-1] + dt R_z(yaw[t-1]) [v_x, v_y][t-1]`."""
    vel = np.asarray(reference.base_velocity)
    # running sums (`cumsum` adds left to right, as the knot-by-knot recursion does)
    yaw = np.cumsum(np.concatenate([[yaw0], dt * vel[:-1, 2]]))
    c, s = np.cos(yaw[:-1]), np.sin(yaw[:-1])
    vx, vy = vel[:-1, 0], vel[:-1, 1]
    steps = dt * np.stack([c * vx - s * vy, s * vx + c * vy], axis=1)
    xy = np.cumsum(np.concatenate([np.reshape(np.asarray(xy0, dtype=float), (1, 2)), steps]), 0)
    return xy, yaw


def stance_midpoints(stance: np.ndarray):
    """For each knot and foot, the knot index (float) of the middle of the stance the foot is
    in, and of the previous and next stances, from the 0/1 stance flags `(T+1, nfeet)`.

    Returns `(previous, next, blend)`, each `(T+1, nfeet)`: in stance `previous = next` = the
    current stance's middle and `blend = 0`; in swing `blend` in (0, 1) is the elapsed swing
    fraction. A stance cut by the horizon's ends is extended symmetrically (its middle is where
    a full stance of the same foot's typical length (its longest uncut one, else its longest
    one, else the horizon) would have it), and clamped to >= 0. A swing before a foot's first
    stance starts from the middle 0; one after its last stance aims half a typical stance
    beyond the horizon's last knot.
    """
    down = np.asarray(stance) > 0.5
    n, nfeet = down.shape
    pad = np.zeros((1, nfeet), dtype=np.int8)
    edges = np.diff(np.concatenate([pad, down.astype(np.int8), pad]), axis=0)  # (T+2, nfeet)
    foot, start = np.nonzero(edges.T == 1)  # the stance runs, foot by foot, in time order
    end = np.nonzero(edges.T == -1)[1] - 1  # their last knots (inclusive)
    lengths = end - start + 1
    inner = (start > 0) & (end < n - 1)
    longest_inner = np.full(nfeet, -1)
    np.maximum.at(longest_inner, foot[inner], lengths[inner])
    longest = np.full(nfeet, -1)
    np.maximum.at(longest, foot, lengths)
    length = np.where(longest_inner > 0, longest_inner, np.where(longest > 0, longest, n))
    typical = length[foot]
    begin = np.where((start == 0) & (end < n - 1), end - typical + 1, start)
    finish = np.where((end == n - 1) & (start > 0), start + typical - 1, end)
    # per foot, column j: before the first stance (j = 0), stance j - 1, after the last one
    count = np.bincount(foot, minlength=nfeet)
    column = np.arange(foot.size) - (np.cumsum(count) - count)[foot] + 1
    rows = np.arange(nfeet)
    mids = np.zeros((nfeet, int(count.max(initial=0)) + 2))
    mids[foot, column] = np.maximum(0.5 * (begin + finish), 0.0)
    mids[rows, count + 1] = (n - 1) + 0.5 * length
    lift = np.full(mids.shape, -1)  # the knot the swing after column j lifts off
    lift[foot, column] = end
    land = np.full(mids.shape, n)  # and lands
    land[foot, column - 1] = start
    # j = the number of stances begun by knot t: the current stance's column, or the next
    # stance's column - 1 in swing
    j = np.cumsum(edges[:n] == 1, axis=0)
    feet = rows[None, :]
    prev = mids[feet, j]
    nxt = np.where(down, prev, mids[feet, j + 1])
    knots = np.arange(n)[:, None]
    fraction = (knots - lift[feet, j]) / (land[feet, j] - lift[feet, j])
    return prev, nxt, np.where(down, 0.0, fraction)


def nominal_footholds(mid, foot, xy, yaw, offsets, velocity, dt: float) -> np.ndarray:
    """`(K, 3)` world footholds (z = 0) of feet `foot (K,)` int for stance middles `mid (K,)`
    (knot index, float): `p = [p_base(mid), 0] + R_z(yaw(mid)) n_i`, with the base path
    `xy (T+1, 2)`, `yaw (T+1,)` interpolated linearly between knots, and extrapolated beyond the
    last knot at the last commanded base-frame velocity `velocity = [v_x, v_y, w_z]`;
    `offsets (nfeet, 3)` the standing offsets `n_i` (world axes at yaw 0, z = 0)."""
    n = xy.shape[0]
    mid = np.asarray(mid, dtype=float)
    k = np.clip(mid, 0.0, n - 1)
    lo = np.floor(k).astype(int)
    hi = np.minimum(lo + 1, n - 1)
    a = k - lo
    extra = np.maximum(mid - (n - 1), 0.0)  # knots beyond the horizon (0 within it)
    c, s = np.cos(yaw[-1]), np.sin(yaw[-1])
    drift = np.array([c * velocity[0] - s * velocity[1], s * velocity[0] + c * velocity[1]])
    p_xy = (1 - a)[:, None] * xy[lo] + a[:, None] * xy[hi] + (extra * dt)[:, None] * drift
    yw = (1 - a) * yaw[lo] + a * yaw[hi] + extra * dt * velocity[2]
    c, s = np.cos(yw), np.sin(yw)
    ox, oy = offsets[foot, 0], offsets[foot, 1]
    return np.stack([p_xy[:, 0] + (c * ox - s * oy), p_xy[:, 1] + (s * ox + c * oy),
                     np.zeros_like(yw)], axis=-1)  # fmt: skip


def unique_footholds(prev: np.ndarray, nxt: np.ndarray):
    """The distinct `(mid, foot)` pairs of the stance middles `prev, nxt (T+1, nfeet)`
    (`stance_midpoints`; a stance's middle repeats at all its knots and in the neighbouring
    swings): `(mid (K,), foot (K,), index (T+1, nfeet, 2))`, the pairs in the order of first use
    (knot, foot, previous/next) and `index[t, i] = [j_prev, j_next]` into them."""
    n, nfeet = prev.shape
    mids = np.stack([prev, nxt], axis=-1).reshape(-1)
    feet = np.broadcast_to(np.arange(nfeet)[None, :, None], (n, nfeet, 2)).reshape(-1)
    order = np.lexsort((mids, feet))  # stable: a pair's first use leads its group
    new = np.ones(order.size, dtype=bool)
    new[1:] = (mids[order[1:]] != mids[order[:-1]]) | (feet[order[1:]] != feet[order[:-1]])
    group = np.cumsum(new) - 1
    first = order[new]  # each pair's first use, by (foot, mid)
    rank = np.empty_like(first)
    rank[np.argsort(first)] = np.arange(first.size)
    index = np.empty(order.size, dtype=int)
    index[order] = rank[group]
    used = np.sort(first)
    return mids[used], feet[used], index.reshape(n, nfeet, 2)


def foot_targets(
    problem: P.Problem, place=None, *, pin_feet=None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`(base_q (T+1, 7), feet (T+1, nfeet, 3), xy/yaw)`: base poses and world foot-sphere centre
    targets of the kinematic guess (see the module docstring). `place(i, p (3,)) -> (3,)`, if
    given, moves foot i's nominal foothold `p` (world, z = 0) where it should stand (a stone, a
    tread); the swing arcs then run between the placed footholds. It is called once for each
    distinct foothold (foot and stance), in the order the knots first use them."""
    import pinocchio as pin

    model = problem.model
    ref = problem.data.reference
    # host copies: a plane's height is then NumPy arithmetic, not a JAX program
    terrain = jax.device_get(problem.data.params.terrain)
    dt = problem.dt_knot
    q0 = np.asarray(problem.data.x0.q)
    yaw0 = float(2.0 * np.arctan2(q0[5], q0[6]))  # yaw of the initial base (roll/pitch ~ 0)
    xy, yaw = base_path(ref, dt, q0[0:2], yaw0)
    heights = np.asarray(ref.base_height)
    n = xy.shape[0]
    base_q = np.zeros((n, 7))
    # terrain heights of all points in one call (its functions are elementwise): one eager JAX
    # call per point was about a third of the 0.6 s guess of a 100-knot trot (cProfile)
    base_q[:, 0:2] = xy
    base_q[:, 2] = np.asarray(terrain_height(terrain, xy[:, 0], xy[:, 1])) + heights
    base_q[:, 3:7] = _yaw_quaternions(yaw)

    pin_model, data, foot_ids = pin_feet or pinocchio_feet(model)
    q_stand = np.asarray(model.q_standing, dtype=float).copy()
    q_stand[3:7] = [0.0, 0.0, 0.0, 1.0]
    q_stand[0:2] = 0.0
    pin.framesForwardKinematics(pin_model, data, q_stand)
    offsets = np.array([data.oMf[f].translation for f in foot_ids])  # base-relative, yaw 0
    offsets[:, 2] = 0.0
    radius = np.broadcast_to(np.asarray(model.foot_radius, float), (len(foot_ids),))

    stance = np.asarray(ref.stance)
    swing = np.asarray(ref.swing_height)
    prev, nxt, blend = stance_midpoints(stance)
    # each foothold once (a stance's middle repeats over its knots and the swings beside it)
    mid, foot, index = unique_footholds(prev, nxt)
    velocity = np.asarray(ref.base_velocity)[-1]
    holds = nominal_footholds(mid, foot, xy, yaw, offsets, velocity, dt)
    if place is not None:
        holds = np.array([np.broadcast_to(np.asarray(place(int(i), p.copy()), dtype=float), 3)
                          for i, p in zip(foot, holds, strict=True)]).reshape(-1, 3)  # fmt: skip
    a = (0.5 - 0.5 * np.cos(np.pi * blend))[..., None]  # cosine blend of the swing
    feet = (1 - a) * holds[index[..., 0]] + a * holds[index[..., 1]]
    ground = np.asarray(terrain_height(terrain, feet[..., 0], feet[..., 1]))
    feet[..., 2] = ground + radius[None, :] + swing
    return base_q, feet, (xy, yaw)


def _damped_step(jac: np.ndarray, err: np.ndarray, damping: np.ndarray) -> np.ndarray:
    """`(J^T J + lambda I)^-1 J^T e`: the damped Gauss-Newton step of `jac (m, nu)`, `err (m,)`,
    `damping = lambda I (nu, nu)` (LAPACK's LU solve, as `np.linalg.solve`)."""
    _, _, step, info = lapack.dgesv(jac.T.dot(jac) + damping, jac.T.dot(err))
    if info != 0:
        raise np.linalg.LinAlgError(f"singular IK system (LAPACK dgesv info {info})")
    return step


def leg_inverse_kinematics(model, base_q: np.ndarray, feet: np.ndarray, *, pin_feet=None):
    """Joint positions `(T+1, nu)` placing the foot frames at `feet (T+1, nfeet, 3)` (world)
    with the base at `base_q (T+1, 7)`: damped Gauss-Newton on the joint coordinates,
    `dq = (J^T J + lambda I)^-1 J^T (p* - p(q))` with the stacked foot Jacobians `J (3 nfeet, nu)`
    (`LOCAL_WORLD_ALIGNED`), joint limits enforced by clipping, until every foot coordinate is
    within 1e-7 m of its target (at most `IK_ITERATIONS`), warm-started from the previous knot.
    The legs are solved together (one system), so all of them take the same iterations."""
    import pinocchio as pin

    pin_model, data, foot_ids = pin_feet or pinocchio_feet(model)
    nu = model.nu
    nqb = model.nq - nu
    nvb = model.nv - nu
    lo = np.asarray(model.lower_position_limit, dtype=float)[nqb:]
    hi = np.asarray(model.upper_position_limit, dtype=float)[nqb:]
    damping = IK_DAMPING * np.eye(nu)
    frame = pin.LOCAL_WORLD_ALIGNED
    jacobians, placement = pin.computeJointJacobians, pin.updateFramePlacement
    frame_jacobian = pin.getFrameJacobian
    q = np.asarray(model.q_standing, dtype=float).copy()
    joints = q[nqb:]  # a view: the IK's iterate
    targets = np.asarray(feet, dtype=float).reshape(base_q.shape[0], -1)  # (T+1, 3 nfeet)
    out = np.zeros((base_q.shape[0], nu))
    for t in range(base_q.shape[0]):
        q[:nqb] = base_q[t]
        for _ in range(IK_ITERATIONS):
            # joint placements and Jacobians in one pass; the feet's placements from them
            jacobians(pin_model, data, q)
            err = targets[t] - np.concatenate(
                [placement(pin_model, data, f).translation for f in foot_ids]
            )
            if max(map(abs, err.tolist())) < 1e-7:  # every coordinate within 1e-7 m
                break
            jac = np.array([frame_jacobian(pin_model, data, f, frame) for f in foot_ids])
            step = _damped_step(jac[:, 0:3, nvb:].reshape(-1, nu), err, damping)
            np.minimum(np.maximum(joints + step, lo), hi, out=joints)
        out[t] = joints
    return out


def holding_torques(model, q: np.ndarray, stance: np.ndarray, *, pin_feet=None) -> np.ndarray:
    """Joint torques `(T+1, nu)` that hold the robot's weight in the configurations
    `q (T+1, nq)`, shared equally by the feet with `stance (T+1, nfeet)` = 1 (vertical forces):
    `tau = g_j(q) - sum_i J_i[:, j]^T f_i`. Zero gravity compensation of the legs in flight."""
    import pinocchio as pin

    pin_model, data, foot_ids = pin_feet or pinocchio_feet(model)
    nvb = model.nv - model.nu
    weight = model.total_mass * 9.81
    frame = pin.LOCAL_WORLD_ALIGNED
    q = np.asarray(q, dtype=float)
    down = np.asarray(stance) > 0.5
    n_stance = down.sum(axis=1)
    gravity = np.zeros((q.shape[0], model.nv))
    z_rows = np.zeros((q.shape[0], len(foot_ids), model.nu))  # J_i^T [0, 0, 1]
    for t in np.flatnonzero(n_stance):  # in flight: no gravity compensation, tau = 0
        gravity[t] = pin.computeGeneralizedGravity(pin_model, data, q[t])
        pin.computeJointJacobians(pin_model, data, q[t])
        jac = np.array([pin.getFrameJacobian(pin_model, data, f, frame) for f in foot_ids])
        z_rows[t] = jac[:, 2, nvb:]
    force = weight / np.maximum(n_stance, 1)  # f_z of each stance foot
    tau = gravity[:, nvb:]
    for i in range(len(foot_ids)):  # foot by foot, the stance feet's J_i^T f_i
        tau = tau - np.where(down[:, i, None], z_rows[:, i] * force[:, None], 0.0)
    return tau


def kinematic_guess(problem: P.Problem, place=None):
    """`(q (T+1, nq), v (T+1, nv), us (T, nu))` of the kinematic gait guess (module docstring;
    `place` moves the footholds, `foot_targets`).

    The first knot is the problem's initial state; `us[t]` is the control for knot t, targeting
    the joint positions of knot t+1 (PD) or holding it (torque)."""
    model = problem.model
    pin_feet = pinocchio_feet(model)  # one Pinocchio data for all the steps
    base_q, feet, _ = foot_targets(problem, place, pin_feet=pin_feet)
    q_joint = leg_inverse_kinematics(model, base_q, feet, pin_feet=pin_feet)
    q = np.concatenate([base_q, q_joint], axis=1)
    q[0] = np.asarray(problem.data.x0.q)
    dt = problem.dt_knot
    v = np.zeros((q.shape[0], model.nv))
    v[1:] = configuration_steps(q) / dt
    v[0] = np.asarray(problem.data.x0.v)
    stance = np.asarray(problem.data.reference.stance)
    tau = holding_torques(model, q, stance, pin_feet=pin_feet)
    if problem.control == "pd":
        kp = float(np.asarray(problem.data.gains)[0])
        us = q_joint[1:] + tau[1:] / kp
    else:  # torque control: tau = limit tanh(u / limit)
        limit = np.asarray(model.effort_limit)[model.nv - model.nu :]
        us = limit * np.arctanh(np.clip(tau[1:] / limit, -0.95, 0.95))
    return q, v, us
