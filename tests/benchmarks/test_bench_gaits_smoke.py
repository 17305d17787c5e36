"""The gait-library benchmark runs end to end (worker process, JSON, table) with the tiniest
settings and writes nothing (`--no-write`); it asserts the plumbing, not the gaits (those are
in test_gait_library.py). Its table lists only the failed checks, each with its value against
what it needed."""

import pytest
from bench_helpers import load_benchmark


def _check(value, required, passed):
    return {"value": value, "required": required, "passed": passed}


def _row(command, forward, yaw_rate, checks):
    return {"command": command, "status": "max_iterations", "iterations": 60, "cost": 4.5,
            "seconds": 3.2, "forward": forward, "yaw_rate": yaw_rate, "checks": checks,
            "passed": all(c["passed"] for c in checks.values())}  # fmt: skip


def test_table_shows_only_the_failed_checks_with_their_values():
    bench = load_benchmark("bench_gaits")
    height = _check([0.26, 0.29], [0.2, 0.33], True)
    trot = {"speed": _check(0.293, 0.3, True), "drift": _check(0.01, 0.15, True),
            "height": height, "pattern agreement": _check(0.89, 0.75, True),
            "first pair alone": _check(0.375, 0.2, True),
            "second pair alone": _check(0.35, 0.2, True),
            "pairs in step": _check(0.9, 0.75, True)}  # fmt: skip
    bound = {**trot, "speed": _check(0.25, 0.3, False), "drift": _check(0.2, 0.15, False),
             "height": _check([0.14, 0.29], [0.2, 0.33], False),
             "pattern agreement": _check(0.706, 0.75, False),
             "first pair alone": _check(0.15, 0.2, False)}  # fmt: skip
    walk = {"speed": _check(0.29, 0.3, True), "drift": _check(0.0, 0.15, True),
            "height": height, "pattern agreement": _check(0.94, 0.75, True),
            "three feet down": _check(1.0, 0.7, True),
            "every foot swings": _check(0.95, 0.9, False)}  # fmt: skip
    stand = {"speed": _check(0.06, 0.05, False), "drift": _check(0.0, 0.15, True),
             "height": height, "pattern agreement": _check(1.0, 0.75, True),
             "all four down": _check(1.0, 0.95, True)}  # fmt: skip
    results = {
        "a1": {
            "trot": _row(0.3, 0.293, 0.01, trot),
            "bound": _row(0.3, 0.25, 0.2, bound),
            "walk": _row(0.3, 0.29, 0.0, walk),
            "stand": _row(0.0, 0.06, 0.0, stand),
        }
    }
    text = bench.render(results, "python benchmarks/bench_gaits.py", 60, 0.8,
                        date="2026-12-07T14:29:24+00:00")  # fmt: skip
    lines = text.splitlines()
    assert lines[0] == bench.HEADING and "- Date: 2026-12-07T14:29:24+00:00" in lines
    header = next(line for line in lines if line.startswith("| robot |"))
    assert "gait pattern" not in header and header.endswith("| solve s | checks |")
    rows = {line.split("|")[2].strip(): line for line in lines if line.startswith("| a1 |")}
    assert rows["trot"] == "| a1 | trot | 0.30 | +0.293 | max_iterations | 4.50 | 0.89 | 3 | pass |"
    assert rows["bound"].endswith(
        "| FAIL: speed +0.250, not within 10 % of 0.30, drift 0.200 > 0.15, "
        "height 0.140-0.290 m outside 0.200-0.330, pattern agreement 0.706 < 0.75, "
        "first pair alone 0.150 < 0.2 |"
    )
    assert "second pair alone" not in rows["bound"]  # passed: not listed
    assert rows["walk"].endswith("| FAIL: every foot swings 0.950 > 0.9 |")
    assert rows["stand"].endswith("| FAIL: speed 0.060 > 0.05 |")
    assert lines[-1] == "1 of 4 (robot, gait) pairs pass every check."


@pytest.mark.slow
def test_bench_gaits_tiny(capsys):
    bench = load_benchmark("bench_gaits")
    results = bench.main(["--robots", "solo12", "--gaits", "stand", "pronk", "--iterations", "1",
                          "--duration", "0.06", "--jobs", "1", "--no-write"])  # fmt: skip
    assert set(results) == {"solo12"} and set(results["solo12"]) == {"stand", "pronk"}
    row = results["solo12"]["pronk"]
    assert {"speed", "drift", "height", "pattern agreement", "flight"} <= set(row["checks"])
    assert "| solo12 | pronk |" in capsys.readouterr().out
