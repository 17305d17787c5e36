"""The gait library on Go2 (slow: about 40 FDDP iterations per gait; one compilation serves
every gait, they share the problem structure).

Each gait must reproduce its contact pattern (agreement of the solved contacts with the
reference stance flags over all knots and feet) and its commanded motion. Measured with
`python examples/solve_all_gaits.py --robot go2 --velocity 0.5 --iterations 40` (the same
settings), 2026-11-30:

    gait   speed m/s  yaw rate  pattern
    stand   0.000      0.00      1.00
    walk    0.476      0.01      0.85
    trot    0.447     -0.07      0.96   (kinematic guess; 0.483 from the standing guess,
                                         now the trot's default: gaits.GAITS)
    pace    0.447      0.04      0.79
    bound   0.492      0.01      0.91
    pronk   0.334     -0.05      0.66   (fails: open)
    turn    0.006      0.49      0.94   (commanded 0.5 rad/s)
"""

import numpy as np
import pytest

from trajopt.gait_metrics import average_velocity, contact_agreement
from trajopt.gaits import make_problem
from trajopt.solve import solve

SPEED, YAW_RATE = 0.5, 0.5
MIN_AGREEMENT = {"stand": 0.95, "walk": 0.8, "trot": 0.9, "pace": 0.75, "bound": 0.85,
                 "pronk": 0.85, "turn": 0.9}  # fmt: skip


def _solve(gait):
    command = {"stand": 0.0, "turn": YAW_RATE}.get(gait, SPEED)
    problem = make_problem("go2", gait, command, duration=0.8)
    return problem, solve(problem, max_iterations=40, verbose=False)


GAITS = [
    "stand",
    "walk",
    "trot",
    "pace",
    "bound",
    pytest.param(
        "pronk",
        marks=pytest.mark.xfail(
            reason="open (issue 4): the pronk (all feet together, 30 % flight) does not emerge "
            "within 40 iterations: pattern agreement 0.66, 0.33 m/s",
            strict=False,
        ),
    ),
    "turn",
]


@pytest.mark.slow
@pytest.mark.parametrize("gait", GAITS)
def test_gait_reproduces_its_pattern_and_motion(gait):
    problem, traj = _solve(gait)
    agreement = contact_agreement(traj.force, problem.data.reference.stance)
    motion = average_velocity(traj.q, traj.dt)
    print(gait, round(agreement, 3), motion)
    assert np.all(np.isfinite(traj.q))
    assert agreement >= MIN_AGREEMENT[gait], agreement
    standing = float(problem.model.q_standing[2])
    assert traj.q[:, 2].min() > 0.8 * standing  # no crouching collapse
    if gait == "turn":
        assert abs(motion["yaw_rate"] - YAW_RATE) <= 0.15 * YAW_RATE
        assert abs(motion["forward"]) < 0.05
    elif gait == "stand":
        assert abs(motion["forward"]) < 0.01 and abs(motion["yaw_rate"]) < 0.01
    else:
        assert abs(motion["forward"] - SPEED) <= 0.15 * SPEED
        assert abs(motion["yaw_rate"]) < 0.15
