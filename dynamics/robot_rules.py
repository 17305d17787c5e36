"""Rules that derive a quadruped's record fields from its URDF alone (`dynamics.robot_record`).

Every function here is pure: it reads a Pinocchio model (and what earlier rules gave) and
returns one field. The rules, each with the reason behind its constant:

- **Feet** (`find_feet`): the BODY frames with "foot" in their name, else the most distal
  BODY frame of each leaf joint; four are required. They are ordered FL, FR, HL, HR by their
  position in the base frame at the neutral configuration (front: x above the feet's mean;
  left: y > 0), not by name. At the neutral pose the four must lie within
  `FEET_LEVEL_FRACTION` of the robot's height of each other (a humanoid's hands are no feet).
- **Foot radius** (`foot_radius_from_collision`): the radius of a collision sphere on the
  foot's joint whose centre is within its radius of the foot frame, else `None` (a default).
- **Standing pose** (`computed_standing_pose`): each foot straight under where its straight
  leg hangs (the neutral configuration's x and y in the base frame), solved by damped least
  squares on the leg's joints with Pinocchio. Where the knee (the leg's last joint) bends one
  way only (its range excludes the straight leg), it sits at the middle of its range,
  furthest from both limits (Unitree's SRDF poses of A1, Go1 and B1 are exactly that), and
  the joints above it put the foot under the hip. Otherwise the foot goes
  `STANDING_REACH_FRACTION` of the leg's reach below the leg's first joint (the reach: that
  joint's height above the foot with the leg straight, at the neutral configuration), and the
  knee bends toward the body's middle
  (front knees back, hind knees forward), as every unlimited robot's SRDF pose does. The base
  height then puts the lowest foot sphere on z = 0 (`standing_base_height`).
- **Gains** (`standing_gains`): a scalar joint PD `(Kp, Kd)` from the leg's inertia and load:

      Kp = max(I_max omega^2, tau_g / THETA_SAG),   omega = GAIN_BANDWIDTH sqrt(g / h)
      Kd = min(2 GAIN_DAMPING_RATIO sqrt(Kp I_max), EXPLICIT_PD_MARGIN I_min / PD_DT)

  with `I_max`, `I_min` the largest and smallest diagonal entry of the mass matrix over the
  leg joints at the standing pose (rotor inertia included), `h` the standing base height,
  and `tau_g` the largest joint torque that holds a quarter of the weight on each foot
  (`J^T f`). The bandwidth in units of the pendulum frequency `sqrt(g / h)` (dynamic
  similarity) sits between Go2's (9.2, with Kp 80) and ANYmal C's (6.5, with Kp 200); the
  static sag of the loaded joint stays below `THETA_SAG`; the explicit PD of a 2 ms control
  loop is stable while `Kd dt / I < 2` for every joint, kept at a quarter of that.
- **Gait sizes** (`gait_sizes`): by dynamic similarity (equal Froude number `v^2 / (g h)`),
  a gait's period scales as `sqrt(h / g)` and its swing height as `h`; the constants are
  Go2's (0.40 s and 0.07 m at h = 0.335 m).
- **Rotor inertia**: the URDF's (usually none) unless the record gives a datasheet value.
"""

from __future__ import annotations

import numpy as np

GRAVITY = 9.81  # [m/s^2]
STANDING_REACH_FRACTION = 0.7  # median of the nine SRDF poses of example-robot-data: 0.60-0.85
GAIN_BANDWIDTH = 7.5  # [sqrt(g/h)] Go2's 9.2 and ANYmal C's 6.5 at their given gains
THETA_SAG = 0.08  # [rad] Go2's given Kp 80 sags 0.064 rad under its weight
GAIN_DAMPING_RATIO = 0.5
EXPLICIT_PD_MARGIN = 0.5  # Kd dt / I_min, against the stability bound 2
PD_DT = 0.002  # [s] the hardware PD's period (500 Hz)
PERIOD_FROUDE = 2.16  # [sqrt(h/g)] Go2's 0.40 s at its standing height h = 0.335 m
SWING_HEIGHT_FRACTION = 0.21  # [h] Go2's 0.07 m at h = 0.335 m
FEET_LEVEL_FRACTION = 0.25  # of the base's height above the lowest foot, at the neutral pose
IK_TOLERANCE = 1e-6  # [m] foot position error of the computed standing pose


