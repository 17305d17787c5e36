"""What a solved gait achieves: average velocities and agreement with the gait's contact pattern.

A foot counts as in contact at a knot when its mean normal force over the knot exceeds
`threshold` [N] (world z; the ground is flat or gently sloped in the gait library).
"""

from __future__ import annotations

import numpy as np

CONTACT_THRESHOLD = 1.0  # [N]


def contact_flags(force: np.ndarray, threshold: float = CONTACT_THRESHOLD) -> np.ndarray:
    """`(T, nfeet)` booleans from mean contact forces `force (T, nfeet, 3)` [N, world]."""
    return np.asarray(force)[:, :, 2] > threshold


def contact_agreement(force: np.ndarray, stance: np.ndarray, threshold=CONTACT_THRESHOLD):
    """Fraction of (knot, foot) pairs where the solved contact equals the reference stance
    flags `stance (T or T+1, nfeet)` (knot t's force is compared with stance at knot t)."""
    flags = contact_flags(force, threshold)
    reference = np.asarray(stance)[: flags.shape[0]] > 0.5
    return float(np.mean(flags == reference))


def average_velocity(q: np.ndarray, dt: float) -> dict:
    """Average base velocities over a trajectory `q (T+1, nq)` with knots `dt` apart:
    forward and lateral [m/s] in the initial heading frame (yaw of the first knot), and the
    yaw rate [rad/s] from the unwrapped yaw."""
    yaw = 2.0 * np.arctan2(q[:, 5], q[:, 6])  # valid for small roll and pitch
    yaw = np.unwrap(yaw)
    duration = dt * (q.shape[0] - 1)
    c, s = np.cos(yaw[0]), np.sin(yaw[0])
    d = q[-1, 0:2] - q[0, 0:2]
    return {
        "forward": float((c * d[0] + s * d[1]) / duration),
        "lateral": float((-s * d[0] + c * d[1]) / duration),
        "yaw_rate": float((yaw[-1] - yaw[0]) / duration),
    }


# Feet are ordered FL, FR, HL, HR (as `Model.foot_names` of the gait-library robots).
PAIRS = {
    "trot": ((0, 3), (1, 2)),  # diagonal pairs
    "turn": ((0, 3), (1, 2)),
    "pace": ((0, 2), (1, 3)),  # lateral pairs
    "bound": ((0, 1), (2, 3)),  # front and hind pairs
}


def pair_pattern(force: np.ndarray, pair_a, pair_b, threshold=CONTACT_THRESHOLD):
    """How two foot pairs alternate: `(a_only, b_only, agree)`, the fractions of knots where
    pair a is down while pair b is up, the reverse, and the smaller of the two pairs' inner
    agreements (fraction of knots where both feet of the pair are in the same state)."""
    down = contact_flags(force, threshold)
    a = np.all(down[:, list(pair_a)], axis=1)
    b = np.all(down[:, list(pair_b)], axis=1)
    a_up = ~np.any(down[:, list(pair_a)], axis=1)
    b_up = ~np.any(down[:, list(pair_b)], axis=1)
    agree = min(
        float(np.mean(down[:, pair[0]] == down[:, pair[1]])) for pair in (pair_a, pair_b)
    )
    return float(np.mean(a & b_up)), float(np.mean(b & a_up)), agree


