"""Steering by the remote's sticks and by ROS 2 cmd_vel (`hardware.steering`,
`hardware.ros2_types`): the sticks' bytes, Unitree's signs, the deadband, the command box, the
acceleration limits, released sticks and stale Twists ending in a stand, bad values refused or
clipped and counted, and a Twist over DDS on loopback from another process.

All in a few seconds: the sources are called with made-up times and clocks; the DDS test runs
its publisher in a subprocess on a domain of its own (chosen from this process's id, as in
test_go2_dds.py)."""

import math
import os
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from hardware.interface import VelocityCommand
from hardware.steering import (
    CmdVelSource,
    CommandBox,
    FixedCommand,
    GatedSource,
    StickSteering,
    deadband,
    make_steering,
    ramp,
)

pytest.importorskip(
    "cyclonedds",
    reason="the go2 extra is not installed (README, Go2): the remote's bytes and DDS need it",
)

from hardware.go2.conversions import remote_bytes, remote_sticks  # noqa: E402
from hardware.ros2_types import CmdVelReader, Twist_, ros2_topic, twist  # noqa: E402

GO2_BOX = CommandBox.from_ranges({"vx": (-1.0, 1.0), "vy": (-0.5, 0.5), "yaw_rate": (-1.0, 1.0)})
_DOMAINS = iter(range(200 - 3 * (os.getpid() % 19) - 3, 200))  # 3 ids per process


def sticks(lx=0.0, rx=0.0, ry=0.0, ly=0.0, buttons=0) -> bytes:
    """A 40-byte `wireless_remote` holding these sticks."""
    return bytes(remote_bytes(buttons, lx, rx, ry, ly))


class Remote:
    """A remote whose `wireless_remote` the test sets (`value`: bytes or None)."""

    def __init__(self, value=None):
        self.value = value

    def __call__(self):
        return self.value


def settle(source, t0=0.0, seconds=2.0, dt=0.01) -> tuple[VelocityCommand, float]:
    """Call `source` every `dt` from `t0` for `seconds`; the last command and time."""
    t = t0
    for t in np.arange(t0, t0 + seconds + dt / 2, dt):
        command = source(float(t))
    return command, float(t)


def values(command: VelocityCommand) -> np.ndarray:
    return command.as_array()


# --------------------------------------------------------------------------- sticks
def test_remote_sticks_read_what_remote_bytes_wrote():
    b = sticks(lx=0.25, rx=-0.5, ry=0.75, ly=-1.0, buttons=0x0104)
    assert remote_sticks(b) == (0.25, -0.5, 0.75, -1.0)
    assert remote_sticks(list(b)) == (0.25, -0.5, 0.75, -1.0)  # the DDS array as a list
    with pytest.raises(ValueError, match="40 bytes, got 39"):
        remote_sticks(b[:39])


def test_stick_signs_follow_unitree_and_full_deflection_reaches_the_box():
    """Left stick up: forward; left stick right: move right (vy < 0); right stick right: turn
    clockwise (yaw_rate < 0); ry does nothing. Full deflection gives the box's ends, on an
    asymmetric box too."""
    remote = Remote()
    cases = {  # (lx, rx, ry, ly) -> (vx, vy, yaw_rate) on GO2_BOX
        (0, 0, 0, 1): (1.0, 0, 0), (0, 0, 0, -1): (-1.0, 0, 0),
        (1, 0, 0, 0): (0, -0.5, 0), (-1, 0, 0, 0): (0, 0.5, 0),
        (0, 1, 0, 0): (0, 0, -1.0), (0, -1, 0, 0): (0, 0, 1.0),
        (0, 0, 1, 0): (0, 0, 0), (0, 0, -1, 0): (0, 0, 0),
    }  # fmt: skip
    for (lx, rx, ry, ly), expected in cases.items():
        remote.value = sticks(lx, rx, ry, ly)
        command, _ = settle(StickSteering(remote, GO2_BOX))
        np.testing.assert_allclose(values(command), expected, atol=1e-12)
    lopsided = CommandBox((-0.4, -0.2, -0.5), (1.2, 0.3, 0.8))
    remote.value = sticks(lx=-1.0, rx=-1.0, ly=-1.0)  # back, left, counter-clockwise
    command, _ = settle(StickSteering(remote, lopsided))
    np.testing.assert_allclose(values(command), (-0.4, 0.3, 0.8), atol=1e-12)
    remote.value = sticks(lx=1.0, rx=1.0, ly=1.0)
    command, _ = settle(StickSteering(remote, lopsided))
    np.testing.assert_allclose(values(command), (1.2, -0.2, -0.5), atol=1e-12)
    half = (0.5 - 0.1) / 0.9  # half deflection through the default 0.1 deadband
    remote.value = sticks(ly=0.5)
    command, _ = settle(StickSteering(remote, lopsided))
    assert command.vx == pytest.approx(half * 1.2, rel=1e-6)


