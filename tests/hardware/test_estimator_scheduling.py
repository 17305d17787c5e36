"""The estimator rides out a busy computer: samples stamped by the robot's clock and queued.

A LowState stream is recorded from MuJoCo (the shipped proprioceptive policy walking at
0.5 m/s behind Go2 sensor noise), then replayed over DDS on loopback to a `Go2Robot` behind
an `EstimatedRobot` twice: once read every 2 ms, once read with the stalls and bursts of a
loaded machine (reads held back 20-90 ms, the publisher's samples delivered in clumps). The
filter must give the same velocity at every robot tick, and no fault: the stream carries the
same information, only its delivery differs.
"""

from __future__ import annotations

import os
import threading
import time

import numpy as np
import pytest

from hardware.estimator import EstimatorConfig, StateEstimator
from hardware.go2.tick_clock import TickClock
from hardware.interface import GRAVITY

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SAME_ESTIMATE = 0.02  # [m/s] the estimate with and without delays, at the same robot tick


# --------------------------------------------------------------------------- the tick clock
def test_stamps_are_the_robots_intervals_however_late_the_samples_arrive():
    rng = np.random.default_rng(0)
    clock = TickClock(calibration=0.2)
    ticks = np.arange(0, 3000, 2)  # 6 s at 500 Hz
    delays = 0.0003 + rng.exponential(0.004, len(ticks))
    delays[rng.random(len(ticks)) < 0.05] += 0.06  # stalls
    stamps = np.array([clock(k, 100.0 + 1e-3 * k + d) for k, d in zip(ticks, delays)])
    after = 1e-3 * ticks > 0.2
    intervals = np.diff(stamps[after])
    # exact but where the offset slews at a window's end, by at most drift_rate * window
    np.testing.assert_allclose(intervals, 0.002, atol=clock.drift_rate * clock.window + 1e-12)
    assert np.mean(np.abs(intervals - 0.002) < 1e-9) > 0.99
    # a stamp is when the sample was taken: the offset plus the fastest delivery
    np.testing.assert_allclose(stamps[after] - 1e-3 * ticks[after], 100.0 + delays.min(), atol=2e-4)


def test_the_tick_unwraps_past_its_32_bits():
    clock = TickClock()
    top = 2**32 - 2
    a, b = clock(top, 10.0), clock(0, 10.002)  # 2 ms later, the counter wrapped
    assert b - a == pytest.approx(0.002, abs=1e-9)


def test_the_offset_follows_a_drifting_clock_no_faster_than_the_drift_rate():
    clock = TickClock(calibration=0.1, window=1.0, drift_rate=1e-4)
    ticks = np.arange(0, 60000, 2)  # 60 s
    drift = 5e-5  # this computer's clock runs 50 ppm fast
    stamps = np.array([clock(k, 1e-3 * k * (1 + drift)) for k in ticks])
    age = 1e-3 * ticks * (1 + drift) - stamps  # how old a fresh sample looks
    assert np.all(np.abs(age[ticks > 2000]) < 1.5e-4)  # tracked
    assert np.all(np.diff(stamps) > 0.002 - 1.1e-4)


def test_tick_clock_rejects_bad_arguments():
    with pytest.raises(ValueError, match="drift_rate"):
        TickClock(drift_rate=-1.0)
    with pytest.raises(ValueError, match="window"):
        TickClock(window=float("nan"))


# --------------------------------------------------------------------------- the gap bound
def test_the_gap_bound_is_the_velocity_noise_over_g():
    config = EstimatorConfig()
    assert config.gap_bound == pytest.approx(np.sqrt(config.foot_velocity_var) / GRAVITY)
    assert EstimatorConfig(max_dt=0.05).gap_bound == 0.05
    with pytest.raises(ValueError, match="max_dt"):
        EstimatorConfig(max_dt=0.0)


