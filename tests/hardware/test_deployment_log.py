"""Deployment logs (`hardware.deployment_log`): written while a run goes on, read back equal;
an interrupted run keeps what was written; `RecordingRobot` logs one row per command tick of
the control loop with the measurement, the command written and the probes' outputs."""

import json
import os

import numpy as np
import pytest

import dynamics
from hardware import control_loop
from hardware.backends.mujoco_sim import MuJoCoRobot
from hardware.deployment_log import (
    HEADER,
    DeploymentLog,
    DeploymentLogWriter,
    RecordingRobot,
    measurement_row,
)
from hardware.interface import JointCommand, Measurement, RobotMode
from hardware.pose import PoseController
from hardware.safety import SafetyConfig, SafetyLayer


def _rows(n, rng):
    """Synthetic rows of every kind: floats, an int, a bool, strings, a late column."""
    sources = ("ground_truth", "estimator", "sport_state")
    rows = []
    for k in range(n):
        row = {
            "t": 0.002 * k,
            "joint_q": rng.normal(size=12),
            "foot_force": rng.uniform(0, 80, size=4),
            "sequence": k,
            "measured": k % 3 != 0,
            "base_state_source": sources[k % 3],
            "safety_mode": "soft_start" if k < 4 else "normal",
        }
        if k >= 7:  # a probe that starts answering late (an estimator after its first update)
            row["estimator_nis"] = float(k)
        rows.append(row)
    return rows


def test_a_log_reads_back_what_was_written(tmp_path):
    rows = _rows(23, np.random.default_rng(0))
    header = {"robot": "go2", "controller": "mpc", "estimator": {"on": True, "sigma": 0.1}}
    with DeploymentLogWriter(str(tmp_path / "run"), header, chunk_ticks=5) as log:
        for row in rows:
            log.append(row)
        log.summary = {"safety_mode": "normal"}
    run = DeploymentLog.load(str(tmp_path / "run"))
    assert run.header == header and run.complete and len(run) == 23
    assert run.summary == {"safety_mode": "normal"}
    assert len(run.meta["chunks"]) == 5  # 4 full chunks of 5 and one of 3
    for name in ("t", "joint_q", "foot_force", "sequence", "measured"):
        expected = np.array([r[name] for r in rows])
        np.testing.assert_array_equal(run[name], expected)
        assert run[name].dtype == expected.dtype, name
    assert list(run["base_state_source"]) == [r["base_state_source"] for r in rows]
    assert list(run["safety_mode"]) == [r["safety_mode"] for r in rows]
    nis = run["estimator_nis"]  # NaN before the column first appeared, in earlier chunks too
    assert np.all(np.isnan(nis[:7])) and np.array_equal(nis[7:], np.arange(7, 23))


def test_an_interrupted_run_keeps_what_was_written(tmp_path):
    """An exception inside the `with` block: every row is kept and the log is marked complete
    (close ran); a writer never closed (a killed process): the full chunks are on disk, the
    header says incomplete, the rows of the chunk in progress are lost."""
    rows = _rows(12, np.random.default_rng(1))
    with pytest.raises(KeyboardInterrupt):
        with DeploymentLogWriter(str(tmp_path / "ctrl_c"), {"robot": "go2"}, chunk_ticks=5) as log:
            for row in rows:
                log.append(row)
            raise KeyboardInterrupt
    run = DeploymentLog.load(str(tmp_path / "ctrl_c"))
    assert len(run) == 12 and run.complete
    np.testing.assert_array_equal(run["joint_q"], [r["joint_q"] for r in rows])

    killed = DeploymentLogWriter(str(tmp_path / "killed"), {"robot": "go2"}, chunk_ticks=5)
    for row in rows:
        killed.append(row)
    killed._queue.join()  # the background writer has written what it was handed
    run = DeploymentLog.load(str(tmp_path / "killed"))
    assert len(run) == 10 and not run.complete
    np.testing.assert_array_equal(run["joint_q"], [r["joint_q"] for r in rows[:10]])
    files = sorted(os.listdir(tmp_path / "killed"))
    assert files == [HEADER, "ticks_00000.npz", "ticks_00001.npz"]  # no temporary left
    killed.close()
    assert len(DeploymentLog.load(str(tmp_path / "killed"))) == 12