class RobotRuleError(ValueError):
    """A record field that its rule cannot derive for this robot (the message names both)."""


def leaf_joints(pin_model) -> list:
    """Pinocchio joint indices that are no joint's parent (the ends of the chains)."""
    parents = set(int(p) for p in pin_model.parents[1:])
    return [j for j in range(1, pin_model.njoints) if j not in parents]


def leg_chain(pin_model, foot_frame: int) -> list:
    """Pinocchio joint indices from the first joint after the base down to the foot's joint."""
    chain, j = [], int(pin_model.frames[foot_frame].parentJoint)
    while j > 1:  # joint 1 is the free flyer
        chain.append(j)
        j = int(pin_model.parents[j])
    return chain[::-1]


def find_feet(pin_model, robot: str) -> tuple:
    """Four foot frame names in FL, FR, HL, HR order (see the module docstring)."""
    import pinocchio as pin

    body = [i for i, f in enumerate(pin_model.frames) if f.type == pin.BODY]
    feet = [i for i in body if "foot" in pin_model.frames[i].name.lower()]
    if len(feet) != 4:
        by_joint = {}
        for i in body:  # frames are stored root to tip: the last one on a joint is its tip
            by_joint[int(pin_model.frames[i].parentJoint)] = i
        feet = [by_joint[j] for j in leaf_joints(pin_model) if j in by_joint]
    if len(feet) != 4:
        names = [pin_model.frames[i].name for i in feet]
        raise RobotRuleError(
            f"robot {robot!r}: field 'foot_names': a quadruped needs four feet, found "
            f"{len(feet)} ({names}); pass foot_names=(FL, FR, HL, HR)"
        )
    names = [pin_model.frames[i].name for i in feet]
    check_feet_level(pin_model, names, robot)
    return order_feet(pin_model, names)


def check_feet_level(pin_model, names, robot: str) -> None:
    """Raise `RobotRuleError` unless the feet `names` are level at the neutral pose (module
    docstring): a quadruped's four feet, not two feet and two hands."""
    import pinocchio as pin

    data = pin_model.createData()
    q = pin.neutral(pin_model)
    pin.framesForwardKinematics(pin_model, data, q)
    z = np.array([data.oMf[pin_model.getFrameId(n)].translation[2] for n in names])
    height = q[2] - z.min()
    if height <= 0 or z.max() - z.min() > FEET_LEVEL_FRACTION * height:
        raise RobotRuleError(
            f"robot {robot!r}: field 'foot_names': {names} are not four feet on one level at the "
            f"neutral pose (heights {np.round(z, 3).tolist()} m); pass foot_names=(FL, FR, HL, HR)"
        )


def foot_radius_from_collision(pin_model, collision_model, foot: str) -> float | None:
    """The radius [m] of a collision sphere on `foot`'s joint centred within its radius of
    the foot frame, or None."""
    frame = pin_model.frames[pin_model.getFrameId(foot)]
    best = None
    for geom in collision_model.geometryObjects:
        radius = getattr(geom.geometry, "radius", None)
        if type(geom.geometry).__name__ != "Sphere" or geom.parentJoint != frame.parentJoint:
            continue
        centre = geom.placement.translation - frame.placement.translation  # in the joint frame
        if np.linalg.norm(centre) <= radius and (best is None or radius < best):
            best = float(radius)
    return best