def test_the_deadband_is_continuous_and_reaches_full_scale():
    for width in (0.0, 0.1, 0.3):
        x = np.linspace(-1.0, 1.0, 4001)
        y = np.array([deadband(v, width) for v in x])
        assert y[0] == -1.0 and y[-1] == 1.0 and np.all(np.diff(y) >= 0)  # monotone, full
        assert np.max(np.abs(np.diff(y))) <= (x[1] - x[0]) / (1 - width) + 1e-12  # no jump
        assert np.all(y[np.abs(x) <= width] == 0.0)
    assert deadband(0.1 + 1e-9, 0.1) == pytest.approx(1e-9 / 0.9)
    remote = Remote(sticks(ly=0.09, lx=-0.099, rx=0.05))  # inside the default deadband
    command, _ = settle(StickSteering(remote, GO2_BOX))
    assert values(command).tolist() == [0.0, 0.0, 0.0]
    with pytest.raises(ValueError, match=r"deadband must be in \[0, 1\)"):
        StickSteering(remote, GO2_BOX, deadband=1.0)


def test_a_step_reaches_full_speed_no_faster_than_the_acceleration_allows():
    """Full left stick up and right stick left from rest at accel 2 m/s^2, yaw_accel 4
    rad/s^2: vx reaches 1 m/s after 0.5 s (not before), the yaw rate 1 rad/s after 0.25 s;
    no change per call exceeds accel * dt, whatever the call times."""
    remote = Remote(sticks(ly=1.0, rx=-1.0))
    source = StickSteering(remote, GO2_BOX, accel=2.0, yaw_accel=4.0)
    rng = np.random.default_rng(0)
    times = np.cumsum(rng.uniform(0.001, 0.03, 100))
    out = np.array([values(source(t)) for t in times])
    steps, dts = np.abs(np.diff(out, axis=0)), np.diff(times)
    assert np.all(steps[:, 0] <= 2.0 * dts + 1e-12) and np.all(steps[:, 2] <= 4.0 * dts + 1e-12)
    elapsed = times - times[0]
    np.testing.assert_allclose(out[:, 0], np.minimum(2.0 * elapsed, 1.0), atol=1e-12)
    np.testing.assert_allclose(out[:, 2], np.minimum(4.0 * elapsed, 1.0), atol=1e-12)
    assert out[0].tolist() == [0.0, 0.0, 0.0]  # the first call starts from a stand
    np.testing.assert_allclose(ramp([0.0, 0, 0], [1.0, -1.0, 1.0], 0.1, [2.0, 2.0, 4.0]),
                               [0.2, -0.2, 0.4])  # fmt: skip


def test_released_sticks_ramp_the_command_down_to_a_stand():
    remote = Remote(sticks(ly=1.0, lx=1.0, rx=1.0))
    source = StickSteering(remote, GO2_BOX, accel=2.0, yaw_accel=2.0)
    command, t = settle(source)
    np.testing.assert_allclose(values(command), (1.0, -0.5, -1.0))
    remote.value = sticks()  # released
    assert source(t + 0.1).vx == pytest.approx(0.8)  # ramping down at 2 m/s^2
    command, t = settle(source, t + 0.1, seconds=0.5)
    assert values(command).tolist() == [0.0, 0.0, 0.0]
    remote.value = None  # the remote went missing: released too
    command, _ = settle(source, t, seconds=1.0)
    assert values(command).tolist() == [0.0, 0.0, 0.0] and source.counters["missing"] > 0


