"""The MPC walks robots with no line written for them: Go1 and HyQ, every field of their records
from example-robot-data and `dynamics.robot_rules` (slow: 10 s of closed loop each).

Each robot trots 10 s at 0.4 m/s forward, in this project's simulator
(`controllers.closed_loop.run_mpc`, the `MPC` defaults: one FDDP iteration per cycle) and on
MuJoCo through the hardware interface and the safety layer (`controllers.state_feedback`'s
`mpc_controller`, three iterations per cycle, as `examples/deploy_mujoco.py --controller mpc`),
both with the compiled derivatives where a C compiler is found (`benchmarks/bench_mpc.py`'s
Go2 configuration), and no wall-clock budget, so the outcome does not depend on the load.

The bounds, from these runs (measured 2026-12-07, AMD EPYC, 2 loaded cores; the speed after the
first second of walking; the cycle's median wall time, one iteration in our simulator, three on
MuJoCo). All four took 130 s with their compilation, 42 s run again:

    robot, plant      mean speed m/s   lowest base / h   largest tilt   cycle median
    go1, our sim      0.391            0.87              2.2 deg        7.5 ms
    hyq, our sim      0.405            0.98              1.9 deg        7.0 ms
    go1, MuJoCo       0.393            0.93              1.2 deg        16.1 ms
    hyq, MuJoCo       0.402            0.96              2.3 deg        16.8 ms

- No fall: the base stays above `FALL_FRACTION` of its standing height h. A trot dips it to
  0.87 h at the lowest (above); HyQ damped by the safety layer in an earlier failing run came to
  rest at 0.45 h. 0.75 h lies between the two, 0.12 h below the lowest trot.
- Upright: the base's z axis within `MAX_TILT` of vertical; a trot tilts it by under 2.5 deg, the
  safety layer damps a robot rolled past 0.8 rad (46 deg).
- Speed: the mean forward speed after the first second of walking within `SPEED_TOLERANCE` of
  the command, the bound of Go2's acceptance test (`tests/controllers/test_mpc.py`). The
  measured means are within 2.5 % of it: the rest covers another platform's rounding and where in
  a 0.36-0.53 s gait cycle the 10 s end, while a robot that stumbles or shuffles fails.
"""

import numpy as np
import pytest

COMMAND = 0.4  # [m/s]
SECONDS = 10.0
FALL_FRACTION = 0.75  # of the standing height (module docstring)
MAX_TILT = np.deg2rad(30.0)
SPEED_TOLERANCE = 0.15  # of the command
ROBOTS = ("go1", "hyq")


def derivatives() -> str:
    from native import c_library

    return "compiled" if c_library.compiler_available() else "unrolled"


def up_z(quat_xyzw) -> np.ndarray:
    """`R[2, 2]` of base orientations `(..., 4)` `[x, y, z, w]`: the cosine of the tilt."""
    q = np.asarray(quat_xyzw, dtype=float)
    return 1.0 - 2.0 * (q[..., 0] ** 2 + q[..., 1] ** 2)


@pytest.mark.slow
@pytest.mark.parametrize("robot", ROBOTS)
def test_the_mpc_walks_a_robot_without_a_record_in_our_simulator(robot):
    from controllers.closed_loop import run_mpc
    from controllers.mpc import MPC

    mpc = MPC(robot, "trot", (COMMAND, 0.0, 0.0), horizon=0.5, derivatives=derivatives())
    result = run_mpc(mpc, SECONDS, progress=False)
    summary = result.summary(settle=1.0)
    h = result.standing_height
    tilt_cos = up_z(result.q[:, 3:7]).min()
    print(robot, f"lowest / h {result.q[:, 2].min() / h:.3f}, largest tilt "
          f"{np.degrees(np.arccos(tilt_cos)):.1f} deg, cycle median "
          f"{1e3 * summary['mpc']['median_s']:.1f} ms, {summary}")  # fmt: skip
    assert result.q[:, 2].min() > FALL_FRACTION * h
    assert tilt_cos > np.cos(MAX_TILT)
    assert summary["mpc"]["stand_cycles"] == 0
    for speed in (summary["mean_forward_velocity"], summary["average_speed_from_displacement"]):
        assert abs(speed - COMMAND) <= SPEED_TOLERANCE * COMMAND


