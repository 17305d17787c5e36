"""The high-rate path in its own process: shared-memory blocks, and a controller that hangs or
raises in the other process while the high-rate loop keeps its rate and damps the robot."""

from __future__ import annotations

import multiprocessing
import time

import numpy as np
import pytest

from hardware.command_process import CommandPathProcess, SharedCommandController, run_controller
from hardware.interface import JointCommand, JointMap, Measurement, RobotMode, VelocityCommand
from hardware.shared_state import SeqlockBlock, SharedLink

NU = 12
Q_STAND = np.tile([0.0, 0.8, -1.5], 4)


def measurement(sequence=1, **changes) -> Measurement:
    m = Measurement(
        timestamp=time.perf_counter(), sequence=sequence, joint_q=Q_STAND.copy(),
        joint_qd=np.zeros(NU), base_quat=np.array([0.0, 0.0, 0.0, 1.0]),
        base_angular_velocity=np.zeros(3), base_linear_acceleration=np.array([0, 0, 9.81]),
    )  # fmt: skip
    return m.replace(**changes)


# --------------------------------------------------------------------------- the blocks
def test_a_measurement_and_a_command_cross_unchanged():
    link = SharedLink.create(NU)
    try:
        assert link.state() is None and link.command() is None
        m = measurement(
            7, foot_force=np.array([40.0, 41, 42, 43]), robot_mode=RobotMode.DAMPING,
            base_linear_velocity=np.array([0.5, 0, 0]), base_state_source="estimator",
        )  # fmt: skip
        link.publish_state(m, 1.25, VelocityCommand(0.5, -0.2, 0.3))
        got, t, command = link.state()
        assert t == 1.25 and command == VelocityCommand(0.5, -0.2, 0.3)
        for name in ("timestamp", "sequence", "robot_mode", "base_state_source"):
            assert getattr(got, name) == getattr(m, name)
        for name in ("joint_q", "foot_force", "base_linear_velocity", "base_quat"):
            np.testing.assert_array_equal(getattr(got, name), getattr(m, name))
        assert got.base_position is None and got.joint_tau is None
        c = JointCommand.create(Q_STAND, 30.0, 1.0, nu=NU, timestamp=m.timestamp)
        link.send_command(c.replace(sequence=5, arm=True))
        back = link.command()
        assert back.sequence == 5 and back.arm and back.timestamp == c.timestamp
        np.testing.assert_array_equal(back.kp, c.kp)
        assert link.commands_sent == 1
    finally:
        link.close()


def _hammer(name, size, stop):
    from multiprocessing import shared_memory

    block = SeqlockBlock(shared_memory.SharedMemory(name=name), size)
    value, fill = 0.0, np.empty(size)
    while not stop.is_set():
        value += 1.0
        fill[:] = value
        block.write(fill)
        time.sleep(5e-5)  # far faster than the 500 Hz writer it stands for, not a livelock
    block.array = None
    block.shm.close()


def test_a_reader_never_sees_half_a_write():
    """A writer process fills the block with one value per write, some 10,000 writes a second
    (a 500 Hz writer's 20 times); every copy the reader keeps holds one value only. (A writer
    that never pauses can starve a seqlock's reader: `read` then raises, it never tears.)"""
    from multiprocessing import shared_memory

    size = 5000
    shm = shared_memory.SharedMemory(create=True, size=8 * (size + 1))
    context = multiprocessing.get_context("spawn")
    stop = context.Event()
    writer = context.Process(target=_hammer, args=(shm.name, size, stop), daemon=True)
    block = SeqlockBlock(shm, size)
    block.array[:] = 0.0
    writer.start()
    try:
        seen = set()
        deadline = time.perf_counter() + 10.0
        while len(seen) < 200 and time.perf_counter() < deadline:
            copy = block.read()
            if copy is not None:
                assert copy.min() == copy.max()
                seen.add(copy[0])
        assert len(seen) >= 200
    finally:
        stop.set()
        writer.join(timeout=5.0)
        block.array = None
        shm.close()
        shm.unlink()


def test_bad_joint_count_is_refused():
    with pytest.raises(ValueError, match="nu"):
        SharedLink.create(0)


