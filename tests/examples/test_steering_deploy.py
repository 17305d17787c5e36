"""examples/deploy_go2.py steered by a person or a program: the shipped policy over DDS against
the simulated Go2 in real time, steered forward, then sideways, then turning, then released,
by the remote's sticks (`--steer remote`, the sticks held by the simulator, `--sim-sticks`) and
by ROS 2 `geometry_msgs/Twist` on `cmd_vel` (`--steer cmd_vel`, published by another process
with ROS 2's wire types, then stopped, so the last Twist goes stale) (slow)."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

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
ROOT = Path(__file__).resolve().parents[2]
# (T [s] from the first LowCmd, D [s], vx [m/s], vy [m/s], yaw_rate [rad/s]): the same three
# motions as HOLDS, inside the policy's box; then no Twist at all
TWISTS = ((5.0, 5.0, 0.5, 0.0, 0.0), (10.0, 5.0, 0.0, -0.3, 0.0), (15.0, 5.0, 0.0, 0.0, 0.6))
TWIST_PUBLISHER = textwrap.dedent("""
    import json, sys, time
    from hardware.go2.dds import make_reader, make_writer, open_domain, take
    from hardware.go2.messages import LowCmd_
    from hardware.ros2_types import ros2_topic, twist, Twist_
    domain, participant = open_domain(int(sys.argv[1]), "lo")
    holds = json.loads(sys.argv[2])
    writer = make_writer(participant, ros2_topic("cmd_vel"), Twist_)
    lowcmd = make_reader(participant, "rt/lowcmd", LowCmd_)
    deadline = time.monotonic() + 120.0
    while not take(lowcmd, LowCmd_) and time.monotonic() < deadline:
        time.sleep(0.005)  # the clock starts at the first command, as --sim-sticks' does
    start = time.monotonic()
    end = max(h[0] + h[1] for h in holds)
    while (now := time.monotonic() - start) < end:  # like teleop_twist_keyboard: 20 Hz
        held = [h for h in holds if h[0] <= now < h[0] + h[1]]
        writer.write(twist(*held[-1][2:]) if held else twist())
        time.sleep(0.05)
""")


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
    targets = [(h[0], h[1], box.scale(stick_fractions(*h[2:], STICK_DEADBAND))) for h in HOLDS]
    assert_tracks(run, targets)


@pytest.mark.slow
def test_the_shipped_policy_follows_twists_on_cmd_vel(tmp_path):
    """The shipped policy steered by `--steer cmd_vel`: another process publishes ROS 2
    `geometry_msgs/Twist` (`Twist_`, CDR, on the DDS topic `rt/cmd_vel`) at 20 Hz in the run's
    domain, timed from the first LowCmd it sees, then stops. Over the settled part of each
    hold the simulator's true base velocity and yaw rate are within `LINEAR_TOLERANCE` /
    `YAW_TOLERANCE` of the Twist; once no Twist has come for the timeout the command is zero
    (one timeout counted) and the robot stands. The safety layer never damped and no Twist
    was refused or clipped."""
    pytest.importorskip("cyclonedds")
    pytest.importorskip("mujoco")
    domain = next(_DOMAINS)
    argv = ["--controller", "policy", "--steer", "cmd_vel", "--seconds", "23",
            "--estimator", "off", "--domain", str(domain), "--state-timeout", "0.3",
            "--log", str(tmp_path / "log"), "--out", str(tmp_path)]  # fmt: skip
    publisher = subprocess.Popen(
        [sys.executable, "-c", TWIST_PUBLISHER, str(domain), json.dumps(TWISTS)],
        cwd=ROOT,
        stderr=subprocess.PIPE,
    )
    try:
        summary = load_example("deploy_go2").main(argv)
        publisher.wait(timeout=30.0)
        assert publisher.returncode == 0, publisher.stderr.read().decode()
    finally:
        publisher.kill()
        publisher.wait()
    run = DeploymentLog.load(str(tmp_path / "log"))
    steering = summary["steering"]
    print("steering", steering)
    events = [(e["kind"], e["count"], e["detail"]) for e in summary["safety_events"]]
    assert summary["safety_mode"] == "normal", [e for e in events if e[0] != "rate_limited"]
    counters = steering["counters"]
    assert steering["mode"] == "cmd_vel" and counters["accepted"] > 250
    assert counters["nonfinite"] == 0 and counters["clipped"] == 0
    assert counters["timeouts"] == 1
    assert_tracks(run, [(h[0], h[1], np.array(h[2:])) for h in TWISTS])


def assert_tracks(run, targets):
    """Over the settled part of each `(start, duration, target (3,))` the true base velocity
    (base frame) and yaw rate are within the tolerances of the target; after the last, the
    command is zero and the robot stands."""
    t, commands = run["t"], run["steering_command"]
    velocity, yaw_rate = run["truth_base_linear_velocity"], run["base_angular_velocity"][:, 2]
    measured = np.column_stack([velocity[:, 0], velocity[:, 1], yaw_rate])
    for start, _duration, target in targets:
        window = settled_window(t, commands, target)
        mean = np.nanmean(measured[window], axis=0)
        span = t[window][-1] - t[window][0]
        print(f"hold from {start} s: command {np.round(target, 3)}, measured mean "
              f"{np.round(mean, 3)} over {span:.2f} s")  # fmt: skip
        assert span > 2.0, "too short a settled window: the hold did not line up"
        assert np.all(np.abs(mean[:2] - target[:2]) < LINEAR_TOLERANCE), (target, mean)
        assert abs(mean[2] - target[2]) < YAW_TOLERANCE, (target, mean)
    released = t > targets[-1][0] + targets[-1][1] - 1.0  # the loop's t leads the sim's a little
    window = settled_window(t[released], commands[released], np.zeros(3))
    drift = np.nanmean(velocity[released][window][:, :2], axis=0)
    print("released: mean horizontal velocity", np.round(drift, 3))
    assert np.linalg.norm(drift) < STAND_SPEED