def test_bad_stick_values_are_refused_or_clipped_and_counted():
    """NaN and inf sticks read as released, each counted `nonfinite`; a finite value beyond
    +-1 is clipped to it, counted `clipped`; a remote of the wrong length is `malformed`."""
    remote = Remote(sticks(ly=math.nan, lx=math.inf, rx=-math.inf))
    source = StickSteering(remote, GO2_BOX)
    command, _ = settle(source, seconds=0.5, dt=0.05)  # 11 calls
    assert values(command).tolist() == [0.0, 0.0, 0.0]
    assert source.counters["nonfinite"] == 3 * 11 and source.counters["clipped"] == 0
    remote.value = sticks(ly=1.7, lx=-3.0, ry=2.0)
    source = StickSteering(remote, GO2_BOX)
    command, _ = settle(source, seconds=2.0, dt=0.5)  # 5 calls
    np.testing.assert_allclose(values(command), (1.0, 0.5, 0.0))  # as +1, -1 (ry unused)
    assert source.counters["clipped"] == 3 * 5 and source.counters["nonfinite"] == 0
    remote.value = sticks(ly=1.0)[:20]
    assert source(2.1).vx == pytest.approx(0.8) and source.counters["malformed"] == 1  # released


def test_bad_arguments_name_what_was_expected():
    with pytest.raises(ValueError, match=r"vy range .* low <= 0 <= high"):
        CommandBox((-1.0, 0.1, -1.0), (1.0, 0.5, 1.0))
    with pytest.raises(ValueError, match="missing"):
        CommandBox.from_ranges({"vx": (-1, 1), "vy": (-1, 1)})
    with pytest.raises(ValueError, match=r"range yaw_rate must be \(low, high\)"):
        CommandBox.from_ranges({"vx": (-1, 1), "vy": (-1, 1), "yaw_rate": (-1, 0, 1)})
    with pytest.raises(ValueError, match="largest yaw_rate"):
        CommandBox.symmetric(1.0, 0.5, -1.0)
    with pytest.raises(ValueError, match="accel must be a finite number > 0"):
        StickSteering(Remote(), GO2_BOX, accel=0.0)
    with pytest.raises(ValueError, match="timeout must be a finite number > 0"):
        CmdVelSource(GO2_BOX, timeout=math.nan)
    with pytest.raises(TypeError, match="box must be a CommandBox"):
        CmdVelSource({"vx": (-1, 1)})
    with pytest.raises(ValueError, match="steering mode must be one of"):
        make_steering("joystick", GO2_BOX)
    with pytest.raises(ValueError, match="needs participant"):
        make_steering("cmd_vel", GO2_BOX)
    with pytest.raises(ValueError, match="not a valid ROS 2 topic name"):
        ros2_topic("cmd vel")


# --------------------------------------------------------------------------- cmd_vel
class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_cmd_vel_maps_twist_fields_clips_into_the_box_and_counts():
    clock = Clock()
    source = CmdVelSource(GO2_BOX, clock=clock, accel=100.0, yaw_accel=100.0)
    assert source.submit((0.3, -0.2, 9.0), (5.0, 5.0, 0.4))  # z, roll, pitch rates ignored
    assert values(source(0.0)).tolist() == [0.0, 0.0, 0.0]  # the first call starts at rest
    np.testing.assert_allclose(values(source(0.1)), (0.3, -0.2, 0.4))
    assert source.counters["clipped"] == 0
    assert source.submit((2.0, -0.9, 0.0), (0.0, 0.0, -3.0))
    np.testing.assert_allclose(values(source(0.2)), (1.0, -0.5, -1.0))
    assert source.counters["clipped"] == 1 and source.counters["accepted"] == 2