def test_bad_rows_and_folders_are_refused_by_name(tmp_path):
    log = DeploymentLogWriter(str(tmp_path / "run"), chunk_ticks=5)
    log.append({"joint_q": np.zeros(12), "mode": "normal"})
    with pytest.raises(ValueError, match="'joint_q' has shape"):
        log.append({"joint_q": np.zeros(11)})
    with pytest.raises(TypeError, match="'mode' holds strings"):
        log.append({"mode": 3})
    with pytest.raises(TypeError, match="'obj'"):
        log.append({"obj": object()})
    with pytest.raises(TypeError, match="'mode' holds strings"):  # joint_q copied, then refused
        log.append({"joint_q": np.ones(12), "mode": 3})
    log.append({"mode": "stand"})
    log.close()
    run = DeploymentLog.load(str(tmp_path / "run"))
    assert len(run) == 2 and list(run["mode"]) == ["normal", "stand"]
    assert np.all(run["joint_q"][0] == 0) and np.all(np.isnan(run["joint_q"][1]))  # no trace
    with pytest.raises(FileExistsError):
        DeploymentLogWriter(str(tmp_path / "run"))
    with pytest.raises(FileNotFoundError, match="not a deployment log"):
        DeploymentLog.load(str(tmp_path))
    with pytest.raises(ValueError, match="chunk_ticks"):
        DeploymentLogWriter(str(tmp_path / "other"), chunk_ticks=0)


def test_rows_of_one_layout_take_the_planned_path_with_the_same_checks(tmp_path):
    """Rows with the same columns in the same order (a run's ticks) follow the first one's
    plan: new strings, None, bad shapes and types behave as on the general path, across
    chunks."""
    log = DeploymentLogWriter(str(tmp_path / "run"), chunk_ticks=3)
    modes = ["stand", "stand", "walk", "stand", "trot", "walk", "walk"]
    for k, mode in enumerate(modes):
        log.append({"t": 0.1 * k, "joint_q": np.full(12, float(k)), "mode": mode,
                    "nis": None if k == 2 else float(k)})  # fmt: skip
        if k == 4:
            with pytest.raises(ValueError, match="'joint_q' has shape"):
                log.append({"t": 9.0, "joint_q": np.zeros(11), "mode": "x", "nis": 1.0})
            with pytest.raises(TypeError, match="'mode' holds strings"):
                log.append({"t": 9.0, "joint_q": np.ones(12), "mode": 3, "nis": 1.0})
    log.close()
    run = DeploymentLog.load(str(tmp_path / "run"))
    assert len(run) == len(modes) and list(run["mode"]) == modes
    np.testing.assert_array_equal(run["joint_q"][:, 0], np.arange(len(modes)))
    np.testing.assert_array_equal(run["t"], 0.1 * np.arange(len(modes)))
    assert np.isnan(run["nis"][2]) and run["nis"][6] == 6.0


def test_measurement_rows_keep_the_new_fields_and_leave_out_the_absent_ones():
    m = Measurement(
        timestamp=1.5, sequence=7, joint_q=np.arange(12.0), joint_qd=np.zeros(12),
        base_quat=np.array([0, 0, 0, 1.0]), base_angular_velocity=np.zeros(3),
        base_linear_acceleration=np.array([0, 0, 9.81]), foot_force=np.array([1, 2, 3, 4.0]),
        motor_temperature=np.full(12, 40.0), base_state_source="estimator",
        robot_mode=RobotMode.DAMPING,
    )  # fmt: skip
    row = measurement_row(m)
    assert row["base_state_source"] == "estimator" and row["robot_mode"] == int(RobotMode.DAMPING)
    np.testing.assert_array_equal(row["foot_force"], [1, 2, 3, 4])
    assert row["base_position"] is None and row["joint_tau"] is None  # absent: NaN in the log
    assert measurement_row(None) == {}


