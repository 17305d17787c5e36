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