def test_a_stale_cmd_vel_stops_the_robot():
    """Zero before the first Twist; the newest Twist holds until it is `timeout` old on the
    source's clock, then the command ramps down to a stand (one `timeouts` count); a new
    Twist moves it again."""
    clock = Clock()
    source = CmdVelSource(GO2_BOX, timeout=0.5, clock=clock, accel=2.0, yaw_accel=2.0)
    command, t = settle(source, seconds=0.3)
    assert values(command).tolist() == [0.0, 0.0, 0.0] and source.counters["timeouts"] == 0
    source.submit((0.6, 0.0, 0.0), (0.0, 0.0, 0.0))
    clock.now += 0.45
    command, t = settle(source, t, seconds=0.5)
    assert command.vx == pytest.approx(0.6) and source.counters["timeouts"] == 0
    clock.now += 0.1  # 0.55 s old
    assert source(t + 0.01).vx == pytest.approx(0.58)  # ramping down
    command, t = settle(source, t + 0.01, seconds=0.5)
    assert values(command).tolist() == [0.0, 0.0, 0.0] and source.counters["timeouts"] == 1
    source.submit((0.0, 0.0, 0.0), (0.0, 0.0, 0.5))
    command, _ = settle(source, t, seconds=0.5)
    assert command.yaw_rate == pytest.approx(0.5)


def test_a_twist_with_a_nan_is_refused_and_counted():
    clock = Clock()
    source = CmdVelSource(GO2_BOX, clock=clock)
    source.submit((0.4, 0.0, 0.0), (0.0, 0.0, 0.0))
    settle(source, seconds=0.5)
    for bad in ((math.nan, 0.0, 0.0), (0.0, 0.0, math.inf)):
        assert not source.submit(bad, (0.0, 0.0, 0.0))
    assert not source.submit((0.0, 0.0, 0.0), (math.nan, 0.0, 0.0))  # even a field unused
    command, _ = settle(source, 0.5, seconds=0.2)
    assert command.vx == pytest.approx(0.4)  # the last good Twist still holds
    c = source.counters
    assert (c["received"], c["accepted"], c["nonfinite"]) == (4, 1, 3)


def test_gated_steering_stands_until_active_and_then_ramps_from_zero():
    remote = Remote(sticks(ly=1.0))
    active = {"on": False}
    gated = GatedSource(StickSteering(remote, GO2_BOX, accel=2.0), lambda t: active["on"])
    command, t = settle(gated, seconds=1.0)
    assert values(command).tolist() == [0.0, 0.0, 0.0]
    active["on"] = True
    assert gated(t + 0.01).vx == 0.0  # starts from a stand: no jump to what the sticks held
    assert gated(t + 0.11).vx == pytest.approx(0.2)
    assert gated.counters["calls"] > 100
    fixed = GatedSource(FixedCommand(VelocityCommand(0.5)), lambda t: t >= 1.0)
    assert fixed(0.5).vx == 0.0 and fixed(1.0).vx == 0.5  # today's --velocity: a step


# --------------------------------------------------------------------------- ROS 2 on DDS
def test_ros2_names_and_wire_types():
    assert ros2_topic("cmd_vel") == ros2_topic("/cmd_vel") == "rt/cmd_vel"
    assert ros2_topic("cmd_vel", "/go2") == "rt/go2/cmd_vel"
    assert ros2_topic("/cmd_vel", "/go2") == "rt/cmd_vel"
    assert Twist_.__idl__.idl_transformed_typename == "geometry_msgs::msg::dds_::Twist_"
    data = twist(0.5, -0.25, 1.0).serialize()
    assert data[:2] == b"\x00\x01" and len(data) == 4 + 6 * 8  # CDR little-endian, 6 doubles
    assert Twist_.deserialize(data) == twist(0.5, -0.25, 1.0)


PUBLISHER = textwrap.dedent("""
    import sys, time
    from hardware.go2.dds import make_writer, open_domain
    from hardware.ros2_types import ros2_topic, twist, Twist_
    domain, participant = open_domain(int(sys.argv[1]), "lo")
    writer = make_writer(participant, ros2_topic("cmd_vel"), Twist_)
    end = time.monotonic() + float(sys.argv[2])
    while time.monotonic() < end:  # like teleop_twist_keyboard: repeated at 20 Hz
        writer.write(twist(0.4, -0.3, 0.7))
        time.sleep(0.05)
""")


