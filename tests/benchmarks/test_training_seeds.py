"""`benchmarks/training_seeds.py`: the spread over seeds and the warm-start verdict are computed
from the runs' curves as `bench_training` defines "reached" (hand-made curves, known answers)."""

import json

import pytest
from bench_helpers import load_benchmark


def _point(wall, error, fell=0.0, steps_per_second=1000):
    return {"iteration": int(wall), "env_steps": int(wall * steps_per_second),
            "wall_time": float(wall), "tracking_error": error, "fell_fraction": fell}  # fmt: skip


def _write(folder, method, curve, seed):
    folder.mkdir(parents=True, exist_ok=True)
    run = {"curve": curve, "compile_time": 40.0, "iterations": 10, "settings": {"seed": seed}}
    (folder / "training_curves.json").write_text(json.dumps({method: run}))


def _runs(tmp_path, fresh_times):
    """Warm start: 0.1 m/s with no fall at 60, 90, 120 s. Fresh: at `fresh_times` (None: never;
    its last evaluation at 480 s). Each curve also has an evaluation below 0.1 m/s with a fall
    before that, which must not count."""
    folders = []
    for seed, (warm_at, fresh_at) in enumerate(zip((60, 90, 120), fresh_times)):
        warm = [_point(0, 0.2), _point(30, 0.05, fell=0.1), _point(warm_at, 0.08),
                _point(480, 0.05)]  # fmt: skip
        fresh = [_point(0, 0.5), _point(30, 0.09, fell=0.2)]
        fresh += [_point(fresh_at, 0.099)] if fresh_at else []
        fresh += [_point(480, 0.12 if fresh_at is None else 0.07)]
        for method, curve in (("shac-init", warm), ("shac-smooth", fresh)):
            folder = tmp_path / f"{method}_{seed}"
            _write(folder, method, curve, seed)
            folders.append(folder)
    return folders


def test_the_summary_counts_only_evaluations_without_a_fall(tmp_path):
    seeds = load_benchmark("training_seeds")
    runs = seeds.load_runs(_runs(tmp_path, (200, 300, 400)))
    warm = seeds.summarize(runs["shac-init"])
    assert warm["seeds"] == 3 and warm["seed_numbers"] == [0, 1, 2]
    reached = warm["reached"][0.1]
    assert reached["count"] == 3 and reached["wall_s"] == [60, 90, 120]
    assert reached["wall_spread"] == (90.0, 60, 120)
    assert reached["steps_spread"] == (90_000.0, 60_000, 120_000)
    assert warm["final_error"] == pytest.approx((0.05, 0.05, 0.05))
    fresh = seeds.summarize(runs["shac-smooth"])
    assert fresh["reached"][0.1]["wall_spread"] == (300.0, 200, 400)
    assert fresh["reached"][0.3]["wall_s"] == [200, 300, 400]  # 0.09 at 30 s fell: not counted
    sentence = seeds.warm_against_fresh({"shac-init": warm, "shac-smooth": fresh})
    assert "warm start 90 s, fresh start 300 s (ratio 0.30" in sentence and "is met" in sentence


def test_a_fresh_start_that_never_reaches_the_threshold_gives_a_bound(tmp_path):
    seeds = load_benchmark("training_seeds")
    runs = seeds.load_runs(_runs(tmp_path, (None, None, None)))
    summaries = {m: seeds.summarize(r) for m, r in runs.items()}
    assert summaries["shac-smooth"]["reached"][0.1]["count"] == 0
    sentence = seeds.warm_against_fresh(summaries)
    assert "did not reach it on any of its 3 seeds within 480 s" in sentence
    assert "met (as a bound)" in sentence
    runs = seeds.load_runs(_runs(tmp_path / "slow", (100, 150, 200)))
    summaries = {m: seeds.summarize(r) for m, r in runs.items()}
    assert "is not met" in seeds.warm_against_fresh(summaries)  # 90 s against half of 150 s


def test_the_script_writes_the_plot_and_names_a_bad_folder(tmp_path):
    seeds = load_benchmark("training_seeds")
    folders = _runs(tmp_path, (200, None, 400))
    png = tmp_path / "seeds.png"
    text = seeds.main([*map(str, folders), "--png", str(png)])
    assert png.stat().st_size > 10_000
    assert "| shac-smooth | 3 |" in text and "2 of 3" in text
    # seed 1 never reached it: counted at its 480 s budget, (200 + 480 + 400) / 3 = 360 s
    assert "with no fall on 2 of 3 seeds (mean 300 s where it did)" in text
    assert "its mean time is more than 360 s" in text and "met (as a bound)" in text
    with pytest.raises(SystemExit, match="nowhere: no training_curves.json"):
        seeds.main([str(tmp_path / "nowhere")])
