"""bench_mpc's cycle-time table: the count, median, p99, maximum and share past the 20 ms budget
of the cycles it is given, and the verdict against the targets (median 5 ms, p99 10 ms)."""

import numpy as np
from bench_helpers import load_benchmark


def row_cells(lines):
    row = next(line for line in lines if line.startswith("| ") and line[2].isdigit())
    return [c.strip() for c in row.strip("|").split("|")]


def test_cycle_time_table_counts_overruns_and_percentiles():
    bench = load_benchmark("bench_mpc")
    times = np.full(1000, 0.004)
    times[:20] = 0.025  # 2 % past the budget: the p99 is one of them
    times[20:30] = 0.009
    cells = row_cells(bench.cycle_time_table(times))
    assert cells[0] == "1000"
    assert cells[1] == "4.0"  # median
    assert cells[2] == "25.0"
    assert cells[3] == "25.0"
    assert cells[4] == "20 (2.0%)"
    assert cells[5] == "not met (0.8x, 2.5x)"  # the median meets its target, the p99 not
    times[:20] = 0.009  # now the p99 is 9 ms
    fast = row_cells(bench.cycle_time_table(times))
    assert fast[2] == "9.0" and fast[4] == "0 (0.0%)" and fast[5] == "met (0.8x, 0.9x)"
    lines = bench.cycle_time_table(times, {"linearize": 0.004, "backward": 0.0015,
                                           "line_search": 0.002, "other": 0.0005})  # fmt: skip
    assert "| linearize | backward | line_search | other |" in lines
    assert "| 4.00 | 1.50 | 2.00 | 0.50 |" in lines