def test_a_twist_published_on_rt_cmd_vel_reaches_the_command():
    """Another process publishes geometry_msgs Twist_ on rt/cmd_vel over loopback (as a ROS 2
    node would); `CmdVelReader` on its own participant turns it into the command, clipped to
    the box (vy -0.3 inside, yaw 0.7 inside, vx 0.4 inside); once the publisher stops the
    command times out to a stand."""
    from hardware.go2.dds import open_domain

    domain_id = next(_DOMAINS)
    domain, participant = open_domain(domain_id, "lo")
    source = CmdVelSource(GO2_BOX, timeout=0.3, accel=50.0, yaw_accel=50.0)
    reader = CmdVelReader(participant, source)
    assert reader.topic == "rt/cmd_vel"
    root = os.path.join(os.path.dirname(__file__), "..", "..")
    publisher = subprocess.Popen([sys.executable, "-c", PUBLISHER, str(domain_id), "1.0"],
                                 cwd=root, stderr=subprocess.PIPE)  # fmt: skip
    try:
        start = time.monotonic()
        command = VelocityCommand()
        while time.monotonic() - start < 10.0 and command.yaw_rate < 0.7 - 1e-9:
            command = reader(time.monotonic() - start)
            time.sleep(0.01)
        np.testing.assert_allclose(values(command), (0.4, -0.3, 0.7), atol=1e-12)
        assert source.counters["accepted"] >= 1 and source.counters["nonfinite"] == 0
        publisher.wait(timeout=10.0)
        assert publisher.returncode == 0, publisher.stderr.read().decode()
        time.sleep(0.4)  # the last Twist grows stale
        for _ in range(5):
            command = reader(time.monotonic() - start)
            time.sleep(0.02)
        assert values(command).tolist() == [0.0, 0.0, 0.0]
        assert source.counters["timeouts"] == 1
    finally:
        publisher.kill()
        publisher.wait()
        reader.close()


def test_the_simulated_go2_holds_the_sticks_of_sim_sticks():
    """`python -m hardware.go2.sim --sticks T D LX RX RY LY --press ...`: the LowStates carry
    those sticks (float32 at bytes 4, 8, 12, 20) with the pressed buttons, CRC valid, and
    `StickSteering` reads them as forward, moving right and turning counter-clockwise."""
    pytest.importorskip("mujoco", reason="the simulated Go2 runs MuJoCo (the mujoco extra)")
    from hardware.go2 import messages as msgs
    from hardware.go2 import sim
    from hardware.go2.conversions import Buttons, remote_buttons
    from hardware.go2.crc import crc_ok
    from hardware.go2.dds import TOPIC_LOWSTATE, make_reader, open_domain, take

    domain_id = next(_DOMAINS)
    args = ["--domain", str(domain_id), "--interface", "lo", "--max-lifetime", "60", "--freeze",
            "--press", "0", "1000", str(int(Buttons.A)),
            "--sticks", "0", "1000", "0.1", "0.1", "0.1", "0.1",  # overridden by the next
            "--sticks", "0", "1000", "0.55", "-1.0", "0.25", "0.8"]  # fmt: skip
    domain, participant = open_domain(domain_id, "lo")
    reader = make_reader(participant, TOPIC_LOWSTATE, msgs.LowState_)
    with sim.spawn(args, startup_timeout=60.0, stderr=subprocess.DEVNULL) as proc:
        states, deadline = [], time.monotonic() + 10.0
        while not states and time.monotonic() < deadline:
            states = take(reader, msgs.LowState_)
            time.sleep(0.01)
        proc.send_signal(15)
        proc.communicate(timeout=15)
    assert states, "no LowState from the simulated Go2"
    state = states[-1]
    assert crc_ok(state) and remote_buttons(state.wireless_remote) == Buttons.A
    assert remote_sticks(state.wireless_remote) == pytest.approx((0.55, -1.0, 0.25, 0.8))
    command, _ = settle(StickSteering(Remote(bytes(state.wireless_remote)), GO2_BOX))
    expected = ((0.8 - 0.1) / 0.9 * 1.0, -(0.55 - 0.1) / 0.9 * 0.5, 1.0)
    np.testing.assert_allclose(values(command), expected, rtol=1e-6)