def order_feet(pin_model, names) -> tuple:
    """`names` ordered FL, FR, HL, HR by their base-frame position at the neutral pose."""
    import pinocchio as pin

    data = pin_model.createData()
    pin.framesForwardKinematics(pin_model, data, pin.neutral(pin_model))
    pos = np.array([data.oMf[pin_model.getFrameId(n)].translation for n in names])
    front = pos[:, 0] > np.mean(pos[:, 0])
    left = pos[:, 1] > 0.0
    order = []
    for want_front, want_left in ((True, True), (True, False), (False, True), (False, False)):
        match = [n for n, f, lf in zip(names, front, left) if f == want_front and lf == want_left]
        if len(match) != 1:
            raise RobotRuleError(
                f"feet {list(names)} are not one per corner (front/hind x left/right) at the "
                "neutral pose; pass foot_names=(FL, FR, HL, HR)"
            )
        order.append(match[0])
    return tuple(order)


def _solve_leg(pin_model, data, q, foot_frame, joints, target, coords=(0, 1, 2), iterations=200):
    """Damped least squares on `joints` (base fixed) until the foot's base-frame coordinates
    `coords` reach `target[coords]`; returns `(q, error [m])`."""
    import pinocchio as pin

    idx = [int(pin_model.idx_vs[j]) for j in joints]
    rows = list(coords)
    q = q.copy()
    for _ in range(iterations):
        pin.forwardKinematics(pin_model, data, q)
        pin.updateFramePlacement(pin_model, data, foot_frame)
        err = (target - data.oMf[foot_frame].translation)[rows]
        if np.linalg.norm(err) < IK_TOLERANCE:
            break
        J = pin.computeFrameJacobian(pin_model, data, q, foot_frame, pin.LOCAL_WORLD_ALIGNED)
        Jl = J[rows][:, idx]
        step = Jl.T @ np.linalg.solve(Jl @ Jl.T + 1e-8 * np.eye(len(rows)), err)
        dq = np.zeros(pin_model.nv)
        dq[idx] = step
        q = pin.integrate(pin_model, q, dq)
    return q, float(np.linalg.norm(err))


def _within_limits(pin_model, q, joints) -> bool:
    rows = [int(pin_model.idx_qs[j]) for j in joints]
    lower, upper = pin_model.lowerPositionLimit[rows], pin_model.upperPositionLimit[rows]
    return bool(np.all(q[rows] >= lower - 1e-9) and np.all(q[rows] <= upper + 1e-9))


def _leg_candidates(pin_model, data, q_neutral, frame, chain, first, foot):
    """Standing solutions of one leg (module docstring): `[(|knee x|, q), ...]`."""
    import pinocchio as pin

    knee = chain[-1]
    k = int(pin_model.idx_qs[knee])
    lower, upper = pin_model.lowerPositionLimit[k], pin_model.upperPositionLimit[k]
    straight = q_neutral[k]
    if upper > lower and not lower <= straight <= upper:  # a knee that bends one way only
        q0 = q_neutral.copy()
        q0[k] = 0.5 * (lower + upper)
        starts = [(q0, chain[:-1], (0, 1))]  # the knee held, the foot under the hip in x, y
    else:
        reach = first[2] - foot[2]
        target_z = first[2] - STANDING_REACH_FRACTION * reach
        starts = []
        for bend in (-1.0, 1.0):
            q0 = q_neutral.copy()
            q0[k] += bend
            starts.append((q0, chain, (0, 1, 2)))
    candidates = []
    for q0, joints, coords in starts:
        target = np.array([foot[0], foot[1], target_z if coords == (0, 1, 2) else 0.0])
        q, err = _solve_leg(pin_model, data, q0, frame, joints, target, coords)
        if err < 1e-4 and _within_limits(pin_model, q, chain) and abs(q[k] - q_neutral[k]) > 1e-3:
            pin.forwardKinematics(pin_model, data, q)
            candidates.append((abs(data.oMi[knee].translation[0]), q))
    return candidates


