"""`examples/make_policy.py`: one command from a robot to a deployable, checked policy.

Fast: every stage at tiny settings on Go1 (a robot no line of this project was written for),
each stage's artefact written, an interrupted run resuming where it stopped, a finished run
skipping every stage, a changed setting re-running its stage, another robot in the same
folder refused. Slow: a Go1 policy with the default recipe walks the randomised tour with the
estimator on 7 of 8 seeds.
"""

import dataclasses
import importlib.util
import json
import os
import subprocess
import sys

import pytest

from learning import pipeline

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _load_example():
    path = os.path.join(ROOT, "examples", "make_policy.py")
    spec = importlib.util.spec_from_file_location("make_policy", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Interrupted(RuntimeError):
    pass


def test_every_stage_runs_writes_its_artefact_and_resumes(tmp_path, monkeypatch):
    pytest.importorskip("mujoco")
    from learning.shac import recipe

    out = str(tmp_path / "go1")

    def interrupted(*args, **kwargs):
        raise Interrupted("stopped during shac")

    with monkeypatch.context() as patch:  # the SHAC stage stops before it starts training
        patch.setattr(recipe, "train_policy", interrupted)
        with pytest.raises(Interrupted):
            _load_example().main(["--robot", "go1", "--out", out, "--tiny"])
    with open(os.path.join(out, "pipeline.json")) as f:
        stopped = json.load(f)
    assert list(stopped["stages"]) == ["plans", "warm_start"]  # nothing finished is lost
    lines = []
    command = "python examples/make_policy.py --robot go1 --tiny"
    state = pipeline.make_policy(
        "go1", out, pipeline.PolicyRecipe.tiny(), progress=lines.append, command=command
    )
    assert list(state["stages"]) == list(pipeline.STAGES)
    for stage in ("plans", "warm_start"):  # resumed: done earlier, not run again
        assert state["stages"][stage] == stopped["stages"][stage]
        assert any(line.startswith(f"[{pipeline.STAGES.index(stage) + 1}/5] {stage}: done")
                   for line in lines)  # fmt: skip
    for path in ("plans/dataset.npz", "warm_start/policy.eqx", "shac/policy.eqx",
                 "shac/checkpoints", "policy/policy.json", "policy/policy.npz",
                 "policy/numpy_policy.py", "policy/README.md", "check.json"):  # fmt: skip
        assert os.path.exists(os.path.join(out, path)), path
    with open(os.path.join(out, "policy", "policy.json")) as f:
        config = json.load(f)
    assert config["robot"] == "go1"
    assert "base_linear_velocity" not in " ".join(config["inputs"])  # what the robot measures
    readme = open(os.path.join(out, "policy", "README.md")).read()
    assert "python examples/make_policy.py --robot go1 --tiny" in readme
    check = state["stages"]["check"]["result"]
    assert check["of"] == 1 and 0 <= check["walked"] <= 1
    shac = state["stages"]["shac"]["result"]  # the tiny recipe compares its 2 checkpoints
    assert set(shac["held_out_walked"]) == {"1", "2"} and shac["chosen_iteration"] in (1, 2)
    assert max(shac["held_out_walked"].values()) == shac["held_out_walked"][
        str(shac["chosen_iteration"])]  # fmt: skip
    for iteration in (1, 2):
        assert os.path.isfile(os.path.join(out, "shac", "select", str(iteration), "policy.json"))
    table = pipeline.closing_table(state)
    assert all(f"| {stage} |" in table for stage in pipeline.STAGES)

    again = []  # a finished run: every stage skipped, nothing changed
    assert pipeline.make_policy("go1", out, pipeline.PolicyRecipe.tiny(),
                                progress=again.append) == state  # fmt: skip
    assert all("done earlier" in line for line in again)
    # a changed check setting re-runs the check alone
    shorter = dataclasses.replace(pipeline.PolicyRecipe.tiny(), check_segment_seconds=0.3)
    rerun = []
    state = pipeline.make_policy("go1", out, shorter, progress=rerun.append)
    assert [line for line in rerun if "done earlier" not in line][0].startswith("[5/5] check")
    with pytest.raises(pipeline.RecipeMismatch, match="holds a run of robot 'go1', not 'a1'"):
        pipeline.make_policy("a1", out, shorter, progress=again.append)


def test_every_recipe_field_belongs_to_a_stage():
    fields = {f.name for f in dataclasses.fields(pipeline.PolicyRecipe)}
    assert fields == {f for names in pipeline.STAGE_FIELDS.values() for f in names}


@pytest.mark.parametrize("field, value", [("shac_iterations", 0), ("select_checkpoints", -1),
                                          ("envs", 2.5), ("actor_lr", 0.0),
                                          ("check_segment_seconds", float("nan"))])  # fmt: skip
def test_a_bad_recipe_field_is_named(field, value):
    with pytest.raises(ValueError, match=f"PolicyRecipe.{field} must be"):
        pipeline.PolicyRecipe(**{field: value})


def test_an_unknown_robot_fails_before_any_work(tmp_path):
    with pytest.raises(ValueError, match="unknown robot 'spot'. Available robots: a1"):
        pipeline.make_policy("spot", str(tmp_path / "spot"), pipeline.PolicyRecipe.tiny())
    assert not os.path.exists(tmp_path / "spot")


def test_the_command_box_scales_by_dynamic_similarity_and_the_joints_speed():
    """Speeds ~ sqrt(g h), yaw rates ~ sqrt(g / h); a box beyond JOINT_SPEED_FRACTION qd_max h
    shrinks, its shape kept."""
    import numpy as np

    from dynamics import load_robot

    f = pipeline.BOX_FRACTION
    h_go2 = float(load_robot("go2").q_standing[2])
    for robot in ("go1", "anymal_c", "go2"):
        model = load_robot(robot)
        h = float(model.q_standing[2])
        froude = (f * np.sqrt(h / h_go2), f * 0.5 * np.sqrt(h / h_go2), f * np.sqrt(h_go2 / h))
        joint_speed = float(np.min(np.asarray(model.velocity_limit)[6:]))
        cap = pipeline.JOINT_SPEED_FRACTION * joint_speed * h
        shrink = min(1.0, cap / froude[0])
        assert pipeline.command_box(robot) == pytest.approx([c * shrink for c in froude], abs=0.006)
    vx_go1, _, _ = pipeline.command_box("go1")
    vx_anymal, vy_anymal, yaw_anymal = pipeline.command_box("anymal_c")  # 7.5 rad/s joints
    assert vx_anymal == pytest.approx(pipeline.JOINT_SPEED_FRACTION * 7.5 * float(
        load_robot("anymal_c").q_standing[2]), abs=0.006)  # fmt: skip
    assert vy_anymal == pytest.approx(vx_anymal / 2, abs=0.006)


def test_a_changed_command_box_runs_every_stage_again(tmp_path, monkeypatch):
    out = str(tmp_path / "go1")
    ran = []

    def stage_that_records(stage):
        def run(*args):
            ran.append(stage)
            return {"ok": 1}

        return run

    monkeypatch.setattr(pipeline, "_RUN", {s: stage_that_records(s) for s in pipeline.STAGES})
    pipeline.make_policy("go1", out, pipeline.PolicyRecipe.tiny(), progress=lambda line: None)
    assert ran == list(pipeline.STAGES)
    os.makedirs(os.path.join(out, "shac", "checkpoints"))  # a stale checkpoint of the old box
    monkeypatch.setattr(pipeline, "command_box", lambda robot: (0.1, 0.05, 0.1))
    lines = []
    state = pipeline.make_policy("go1", out, pipeline.PolicyRecipe.tiny(), progress=lines.append)
    assert ran == 2 * list(pipeline.STAGES)
    assert state["box"] == [0.1, 0.05, 0.1]
    assert "the command box changed" in lines[0]
    assert not os.path.exists(os.path.join(out, "shac", "checkpoints"))


@pytest.mark.slow
def test_a_go1_policy_walks_the_randomised_tour_on_7_of_8_seeds(tmp_path):
    """The README's command with the default recipe, end to end on Go1, as a user runs it: in
    its own process at XLA's default optimisation level (the suite's level 0 compiles faster
    and trains several times slower; about 20 minutes on 2 cores)."""
    pytest.importorskip("mujoco")
    out = str(tmp_path / "go1")
    env = dict(os.environ, XLA_FLAGS=_without_optimisation_level(os.environ.get("XLA_FLAGS", "")))
    subprocess.run([sys.executable, os.path.join(ROOT, "examples", "make_policy.py"),
                    "--robot", "go1", "--out", out], cwd=ROOT, env=env, check=True)  # fmt: skip
    with open(os.path.join(out, "pipeline.json")) as f:
        check = json.load(f)["stages"]["check"]["result"]
    assert check["of"] == 8 and check["walked"] >= 7, check


def _without_optimisation_level(flags: str) -> str:
    return " ".join(f for f in flags.split() if "xla_backend_optimization_level" not in f)
