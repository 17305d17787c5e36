"""The build benchmark's table from rows of its own shape: one line per setting, ratios against
the first (the one-unit peer). The measurement itself compiles a library per setting (minutes)
and is run by hand; nothing about speed is asserted."""

from bench_helpers import load_benchmark


def test_bench_build_renders_ratios_against_the_one_unit_peer():
    bench = load_benchmark("bench_build")
    assert bench.SETTINGS[0] == ("one unit, -O2", ("-O2",), True)
    rows = [
        {"robot": "go2", "setting": label, "units": 1 if one else 7, "build_s": build,
         "compile_s": build - 3.0, "iteration_ms": ms, "iterations": 10}
        for (label, _, one), build, ms in zip(bench.SETTINGS, (40.0, 12.0, 20.0, 30.0, 26.0),
                                              (8.0, 16.0, 8.4, 8.0, 8.0), strict=True)
    ]  # fmt: skip
    table = bench.render(rows, "python benchmarks/bench_build.py", "1.00 1.00 1.00")
    lines = [line for line in table.splitlines() if line.startswith("| go2 |")]
    assert len(lines) == len(bench.SETTINGS)
    assert lines[0].endswith("| 40.0 | 1.00 | 8.0 | 1.00 |")
    assert lines[1].endswith("| 12.0 | 0.30 | 16.0 | 2.00 |")