def test_the_recording_robot_logs_every_tick_of_a_control_loop(tmp_path):
    """MuJoCo standing for 0.2 s in simulated time through the safety layer: one row per
    command tick; the logged joints and base height are MuJoCo's at each read, the logged
    commands are exactly what the loop wrote (its own recorder's `q_target`, `kp`), the safety
    modes are the loop's, and a probe's values land under its name."""
    pytest.importorskip("mujoco")
    model = dynamics.load_robot("go2")
    mujoco_robot = MuJoCoRobot(model)
    safety = SafetyLayer(mujoco_robot.joint_map, SafetyConfig(soft_start_duration=0.05))
    truth = []

    def ground_truth():
        z = float(mujoco_robot.data.qpos[2])
        truth.append(z)
        return {"base_height": z, "source": "mujoco"}

    folder = str(tmp_path / "stand")
    with DeploymentLogWriter(folder, {"robot": "go2"}, chunk_ticks=16) as log:
        robot = RecordingRobot(mujoco_robot, log, safety=safety, probes={"truth": ground_truth})
        result = control_loop.run(robot, PoseController.standing(robot.joint_map), safety,
                                  duration=0.2, control_dt=0.02, command_dt=0.002)  # fmt: skip
    run = DeploymentLog.load(folder)
    loop = result.log
    assert len(run) == len(loop["t"]) == 100
    np.testing.assert_array_equal(run["joint_q"], loop["joint_q"])
    np.testing.assert_array_equal(run["base_position"], loop["base_position"])
    np.testing.assert_array_equal(run["command_q_target"], loop["q_target"])
    np.testing.assert_array_equal(run["command_kp"], loop["kp"])
    assert list(run["safety_mode"]) == list(loop["mode"])
    assert set(run["base_state_source"]) == {"ground_truth"}
    # the probe reads MuJoCo after the write, before the step: the height of that tick's read
    np.testing.assert_array_equal(run["truth_base_height"], truth)
    np.testing.assert_allclose(run["truth_base_height"], loop["base_position"][:, 2], atol=0)
    assert set(run["truth_source"]) == {"mujoco"}
    np.testing.assert_allclose(np.diff(run["t"]), 0.002, atol=1e-12)
    meta = json.loads((tmp_path / "stand" / HEADER).read_text())
    assert meta["columns"]["command_q_target"] == {"kind": "f", "shape": [12]}


class _FakeRobot:
    """Two joints; `read` returns a measurement with a growing sequence."""

    def __init__(self):
        self.joint_map, self.sequence, self.written = None, 0, []
        self.extra = "inner"

    def read(self):
        self.sequence += 1
        return Measurement(
            timestamp=0.01 * self.sequence, sequence=self.sequence, joint_q=np.zeros(2),
            joint_qd=np.zeros(2), base_quat=np.array([0, 0, 0, 1.0]),
            base_angular_velocity=np.zeros(3), base_linear_acceleration=np.zeros(3),
        )  # fmt: skip

    def write(self, command):
        self.written.append(command)

    def now(self):
        return 0.01 * self.sequence

    def close(self):
        pass


def test_a_failing_probe_is_counted_and_the_row_still_written(tmp_path):
    """A probe that raises on every second tick: its error is counted and its first message
    kept, the other probe's columns and the measurement are written at every tick, the tags
    land as columns, and attributes of the inner robot pass through."""
    calls = []

    def flaky():
        calls.append(1)
        if len(calls) % 2 == 0:
            raise RuntimeError("no estimate")
        return {"nis": float(len(calls))}

    with DeploymentLogWriter(str(tmp_path / "run"), chunk_ticks=3) as log:
        robot = RecordingRobot(_FakeRobot(), log, probes={"est": flaky, "ok": lambda: {"x": 1.0}})
        robot.tags = {"phase": "hold"}
        for _ in range(4):
            robot.read()
            robot.write(JointCommand.create(np.zeros(2), 1.0, 0.1))
    assert robot.probe_errors == {"est": 2, "ok": 0} and robot.extra == "inner"
    assert robot.probe_failures == {"est": "RuntimeError: no estimate"}
    run = DeploymentLog.load(str(tmp_path / "run"))
    np.testing.assert_array_equal(run["est_nis"], [1.0, np.nan, 3.0, np.nan])
    np.testing.assert_array_equal(run["ok_x"], 1.0)
    np.testing.assert_array_equal(run["sequence"], [1, 2, 3, 4])
    np.testing.assert_allclose(run["t"], [0.0, 0.01, 0.02, 0.03])
    assert list(run["phase"]) == ["hold"] * 4
    np.testing.assert_array_equal(run["command_kp"], np.ones((4, 2)))