@pytest.mark.slow
@pytest.mark.parametrize("robot", ROBOTS)
def test_the_mpc_walks_a_robot_without_a_record_on_mujoco(robot):
    """Through the interface, as `examples/deploy_mujoco.py --controller mpc`: 0.5 s standing
    (the soft start), then 10 s at the command."""
    pytest.importorskip("mujoco", reason="the MuJoCo plant needs the `mujoco` extra")
    import dynamics
    from controllers.state_feedback import mpc_controller, mpc_safety_config
    from hardware import control_loop
    from hardware.backends.mujoco_sim import MuJoCoRobot
    from hardware.interface import VelocityCommand
    from hardware.safety import SafetyLayer

    stand = 0.5  # [s]
    model = dynamics.load_robot(robot)
    plant = MuJoCoRobot(model, timestep=0.002)
    controller = mpc_controller(robot, plant.joint_map, "trot", horizon=0.5, iterations=3,
                                derivatives=derivatives())  # fmt: skip
    safety = SafetyLayer(plant.joint_map, mpc_safety_config(soft_start=0.2))
    tilt_cos = []

    def record_tilt(t, safety, robot):
        if safety.measurement is not None:
            tilt_cos.append(up_z(safety.measurement.base_quat))

    result = control_loop.run(
        plant, controller, safety, duration=stand + SECONDS, control_dt=0.02, command_dt=0.002,
        command_source=lambda t: VelocityCommand(COMMAND if t >= stand else 0.0, 0.0, 0.0),
        on_tick=record_tilt,
    )  # fmt: skip
    z = result.log["base_position"][:, 2]
    h = float(model.q_standing[2])
    speed = control_loop.average_speed(result.log, after=stand + 1.0)
    summary = result.summary()
    tilt = np.degrees(np.arccos(min(tilt_cos)))
    cycles = controller.planner.stats.summary()
    print(robot, f"speed {speed:.3f} m/s, lowest / h {z.min() / h:.3f}, largest tilt "
          f"{tilt:.1f} deg, peak joint speed {summary['peak_joint_speed_fraction']:.2f} x limit, "
          f"cycle median {1e3 * cycles['median_s']:.1f} ms, MPC {cycles}")  # fmt: skip
    assert result.safety.mode.value == "normal", result.safety.events
    assert z.min() > FALL_FRACTION * h
    assert min(tilt_cos) > np.cos(MAX_TILT)
    assert abs(speed - COMMAND) <= SPEED_TOLERANCE * COMMAND


@pytest.mark.slow
def test_every_cycle_keeps_the_lead_in_the_mpc_was_given():
    """ANYmal C's record starts its trot on four feet for 0.1 period; an MPC built with
    `lead_in=0` plans its first cycle with a diagonal pair already swinging at t = 0, as its
    problem does."""
    from controllers.mpc import MPC
    from dynamics.configuration import State

    mpc = MPC("anymal_c", horizon=0.2, lead_in=0.0, warmup_iterations=1)
    q0 = np.asarray(mpc.model.q_standing)
    mpc.reset(State(q0, np.zeros(mpc.model.nv)))
    stance = np.asarray(mpc.plan.meta["reference"]["stance"])
    assert np.sum(stance[0] < 0.5) == 2
    default = MPC("anymal_c", horizon=0.2, warmup_iterations=1)
    default.reset(State(q0, np.zeros(default.model.nv)))
    assert np.all(np.asarray(default.plan.meta["reference"]["stance"])[0] > 0.5)
