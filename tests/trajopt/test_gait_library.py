"""The gait library on Solo12, Go2 and ANYmal C (slow: 60 FDDP iterations per gait; one
compilation per robot serves every gait, they share the problem structure).

Each gait, solved and therefore rolled out open loop under the smooth contact model, must pass
`trajopt.gait_metrics.gait_checks`: its commanded motion (speed within 10 %, no drift), a base
height band, agreement with the reference contact pattern, and the gait's own pattern. The same
problems and checks are tabulated by `python benchmarks/bench_gaits.py` (BENCHMARKS.md,
"Gait library").
"""

import numpy as np
import pytest

from trajopt.gait_metrics import solved_gait_checks
from trajopt.gaits import available_gaits, make_problem
from trajopt.solver import solve

SPEEDS = {"solo12": 0.3, "go2": 0.5, "anymal_c": 0.3}  # forward commands [m/s]
YAW_RATE = 0.5  # turn command [rad/s]
ITERATIONS = 60

LIBRARY = [(robot, gait) for robot in sorted(SPEEDS) for gait in available_gaits()]


@pytest.mark.slow
@pytest.mark.parametrize("robot, gait", LIBRARY)
def test_gait_reproduces_its_pattern_and_motion(robot, gait):
    command = {"stand": 0.0, "turn": YAW_RATE}.get(gait, SPEEDS[robot])
    problem = make_problem(robot, gait, command, duration=0.8, dt=0.02)
    traj = solve(problem, max_iterations=ITERATIONS, verbose=False)
    assert np.all(np.isfinite(traj.q))
    checks = solved_gait_checks(problem, traj, command)
    failed = {k: (value, required) for k, (value, required, ok) in checks.items() if not ok}
    assert not failed, f"{robot} {gait}: {failed}"


# Robots no line of this project was written for: their poses are their SRDF's, their gains and
# gait sizes the rules' (`dynamics.robot_rules`). The solve must have settled: converged by
# FDDP's rule, or its cost within 1 % over its last `SETTLE_WINDOW` iterations.
NEW_ROBOTS = ("go1", "hyq", "anymal")
NEW_ROBOT_SPEED = 0.3  # [m/s]
NEW_ROBOT_ITERATIONS = 150
SETTLE_WINDOW = 10


NEW_ROBOT_GAITS = [(robot, gait) for robot in NEW_ROBOTS for gait in ("trot", "walk", "pace")]


@pytest.mark.slow
@pytest.mark.parametrize("robot, gait", NEW_ROBOT_GAITS)
def test_robots_with_no_table_entry_plan_the_gait(robot, gait):
    problem = make_problem(robot, gait, NEW_ROBOT_SPEED, duration=0.8, dt=0.02)
    traj = solve(problem, max_iterations=NEW_ROBOT_ITERATIONS, verbose=False)
    costs = [float(r["cost"]) for r in traj.history]
    settled = len(costs) > SETTLE_WINDOW and (
        abs(costs[-1 - SETTLE_WINDOW] - costs[-1]) <= 0.01 * abs(costs[-1])
    )
    assert traj.status == "converged" or settled, (traj.status, costs[-SETTLE_WINDOW - 1 :])
    checks = solved_gait_checks(problem, traj, NEW_ROBOT_SPEED)
    failed = {k: (value, required) for k, (value, required, ok) in checks.items() if not ok}
    assert not failed, f"{robot} {gait}: {failed}"
