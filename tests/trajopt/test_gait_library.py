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


@pytest.mark.slow
@pytest.mark.parametrize("gait", available_gaits())
@pytest.mark.parametrize("robot", sorted(SPEEDS))
def test_gait_reproduces_its_pattern_and_motion(robot, gait):
    command = {"stand": 0.0, "turn": YAW_RATE}.get(gait, SPEEDS[robot])
    problem = make_problem(robot, gait, command, duration=0.8, dt=0.02)
    traj = solve(problem, max_iterations=ITERATIONS, verbose=False)
    assert np.all(np.isfinite(traj.q))
    checks = solved_gait_checks(problem, traj, command)
    failed = {k: (value, required) for k, (value, required, ok) in checks.items() if not ok}
    assert not failed, f"{robot} {gait}: {failed}"
