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
    """`(pin_model, data, foot_frame_ids)` of the robot's Pinocchio model (C++ kinematics)."""
    from dynamics.robots import load_pinocchio

    pin_model = load_pinocchio(model.name).model
    return pin_model, pin_model.createData(), [pin_model.getFrameId(f) for f in model.foot_names]


def _yaw_quaternion(yaw: float) -> np.ndarray:
    """Quaternion `[x, y, z, w]` of a rotation by `yaw` about z."""
    return np.array([0.0, 0.0, np.sin(0.5 * yaw), np.cos(0.5 * yaw)])


def _rot_z(yaw: float) -> np.ndarray:
    c, s = np.cos(yaw), np.sin(yaw)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def base_path(reference: P.Reference, dt: float, xy0, yaw0: float):
    """`(xy (T+1, 2), yaw (T+1,))` integrating the base-frame velocity reference (explicit
    Euler at the knots, as the velocity cost sees it)."""
    vel = np.asarray(reference.base_velocity)
    n = vel.shape[0]
    xy = np.zeros((n, 2))
    yaw = np.zeros(n)
    xy[0], yaw[0] = xy0, yaw0
    for t in range(1, n):
        c, s = np.cos(yaw[t - 1]), np.sin(yaw[t - 1])
        vx, vy, wz = vel[t - 1]
        xy[t] = xy[t - 1] + dt * np.array([c * vx - s * vy, s * vx + c * vy])
        yaw[t] = yaw[t - 1] + dt * wz
    return xy, yaw


def stance_midpoints(stance: np.ndarray):
    """For each knot and foot, the knot index (float) of the middle of the stance the foot is
    in, and of the previous and next stances, from the 0/1 stance flags `(T+1, nfeet)`.

    Returns `(previous, next, blend)`, each `(T+1, nfeet)`: in stance `previous = next` = the
    current stance's middle and `blend = 0`; in swing `blend` in (0, 1) is the elapsed swing
    fraction. A stance cut by the horizon's ends is extended symmetrically (its middle is where
    a full stance of the same foot's typical length would have it), and clamped to >= 0.
    """
    n, nfeet = stance.shape
    prev = np.zeros((n, nfeet))
    nxt = np.zeros((n, nfeet))
    blend = np.zeros((n, nfeet))
    for i in range(nfeet):
        s = stance[:, i] > 0.5
        runs = []  # (start, end) inclusive stance runs
        t = 0
        while t < n:
            if s[t]:
                start = t
                while t < n and s[t]:
                    t += 1
                runs.append([start, t - 1])
            else:
                t += 1
        full = [e - b + 1 for b, e in runs if b > 0 and e < n - 1]
        length = max(full) if full else (max((e - b + 1 for b, e in runs), default=n))
        mids = []
        for b, e in runs:
            if b == 0 and e < n - 1:
                b = e - length + 1  # a stance that began before the horizon
            if e == n - 1 and b > 0:
                e = b + length - 1  # a stance that ends after it
            mids.append(max(0.5 * (b + e), 0.0))
        for t in range(n):
            if s[t]:
                k = next(j for j, (b, e) in enumerate(runs) if b <= t <= e)
                prev[t, i] = nxt[t, i] = mids[k]
                continue
            before = [j for j, (b, e) in enumerate(runs) if e < t]
            after = [j for j, (b, e) in enumerate(runs) if b > t]
            lift = runs[before[-1]][1] if before else -1
            land = runs[after[0]][0] if after else n
            prev[t, i] = mids[before[-1]] if before else 0.0
            if after:
                nxt[t, i] = mids[after[0]]
            else:  # the horizon ends in swing: aim half a stance beyond the end
                nxt[t, i] = (n - 1) + 0.5 * length
            blend[t, i] = (t - lift) / (land - lift)
    return prev, nxt, blend