# --------------------------------------------------------------------------- the process
class StandingRobot:
    """A robot that stands still: a fresh measurement at every read; keeps what is written."""

    def __init__(self):
        self.joint_map = JointMap(
            robot="standing", names=tuple(f"j{i}" for i in range(NU)),
            q_index=np.arange(7, 7 + NU), v_index=np.arange(6, 6 + NU),
            lower=Q_STAND - 2.0, upper=Q_STAND + 2.0, velocity_limit=np.full(NU, 30.0),
            effort_limit=np.full(NU, 40.0), q_default=Q_STAND.copy(),
            kp_default=np.full(NU, 30.0), kd_default=np.full(NU, 1.0),
        )  # fmt: skip
        self.sequence = 0
        self.written: list = []

    def read(self):
        self.sequence += 1
        return measurement(self.sequence)

    def write(self, command):
        self.written.append((float(command.kp.max()), float(command.q_target[1])))

    def now(self):
        return time.perf_counter()


def serve_standing(link, duration):
    """The high-rate side of the tests: the control loop at 500 Hz on a `StandingRobot`."""
    from hardware import control_loop
    from hardware.safety import SafetyConfig, SafetyLayer

    robot = StandingRobot()
    controller = SharedCommandController(link, reset_timeout=10.0)
    safety = SafetyLayer(robot.joint_map, SafetyConfig(soft_start_duration=0.05))
    result = control_loop.run(robot, controller, safety, duration=duration, control_dt=0.002,
                              command_dt=0.002, realtime=True)  # fmt: skip
    gains = np.array([kp for kp, _ in robot.written])
    return {"timing": result.timing["command"], "mode": result.safety.mode.name,
            "events": sorted(result.safety.counters), "kp": gains.tolist(),
            "q_thigh": [q for _, q in robot.written]}  # fmt: skip


class Hold:
    """Holds a pose 0.05 rad off the standing one; from `hang_after` calls on it hangs (or
    raises with `raises`)."""

    def __init__(self, hang_after=None, raises=False):
        self.calls, self.hang_after, self.raises = 0, hang_after, raises

    def reset(self, m):
        self.calls = 0

    def __call__(self, m, t, command):
        self.calls += 1
        if self.hang_after is not None and self.calls > self.hang_after:
            if self.raises:
                raise RuntimeError("controller bug")
            time.sleep(3600.0)
        return JointCommand.create(Q_STAND + 0.05, 30.0, 1.0, nu=NU, timestamp=m.timestamp)


def run_both(controller, duration=1.5):
    path = CommandPathProcess(serve_standing, nu=NU, kwargs={"duration": duration})
    path.start()
    import threading

    out = {}
    thread = threading.Thread(
        target=lambda: out.update(run_controller(path.link, controller, control_dt=0.02,
                                                 running=path.is_alive)),
        daemon=True,
    )  # fmt: skip
    thread.start()
    summary = path.join(timeout=60.0)
    thread.join(timeout=1.0)
    return summary, out


def test_the_controllers_commands_reach_the_robot_at_the_full_rate():
    summary, parent = run_both(Hold())
    timing = summary["timing"]
    assert summary["mode"] == "NORMAL"
    assert timing["ticks"] >= 0.8 * 1.5 / 0.002  # the 500 Hz loop ran
    assert parent["resets"] == 1 and parent["calls"] > 20 and parent["errors"] == 0
    assert np.isclose(summary["q_thigh"][-1], Q_STAND[1] + 0.05)  # the other process's pose


@pytest.mark.parametrize("raises", [False, True], ids=["hangs", "raises"])
def test_a_controller_that_hangs_or_raises_leaves_the_loop_damping_at_its_rate(raises):
    summary, parent = run_both(Hold(hang_after=10, raises=raises), duration=1.5)
    timing = summary["timing"]
    assert summary["mode"] == "DAMPING"
    assert "command_timeout" in summary["events"]
    assert summary["kp"][-1] == 0.0  # damping goes out
    assert timing["ticks"] >= 0.8 * 1.5 / 0.002  # still at the full rate
    if raises:
        assert parent["errors"] > 0