def computed_standing_pose(pin_model, foot_names: tuple, robot: str) -> np.ndarray:
    """`(nq,)` standing joints by the pose rule (module docstring); base at the origin, level.
    Raises `RobotRuleError` naming the leg whose foot cannot reach its place within limits."""
    import pinocchio as pin

    data = pin_model.createData()
    q_neutral = pin.neutral(pin_model)
    q_out = q_neutral.copy()
    for name in foot_names:
        frame = pin_model.getFrameId(name)
        chain = leg_chain(pin_model, frame)
        if not chain:
            raise RobotRuleError(f"robot {robot!r}: foot {name!r} is not on a leg")
        pin.framesForwardKinematics(pin_model, data, q_neutral)
        first = data.oMi[chain[0]].translation.copy()
        foot = data.oMf[frame].translation.copy()
        candidates = _leg_candidates(pin_model, data, q_neutral, frame, chain, first, foot)
        if not candidates:
            raise RobotRuleError(
                f"robot {robot!r}: field 'q_standing': the leg of {name!r} cannot bend its knee "
                f"and keep its foot under the hip within its joint limits (reach "
                f"{first[2] - foot[2]:.3f} m); give a standing pose (SRDF or record)"
            )
        q_leg = min(candidates, key=lambda c: c[0])[1]  # the knee nearer the body's middle
        for j in chain:
            s, n = int(pin_model.idx_qs[j]), int(pin_model.nqs[j])
            q_out[s : s + n] = q_leg[s : s + n]
    return q_out


def standing_base_height(pin_model, q, foot_names, foot_radius) -> float:
    """Base height [m] that puts the lowest foot sphere on z = 0 for configuration `q`."""
    import pinocchio as pin

    data = pin_model.createData()
    pin.framesForwardKinematics(pin_model, data, q)
    radii = np.broadcast_to(np.asarray(foot_radius, float), (len(foot_names),))
    lowest = min(
        data.oMf[pin_model.getFrameId(f)].translation[2] - r for f, r in zip(foot_names, radii)
    )
    return float(q[2] - lowest)


def standing_torques(pin_model, q, foot_names):
    """`(nu,)` joint torques [N m] that hold the robot standing at `q` with a quarter of its
    weight on each foot: `tau = sum_i J_i^T (0, 0, m g / 4)`, `J_i` the foot's translational
    Jacobian in the world-aligned frame (the virtual work of the ground forces)."""
    import pinocchio as pin

    data = pin_model.createData()
    pin.computeJointJacobians(pin_model, data, q)
    pin.framesForwardKinematics(pin_model, data, q)
    mass = sum(float(i.mass) for i in pin_model.inertias)
    force = np.array([0.0, 0.0, mass * GRAVITY / len(foot_names)])
    tau = np.zeros(pin_model.nv)
    for f in foot_names:
        J = pin.getFrameJacobian(pin_model, data, pin_model.getFrameId(f), pin.LOCAL_WORLD_ALIGNED)
        tau += J[:3].T @ force
    return tau[6:]


def leg_load(pin_model, q, foot_names) -> tuple:
    """`(I_max, I_min, tau_g)`: the largest and smallest mass-matrix diagonal over the
    actuated joints at `q` [kg m^2] (rotor inertia included), and the largest joint torque
    [N m] of `standing_torques`."""
    import pinocchio as pin

    diag = np.diag(pin.crba(pin_model, pin_model.createData(), q))[6:]
    tau = standing_torques(pin_model, q, foot_names)
    return float(diag.max()), float(diag.min()), float(np.abs(tau).max())


def standing_gains(i_max: float, i_min: float, tau_g: float, height: float) -> tuple:
    """`(Kp, Kd)` of the gain rule (module docstring) from `leg_load` and the standing height."""
    omega = GAIN_BANDWIDTH * np.sqrt(GRAVITY / height)
    kp = max(i_max * omega**2, tau_g / THETA_SAG)
    kd = min(2.0 * GAIN_DAMPING_RATIO * np.sqrt(kp * i_max), EXPLICIT_PD_MARGIN * i_min / PD_DT)
    return float(kp), float(kd)


def gait_sizes(height: float) -> tuple:
    """`(period [s], swing_height [m])` of the robot's trot at standing height `height` [m]."""
    return float(PERIOD_FROUDE * np.sqrt(height / GRAVITY)), float(SWING_HEIGHT_FRACTION * height)
