"""The make_policy benchmark renders a run's records: a finished run's stage times, tracking
and check, with the failed seeds' reasons counted; an unfinished run's missing stages as '-'."""

import json

from bench_helpers import load_benchmark


def write_run(folder, stages, check=None):
    folder.mkdir()
    state = {
        "robot": "go1",
        "recipe": {"shac_iterations": 10},
        "stages": stages,
        "box": [0.5, 0.25, 0.6],
    }
    (folder / "pipeline.json").write_text(json.dumps(state))
    if check is not None:
        (folder / "check.json").write_text(json.dumps(check))
    return str(folder)


def test_bench_make_policy_renders_finished_and_unfinished_runs(tmp_path):
    bench = load_benchmark("bench_make_policy")
    done = {s: {"seconds": 60.0, "result": {}} for s in ("plans", "export")}
    done["warm_start"] = {"seconds": 120.0, "result": {"tracking_error": 0.2}}
    done["shac"] = {"seconds": 600.0, "result": {"tracking_error": 0.1, "fell_fraction": 0.25}}
    done["check"] = {"seconds": 60.0, "result": {"walked": 1, "of": 2}}
    reasons = ["fell: base down to 0.1 m (below 0.2 m)", "damped at 3.2 s (damping after x)"]
    check = {"seeds": [{"why_not": []}, {"why_not": reasons}]}
    finished = write_run(tmp_path / "a", done, check)
    unfinished = write_run(tmp_path / "b", {"plans": {"seconds": 30.0, "result": {}}})
    runs = bench.main([finished, unfinished, "--no-write"])
    table = bench.render(runs, "test")
    rows = [line for line in table.splitlines() if line.startswith("| go1 |")]
    assert (
        "| 60 | 120 | 600 | 60 | 60 | 15 | 0.200 | 0.100, 25% | 10 | (0.5, 0.25, 0.6) | 1 of 2 |"
        in rows[0]
    )
    assert "fell (1), damped at (1)" in rows[0]
    assert rows[1].startswith("| go1 | 30 | - | - | - | - | 0 |")
