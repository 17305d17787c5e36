"""examples/deploy_go2.py's deployment log and examples/view.py --log (fast, headless), and the
real-time MPC and the shipped policy over DDS against the simulated Go2, in real time, with the
state estimator in place of the base state the robot does not publish (slow)."""

import json
import os

import numpy as np
import pytest
from bench_helpers import load_example

from hardware.deployment_log import DeploymentLog, DeploymentLogWriter

_DOMAINS = iter(range(232 - 4 * (os.getpid() % 19) - 4, 232))  # 4 ids per process


def synthetic_log(folder, ticks=400, dt=0.002):
    """A standing Go2 moving forward at 0.3 m/s (the truth) and an estimate off by known
    amounts: v_x +0.05 m/s, v_y a +-0.02 m/s square wave, v_z exact, z -0.01 m; the estimate
    absent for the first 50 ticks (estimator not yet valid). Returns the expected RMS errors."""
    import dynamics

    model = dynamics.load_robot("go2")
    t = dt * np.arange(ticks)
    truth_v = np.tile([0.3, 0.0, 0.0], (ticks, 1))
    truth_p = np.stack([0.3 * t, 0 * t, np.full(ticks, 0.32)], axis=1)
    wave = np.where(np.arange(ticks) % 2 == 0, 0.02, -0.02)
    est_v = truth_v + np.stack([np.full(ticks, 0.05), wave, 0 * t], axis=1)
    est_p = truth_p - [0.0, 0.0, 0.01]
    header = {"robot": "go2", "controller": "mpc", "foot_names": list(model.foot_names)}
    with DeploymentLogWriter(str(folder), header, chunk_ticks=64) as log:
        for k in range(ticks):
            valid = k >= 50
            log.append({
                "t": t[k], "phase": "controller", "joint_q": model.q_standing[7:],
                "joint_qd": np.zeros(12), "base_quat": np.array([0, 0, 0, 1.0]),
                "base_angular_velocity": np.zeros(3), "foot_force": np.full(4, 37.0),
                "command_q_target": model.q_standing[7:],
                "base_linear_velocity": est_v[k] if valid else None,
                "base_position": est_p[k] if valid else None,
                "base_state_source": "estimator" if valid else "",
                "estimator_base_linear_velocity": est_v[k] if valid else None,
                "estimator_base_position": est_p[k] if valid else None,
                "truth_base_linear_velocity": truth_v[k], "truth_base_position": truth_p[k],
                "truth_base_quat": np.array([0, 0, 0, 1.0]),
            })  # fmt: skip
    return {"velocity_x": 0.05, "velocity_y": 0.02, "velocity_z": 0.0,
            "velocity": np.sqrt((0.05**2 + 0.02**2) / 3), "height": 0.01}  # fmt: skip


def test_view_plots_a_deployment_log_headless(tmp_path, capsys):
    """view.py --log: the RMS errors of the estimate against the truth are the injected ones
    (over the ticks with an estimate), they are in the plots' titles, the PNGs are written into
    the log folder, and the run replays (HTML export) with the base from the estimate or the
    truth."""
    from viz import deployment_plots

    expected = synthetic_log(tmp_path / "run")
    out = load_example("view").main(["--log", str(tmp_path / "run"), "--no-viewer",
                              "--export-html", str(tmp_path / "replay.html")])  # fmt: skip
    for name, value in expected.items():
        assert out["errors"][name] == pytest.approx(value, abs=1e-12), name
    names = ("base_velocity", "base_height", "foot_forces")
    assert out["plots"] == [str(tmp_path / "run" / f"deployment_{n}.png") for n in names]
    assert all(os.path.getsize(p) > 10_000 for p in out["plots"])
    assert (tmp_path / "replay.html").stat().st_size > 100_000
    assert "velocity_x 0.0500 m/s" in capsys.readouterr().out
    run = DeploymentLog.load(str(tmp_path / "run"))
    figures = deployment_plots.deployment_figures(run)
    titles = [ax.get_title() for ax in figures["base_velocity"].axes]
    assert titles[0].endswith("RMS error 0.0500 m/s") and "0.0200" in titles[1]
    assert figures["base_height"].axes[0].get_title().endswith("RMS error 0.0100 m")
    estimate = deployment_plots.log_trajectory(run, "estimate", every=10)
    truth = deployment_plots.log_trajectory(run, "truth", every=10)
    assert estimate.q.shape == (35, 19) and truth.q.shape == (40, 19)  # 350 and 400 ticks
    np.testing.assert_allclose(estimate.q[:, 2], 0.31)
    np.testing.assert_allclose(truth.q[:, 2], 0.32)
    assert estimate.dt == pytest.approx(0.02)
    with pytest.raises(SystemExit):  # neither a trajectory nor a log
        load_example("view").main(["--no-viewer"])