# --------------------------------------------------------------------------- the replay
class LoggingEstimator(StateEstimator):
    """Keeps `(timestamp, velocity or NaN, fault)` of every update."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.log: list = []

    def update(self, measurement, contact=None):
        e = super().update(measurement, contact)
        v = e.base_linear_velocity if e.valid else np.full(3, np.nan)
        self.log.append((float(measurement.timestamp), np.array(v, dtype=float), e.fault))
        return e


@pytest.fixture(scope="module")
def recorded_stream():
    pytest.importorskip("mujoco")
    return record_stream()


def record_stream():
    """`(measurements, model)`: 3 s of a MuJoCo Go2 standing up, holding, then walking at
    0.5 m/s under the shipped proprioceptive policy, as its noisy sensors saw it (500 Hz)."""
    from learning.sensor_stream import record_walk

    return record_walk(3.0, seed=3)


def replay(samples, model, domain, *, loaded: bool, seed: int = 0):
    """Publish `samples` as LowStates (ticks from their timestamps) in real time and read them
    through `Go2Robot` and `EstimatedRobot`; returns the `LoggingEstimator`."""
    from hardware.estimated_robot import EstimatedRobot
    from hardware.go2 import conversions, dds
    from hardware.go2 import messages as msgs
    from hardware.go2.robot import Go2Robot
    from hardware.interface import JointMap

    joint_map = JointMap.from_model(model)
    perm = conversions.sdk_permutation(joint_map)
    rng = np.random.default_rng(seed)
    t0 = samples[0].timestamp
    ticks = [round(1e3 * (m.timestamp - t0)) for m in samples]
    messages = [conversions.lowstate_from_measurement(m, perm, tick_ms=k)
                for m, k in zip(samples, ticks)]  # fmt: skip
    done = threading.Event()

    def publish():
        start = time.perf_counter()
        i = 0
        while i < len(messages):
            # on time, or (loaded) clumps of 1-12 samples written back to back
            clump = int(rng.integers(1, 13)) if loaded else 1
            due = start + 0.002 * (i + clump - 1)
            time.sleep(max(0.0, due - time.perf_counter()))
            for msg in messages[i : i + clump]:
                writer.write(msg)
            i += clump
        done.set()

    go2 = Go2Robot(joint_map, domain=domain, interface="lo", sport_state=False,
                   connect_timeout=0.0, command_timeout=1.0, state_timeout=1.0)  # fmt: skip
    # the robot's side in the same participant (one per domain and process)
    writer = dds.make_writer(go2.participant, dds.TOPIC_LOWSTATE, msgs.LowState_)
    estimator = LoggingEstimator(model, EstimatorConfig())
    robot = EstimatedRobot(go2, estimator)
    deadline = time.perf_counter() + 5.0
    while go2.read() is None and time.perf_counter() < deadline:
        writer.write(messages[0])
        time.sleep(0.01)
    go2.take_samples()  # the discovery samples are not part of the stream
    estimator.reset()
    thread = threading.Thread(target=publish, daemon=True)
    thread.start()
    try:
        while not done.is_set():
            robot.read()
            stall = rng.uniform(0.02, 0.09) if loaded and rng.random() < 0.03 else 0.002
            time.sleep(stall)
        time.sleep(0.05)
        robot.read()
    finally:
        thread.join(timeout=5.0)
        go2.close()
    return estimator


def by_tick(log):
    """`{tick [ms] relative to the first: velocity (3,)}` of a `LoggingEstimator.log`."""
    t0 = log[0][0]
    return {round(1e3 * (t - t0)): v for t, v, _ in log}


@pytest.mark.usefixtures("recorded_stream")
def test_a_late_and_bursty_stream_gives_the_same_estimate_and_no_fault(recorded_stream):
    pytest.importorskip("cyclonedds")
    samples, model = recorded_stream
    domain = 200 + os.getpid() % 30
    quiet = replay(samples, model, domain, loaded=False)
    loaded = replay(samples, model, domain + 1, loaded=True, seed=1)
    assert all(fault is None for _, _, fault in quiet.log + loaded.log)
    a, b = by_tick(quiet.log), by_tick(loaded.log)
    # no sample lost either way (the first is the discovery sample's duplicate at most)
    assert len(a) >= len(samples) - 2 and len(b) >= len(samples) - 2
    common = sorted(set(a) & set(b))
    va, vb = np.array([a[k] for k in common]), np.array([b[k] for k in common])
    valid = np.isfinite(va).all(axis=1) & np.isfinite(vb).all(axis=1)
    assert valid.mean() > 0.8  # the filter ran for the walk, not only a stand
    walking = np.array(common) > 1500
    assert np.mean(va[valid & walking, 0]) > 0.3  # it estimated a walk
    assert np.max(np.abs(va[valid] - vb[valid])) < SAME_ESTIMATE
