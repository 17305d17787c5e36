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


def test_an_unknown_robot_fails_before_any_work(tmp_path):
    with pytest.raises(ValueError, match="unknown robot 'spot'. Available robots: a1"):
        pipeline.make_policy("spot", str(tmp_path / "spot"), pipeline.PolicyRecipe.tiny())
    assert not os.path.exists(tmp_path / "spot")


def test_the_command_box_scales_by_dynamic_similarity():
    """Speeds ~ sqrt(g h), yaw rates ~ sqrt(g / h): Go2 gets BOX_FRACTION of its own box."""
    vx, vy, yaw = pipeline.command_box("go2")
    f = pipeline.BOX_FRACTION
    assert (vx, vy, yaw) == pytest.approx((f * 1.0, f * 0.5, f * 1.0), abs=0.011)
    vx_a, _, yaw_a = pipeline.command_box("anymal_c")
    assert vx_a > vx and yaw_a < yaw  # taller: faster, turning slower


@pytest.mark.slow
def test_a_go1_policy_walks_the_randomised_tour_on_7_of_8_seeds(tmp_path):
    """The default recipe end to end on Go1 (about an hour on one core)."""
    pytest.importorskip("mujoco")
    state = pipeline.make_policy("go1", str(tmp_path / "go1"), pipeline.PolicyRecipe())
    check = state["stages"]["check"]["result"]
    assert check["of"] == 8 and check["walked"] >= 7