def test_deploy_go2_writes_its_log_while_it_runs(tmp_path):
    """deploy_go2.py standing up the simulated Go2 for 1.5 s: the log folder has one row per
    command tick of the run (the loop's own log has the same ticks), the LowState-derived
    joints and foot forces, the commands written (the loop's), the start-up phases (passive,
    then the stand-up from the software's request), and the summary."""
    pytest.importorskip("cyclonedds")
    pytest.importorskip("mujoco")
    deploy = load_example("deploy_go2")
    folder = tmp_path / "log"
    summary, result = deploy.run("stand", seconds=1.5, domain=next(_DOMAINS), estimator="off",
                                 state_timeout=0.3, log_folder=str(folder))  # fmt: skip
    run = DeploymentLog.load(str(folder))
    ticks = len(result.log["t"])  # 750 but for the deadlines a loaded machine skips
    assert run.complete and run.header["controller"] == "stand" and len(run) == ticks > 300
    assert run.summary["safety_mode"] == summary["safety_mode"] == "normal"
    np.testing.assert_array_equal(run["joint_q"], result.log["joint_q"])
    np.testing.assert_array_equal(run["command_q_target"], result.log["q_target"])
    phases = list(dict.fromkeys(run["startup_phase"]))  # in order of appearance
    assert phases[-1] == "stand_up" and set(phases) <= {"passive", "stand_up"}
    assert run["joint_q"].shape == (ticks, 12) and run["base_quat"].shape == (ticks, 4)
    meta = json.loads((folder / "log.json").read_text())
    assert meta["header"]["estimator"] == {"on": False, "requested": "off", "settings": {}}
    if meta["header"]["ground_truth"] is not None:  # the simulated Go2's true base state
        z = run["truth_base_position"][:, 2]
        assert np.all(np.isfinite(z[len(z) // 2 :])) and np.nanmax(z) < 0.45
    if "foot_force" in run:  # the simulated Go2 sends foot forces: non-negative newtons
        assert np.nanmin(run["foot_force"]) >= 0


def deploy_with_the_estimator(tmp_path, controller: str, seconds: float, load: int = 0):
    """examples/deploy_go2.py: `controller` on the simulated Go2 over DDS in real time with
    `--estimator on`, stand-up first, 0.5 m/s commanded 1 s into the controller phase.
    Prints the cycle statistics, the estimator's RMS errors and the safety events; asserts
    what every such run must hold: the estimate (never the truth) fed the controller, the
    safety layer never damped, the TRUE base (the simulator's, from the log) stayed up and
    moved at 0.3-0.6 m/s along world x (its heading may drift) and within 0.05 m/s of the
    command along its path. `load` busy processes run beside it (`--load`). Returns the summary."""
    pytest.importorskip("cyclonedds")
    pytest.importorskip("mujoco")
    from viz import deployment_plots

    summary = load_example("deploy_go2").main(
        ["--controller", controller, "--velocity", "0.5", "--seconds", str(seconds),
         "--estimator", "on", "--domain", str(next(_DOMAINS)), "--state-timeout", "0.3",
         "--log", str(tmp_path / "log"), "--out", str(tmp_path), "--load", str(load)]
    )  # fmt: skip
    run = DeploymentLog.load(str(tmp_path / "log"))
    events = [(e["kind"], e["count"], e["detail"]) for e in summary["safety_events"]]
    print("estimator RMS", deployment_plots.base_state_errors(run))
    print("ground truth", summary["ground_truth"])
    print("safety events", [e for e in events if e[0] != "rate_limited"],
          "rate_limited", sum(c for k, c, _ in events if k == "rate_limited"))  # fmt: skip
    assert summary["estimator"]
    assert summary["safety_mode"] == "normal", [e for e in events if e[0] != "rate_limited"]
    controller_phase = run["startup_phase"] == "controller"
    if load == 0:  # the 500 Hz path holds its rate on a quiet machine; loaded, it reports
        assert controller_phase.sum() > 0.9 * seconds / 0.002
    print("command ticks of the controller phase", controller_phase.sum(), "of",
          round(seconds / 0.002), "; missed", summary["timing"]["command"]["missed_ticks"])
    assert set(run["base_state_source"][controller_phase]) == {"estimator"}
    truth = summary["ground_truth"]
    assert truth is not None, "the simulated Go2 published no ground truth"
    assert truth["min_base_height_m"] > 0.2  # standing: 0.33 m
    assert 0.3 < truth["average_speed_m_per_s"] < 0.6  # along world x: a drifting heading
    assert abs(truth["path_speed_m_per_s"] - 0.5) < 0.05
    assert summary["command_path"] == "process"
    return summary


@pytest.mark.slow
def test_the_mpc_trots_in_real_time_over_dds_with_the_estimator(tmp_path):
    """The real-time MPC (solver process on its own core, one FDDP iteration per cycle, the
    compiled derivatives, the lookahead: deploy_network.py's configuration), 10 s, with
    `deploy_with_the_estimator`'s checks, and no solver error."""
    from native import c_library

    if not c_library.compiler_available():
        pytest.skip("no C compiler for derivatives='compiled', the example's default")
    m = deploy_with_the_estimator(tmp_path, "mpc", 10.0)["mpc"]
    keys = ("cycles", "median_s", "p99_s", "overruns", "plan_age_median_s", "plan_age_p99_s",
            "lookahead_median_s", "error")  # fmt: skip
    print({k: m.get(k) for k in keys}, "overrun share", m["overruns"] / max(m["cycles"], 1))
    assert m["error"] is None and m["cycles"] > 100


@pytest.mark.slow
@pytest.mark.parametrize("load", [0, 2], ids=["quiet", "a busy process per core"])
def test_the_shipped_policy_walks_20_s_in_real_time_over_dds_with_the_estimator(tmp_path, load):
    """The shipped policy (examples/policies/go2_omni_proprio) for 20 s, with
    `deploy_with_the_estimator`'s checks, on a quiet machine and beside two busy processes
    (a computer about half as fast): the estimator never faults, the robot is never damped."""
    summary = deploy_with_the_estimator(tmp_path, "policy", 20.0, load=load)
    print("command loop", summary["timing"]["command"])


@pytest.mark.slow
def test_the_mpc_degrades_but_walks_beside_a_busy_process_per_core(tmp_path):
    """The real-time MPC as `test_the_mpc_trots_in_real_time_over_dds_with_the_estimator`
    with two busy processes beside it: slower replanning, reported in the plan ages and the
    lookahead, and `deploy_with_the_estimator`'s checks (no fall, no damping)."""
    from native import c_library

    if not c_library.compiler_available():
        pytest.skip("no C compiler for derivatives='compiled', the example's default")
    m = deploy_with_the_estimator(tmp_path, "mpc", 10.0, load=2)["mpc"]
    keys = ("cycles", "median_s", "plan_age_median_s", "plan_age_max_s", "lookahead_median_s",
            "lookahead_max_s", "call_plan_age_p99_s", "expired_calls", "error")  # fmt: skip
    print({k: m.get(k) for k in keys})
    assert m["error"] is None and m["cycles"] > 100
    # reported: the lookahead follows the plan age, whole planning steps
    assert m["lookahead_max_s"] >= m["plan_age_median_s"] - 1e-9