def pattern_checks(gait: str, force: np.ndarray, threshold=CONTACT_THRESHOLD) -> dict:
    """`{check: (value, required, passed)}`: the contact pattern that makes `gait` that gait.

    trot, turn, pace, bound: each of the gait's two pairs is alone on the ground for at least
        20 % of the knots, and the two feet of each pair agree on at least 75 %;
    pronk: all four feet in the air together for at least 10 % of the knots (a flight phase),
        all four down for at least 40 %, and each foot agrees with the others on 75 %;
    walk: at least three feet down on 70 % of the knots, and every foot swings (down on at
        most 90 %);
    stand: all four feet down on 95 % of the knots.
    """
    down = contact_flags(force, threshold)
    checks = {}
    if gait in PAIRS:
        a_only, b_only, agree = pair_pattern(force, *PAIRS[gait], threshold)
        checks["first pair alone"] = (a_only, 0.2, a_only >= 0.2)
        checks["second pair alone"] = (b_only, 0.2, b_only >= 0.2)
        checks["pairs in step"] = (agree, 0.75, agree >= 0.75)
    elif gait == "pronk":
        flight = float(np.mean(~np.any(down, axis=1)))
        stance = float(np.mean(np.all(down, axis=1)))
        together = float(np.mean(np.all(down == down[:, :1], axis=1)))
        checks["flight"] = (flight, 0.1, flight >= 0.1)
        checks["all four down"] = (stance, 0.4, stance >= 0.4)
        checks["feet in step"] = (together, 0.75, together >= 0.75)
    elif gait == "walk":
        three = float(np.mean(np.sum(down, axis=1) >= 3))
        most = float(np.max(np.mean(down, axis=0)))
        checks["three feet down"] = (three, 0.7, three >= 0.7)
        checks["every foot swings"] = (most, 0.9, most <= 0.9)
    elif gait == "stand":
        stance = float(np.mean(np.all(down, axis=1)))
        checks["all four down"] = (stance, 0.95, stance >= 0.95)
    else:
        raise ValueError(f"no pattern checks for gait {gait!r}")
    return checks


def gait_checks(
    gait: str,
    command: float,
    q: np.ndarray,
    force: np.ndarray,
    dt: float,
    standing_height: float,
    stance_reference: np.ndarray,
    *,
    speed_tolerance: float = 0.1,
) -> dict:
    """`{check: (value, required, passed)}` for a solved (or re-simulated) gait: the pattern
    checks of `pattern_checks`, plus

    speed: forward speed (turn: yaw rate) within `speed_tolerance` of `command` (relative;
        stand: below 0.05 m/s);
    drift: turn: forward speed below 0.05 m/s; the others: yaw rate below 0.15 rad/s;
    height: base height within [0.75, 1.25] x the standing height at every knot (no collapse);
    pattern agreement: the solved contacts equal the reference stance flags on 75 % of the
        (knot, foot) pairs (`contact_agreement`).

    Args: q `(T+1, nq)` knots `dt` [s] apart; force `(T, 4, 3)` [N]; stance_reference
    `(T+1, 4)`; standing_height [m]; command [m/s] (turn: [rad/s]).
    """
    velocity = average_velocity(q, dt)
    checks = {}
    if gait == "stand":
        speed = abs(velocity["forward"])
        checks["speed"] = (speed, 0.05, speed <= 0.05)
    else:
        achieved = velocity["yaw_rate"] if gait == "turn" else velocity["forward"]
        error = abs(achieved - command) / abs(command)
        checks["speed"] = (achieved, command, error <= speed_tolerance)
    if gait == "turn":
        drift = abs(velocity["forward"])
        checks["drift"] = (drift, 0.05, drift <= 0.05)
    else:
        drift = abs(velocity["yaw_rate"])
        checks["drift"] = (drift, 0.15, drift <= 0.15)
    low, high = float(np.min(q[:, 2])), float(np.max(q[:, 2]))
    ok = 0.75 * standing_height <= low and high <= 1.25 * standing_height
    checks["height"] = ((low, high), (0.75 * standing_height, 1.25 * standing_height), ok)
    agreement = contact_agreement(force, stance_reference)
    checks["pattern agreement"] = (agreement, 0.75, agreement >= 0.75)
    checks.update(pattern_checks(gait, force))
    return checks


def solved_gait_checks(problem, traj, command: float, **kwargs) -> dict:
    """`gait_checks` of a solved gait-library problem (`problem.name` is the gait) and its
    `Trajectory` `traj`, at the `command` it was solved for."""
    return gait_checks(
        problem.name,
        command,
        traj.q,
        traj.force,
        traj.dt,
        float(problem.model.q_standing[2]),
        np.asarray(problem.data.reference.stance),
        **kwargs,
    )