def foot_targets(problem: P.Problem, place=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`(base_q (T+1, 7), feet (T+1, nfeet, 3), xy/yaw)`: base poses and world foot-sphere centre
    targets of the kinematic guess (see the module docstring). `place(i, p (3,)) -> (3,)`, if
    given, moves foot i's nominal foothold `p` (world, z = 0) where it should stand (a stone, a
    tread); the swing arcs then run between the placed footholds."""
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
    for t in range(n):
        base_q[t, 3:7] = _yaw_quaternion(yaw[t])

    pin_model, data, foot_ids = pinocchio_feet(model)
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

    def foothold(mid: float, i: int) -> np.ndarray:
        k = float(np.clip(mid, 0.0, n - 1))
        lo = int(np.floor(k))
        hi = min(lo + 1, n - 1)
        a = k - lo
        # beyond the horizon, extrapolate the base path at the commanded velocity
        extra = max(mid - (n - 1), 0.0)
        p_xy = (1 - a) * xy[lo] + a * xy[hi]
        yw = (1 - a) * yaw[lo] + a * yaw[hi]
        if extra > 0.0:
            v = np.asarray(ref.base_velocity)[-1]
            c, s = np.cos(yaw[-1]), np.sin(yaw[-1])
            p_xy = p_xy + extra * dt * np.array([c * v[0] - s * v[1], s * v[0] + c * v[1]])
            yw = yw + extra * dt * v[2]
        p = np.array([p_xy[0], p_xy[1], 0.0]) + _rot_z(yw) @ offsets[i]
        return p if place is None else np.asarray(place(i, p), dtype=float)

    feet = np.zeros((n, len(foot_ids), 3))
    for t in range(n):
        for i in range(len(foot_ids)):
            a = 0.5 - 0.5 * np.cos(np.pi * blend[t, i])
            feet[t, i] = (1 - a) * foothold(prev[t, i], i) + a * foothold(nxt[t, i], i)
    ground = np.asarray(terrain_height(terrain, feet[..., 0], feet[..., 1]))
    feet[..., 2] = ground + radius[None, :] + swing
    return base_q, feet, (xy, yaw)


def leg_inverse_kinematics(model, base_q: np.ndarray, feet: np.ndarray) -> np.ndarray:
    """Joint positions `(T+1, nu)` placing the foot frames at `feet (T+1, nfeet, 3)` (world)
    with the base at `base_q (T+1, 7)`: damped Gauss-Newton on the joint coordinates, joint
    limits enforced by clipping, warm-started from the previous knot."""
    import pinocchio as pin

    pin_model, data, foot_ids = pinocchio_feet(model)
    nqb = model.nq - model.nu
    nvb = model.nv - model.nu
    lo = np.asarray(model.lower_position_limit)[nqb:]
    hi = np.asarray(model.upper_position_limit)[nqb:]
    q = np.asarray(model.q_standing, dtype=float).copy()
    out = np.zeros((base_q.shape[0], model.nu))
    for t in range(base_q.shape[0]):
        q[:nqb] = base_q[t]
        for _ in range(IK_ITERATIONS):
            pin.framesForwardKinematics(pin_model, data, q)
            err = np.concatenate(
                [feet[t, i] - data.oMf[f].translation for i, f in enumerate(foot_ids)]
            )
            if np.max(np.abs(err)) < 1e-7:
                break
            pin.computeJointJacobians(pin_model, data, q)
            jac = np.vstack(
                [
                    pin.getFrameJacobian(pin_model, data, f, pin.LOCAL_WORLD_ALIGNED)[0:3, nvb:]
                    for f in foot_ids
                ]
            )
            step = np.linalg.solve(jac.T @ jac + IK_DAMPING * np.eye(model.nu), jac.T @ err)
            q[nqb:] = np.clip(q[nqb:] + step, lo, hi)
        out[t] = q[nqb:]
    return out


def holding_torques(model, q: np.ndarray, stance: np.ndarray) -> np.ndarray:
    """Joint torques `(T+1, nu)` that hold the robot's weight in the configurations
    `q (T+1, nq)`, shared equally by the feet with `stance (T+1, nfeet)` = 1 (vertical forces):
    `tau = g_j(q) - sum_i J_i[:, j]^T f_i`. Zero gravity compensation of the legs in flight."""
    import pinocchio as pin

    pin_model, data, foot_ids = pinocchio_feet(model)
    nvb = model.nv - model.nu
    weight = model.total_mass * 9.81
    out = np.zeros((q.shape[0], model.nu))
    for t in range(q.shape[0]):
        n_stance = float(np.sum(stance[t] > 0.5))
        tau = pin.computeGeneralizedGravity(pin_model, data, q[t])[nvb:].copy()
        if n_stance == 0:
            out[t] = 0.0
            continue
        pin.computeJointJacobians(pin_model, data, q[t])
        pin.updateFramePlacements(pin_model, data)
        force = np.array([0.0, 0.0, weight / n_stance])
        for i, f in enumerate(foot_ids):
            if stance[t, i] > 0.5:
                jac = pin.getFrameJacobian(pin_model, data, f, pin.LOCAL_WORLD_ALIGNED)[0:3, nvb:]
                tau -= jac.T @ force
        out[t] = tau
    return out


def kinematic_guess(problem: P.Problem, place=None):
    """`(q (T+1, nq), v (T+1, nv), us (T, nu))` of the kinematic gait guess (module docstring;
    `place` moves the footholds, `foot_targets`).

    The first knot is the problem's initial state; `us[t]` is the control for knot t, targeting
    the joint positions of knot t+1 (PD) or holding it (torque)."""
    model = problem.model
    base_q, feet, _ = foot_targets(problem, place)
    q_joint = leg_inverse_kinematics(model, base_q, feet)
    q = np.concatenate([base_q, q_joint], axis=1)
    q[0] = np.asarray(problem.data.x0.q)
    dt = problem.dt_knot
    v = np.zeros((q.shape[0], model.nv))
    v[1:] = configuration_steps(q) / dt
    v[0] = np.asarray(problem.data.x0.v)
    stance = np.asarray(problem.data.reference.stance)
    tau = holding_torques(model, q, stance)
    if problem.control == "pd":
        kp = float(np.asarray(problem.data.gains)[0])
        us = q_joint[1:] + tau[1:] / kp
    else:  # torque control: tau = limit tanh(u / limit)
        limit = np.asarray(model.effort_limit)[model.nv - model.nu :]
        us = limit * np.arctanh(np.clip(tau[1:] / limit, -0.95, 0.95))
    return q, v, us
