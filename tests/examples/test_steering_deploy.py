"""examples/deploy_go2.py steered by the remote's sticks (`--steer remote`): the shipped policy
over DDS against the simulated Go2 in real time, its sticks held by the simulator
(`--sim-sticks`), forward, then sideways, then turning, then released (slow)."""

import os

import numpy as np
import pytest
from bench_helpers import load_example

from hardware.deployment_log import DeploymentLog
from hardware.steering import STICK_DEADBAND, CommandBox, stick_fractions

_DOMAINS = iter(range(120 - 2 * (os.getpid() % 19) - 2, 120))  # 2 ids per process
# (T [s] from the first command, D [s], lx, rx, ry, ly): forward; right (vy < 0); turning
# counter-clockwise (rx < 0: yaw_rate > 0); then released until the end
HOLDS = ((5.0, 5.0, 0.0, 0.0, 0.0, 0.6), (10.0, 5.0, 0.8, 0.0, 0.0, 0.0),
         (15.0, 5.0, 0.0, -0.7, 0.0, 0.0))  # fmt: skip
SETTLE = 1.5  # [s] after the command reached its target, not counted in the tracking
LINEAR_TOLERANCE, YAW_TOLERANCE = 0.15, 0.3  # [m/s], [rad/s] of the mean velocity
STAND_SPEED = 0.1  # [m/s] largest mean horizontal speed once released


def settled_window(t, commands, target, settle=SETTLE):
    """The ticks from `settle` [s] after `commands (N, 3)` first equals `target (3,)` to the
    last tick it does (the command is rate-limited: it equals the target once ramped)."""
    at = np.all(np.abs(commands - target) < 1e-6, axis=1)  # float32 sticks
    assert at.any(), f"the command never reached {target}"
    first, last = np.flatnonzero(at)[[0, -1]]
    return (t >= t[first] + settle) & (t <= t[last]) & at


@pytest.mark.slow
def test_the_shipped_policy_follows_the_simulated_remote_sticks(tmp_path):
    """The shipped policy (`examples/policies/go2_omni_proprio`, its box vx +-1, vy +-0.5 m/s,
    yaw rate +-1 rad/s) steered by `--sim-sticks` over DDS: the logged command reaches each
    hold's stick mapping (Unitree's signs, the deadband, the box), and over the settled part
    of each hold the simulator's true base velocity (base frame, `truth_base_linear_velocity`)
    and yaw rate (the simulator's exact gyro) are within `LINEAR_TOLERANCE` /
    `YAW_TOLERANCE` of the command in every component; released, the robot stands (mean
    horizontal speed below `STAND_SPEED`). The safety layer never damped and no stick value
    was refused."""
    pytest.importorskip("cyclonedds")
    pytest.importorskip("mujoco")
    argv = ["--controller", "policy", "--steer", "remote", "--seconds", "21",
            "--estimator", "off", "--domain", str(next(_DOMAINS)), "--state-timeout", "0.3",
            "--log", str(tmp_path / "log"), "--out", str(tmp_path)]  # fmt: skip
    for hold in HOLDS:
        argv += ["--sim-sticks", *(str(v) for v in hold)]
    summary = load_example("deploy_go2").main(argv)
    run = DeploymentLog.load(str(tmp_path / "log"))
    events = [(e["kind"], e["count"], e["detail"]) for e in summary["safety_events"]]
    steering = summary["steering"]
    print("steering", steering)
    assert summary["safety_mode"] == "normal", [e for e in events if e[0] != "rate_limited"]
    assert steering["mode"] == "remote" and steering["counters"]["calls"] > 500
    assert all(steering["counters"][k] == 0 for k in ("nonfinite", "clipped", "malformed"))
    box = CommandBox.from_ranges(steering["box"])
    t, commands = run["t"], run["steering_command"]
    velocity, yaw_rate = run["truth_base_linear_velocity"], run["base_angular_velocity"][:, 2]
    measured = np.column_stack([velocity[:, 0], velocity[:, 1], yaw_rate])
    for start, _duration, lx, rx, ry, ly in HOLDS:
        target = box.scale(stick_fractions(lx, rx, ry, ly, STICK_DEADBAND))
        window = settled_window(t, commands, target)
        mean = np.nanmean(measured[window], axis=0)
        span = t[window][-1] - t[window][0]
        print(f"hold from {start} s: command {np.round(target, 3)}, measured mean "
              f"{np.round(mean, 3)} over {span:.2f} s")  # fmt: skip
        assert span > 2.0, "too short a settled window: the hold did not line up"
        assert np.all(np.abs(mean[:2] - target[:2]) < LINEAR_TOLERANCE), (target, mean)
        assert abs(mean[2] - target[2]) < YAW_TOLERANCE, (target, mean)
    released = t > HOLDS[-1][0] + HOLDS[-1][1] - 1.0  # the loop's t leads the sim's a little
    window = settled_window(t[released], commands[released], np.zeros(3))
    drift = np.nanmean(velocity[released][window][:, :2], axis=0)
    print("released: mean horizontal velocity", np.round(drift, 3))
    assert np.linalg.norm(drift) < STAND_SPEED
