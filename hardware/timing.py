"""Timing statistics of a periodic loop: period, jitter, compute time, overruns, missed ticks.

    stats = TimingStats(period=0.002)
    stats.record(start, duration, scheduled)      # once per tick, times in seconds
    stats.summary()                               # medians, 99th percentiles, maxima, counts

`start` is when the tick began and `scheduled` when it should have begun; jitter is the
lateness `start - scheduled` (>= 0 for a loop that sleeps until its deadline). `duration` is
the wall-clock time the tick's work took; an overrun is a tick whose work took longer than the
period (in simulated time, where the clock waits for the work, an overrun is a tick that
*would* have been late in real time). Missed ticks are deadlines a real-time loop skipped
because it was already past them.
"""

from __future__ import annotations

import numpy as np


class TimingStats:
    def __init__(self, period: float):
        self.period = float(period)
        self.starts: list = []
        self.scheduled: list = []
        self.durations: list = []
        self.missed = 0

    def record(self, start: float, duration: float, scheduled: float | None = None) -> None:
        self.starts.append(float(start))
        self.scheduled.append(float(start if scheduled is None else scheduled))
        self.durations.append(float(duration))

    def summary(self) -> dict:
        """Statistics in seconds (NaN where there are too few ticks)."""
        starts, durations = np.array(self.starts), np.array(self.durations)
        lateness = starts - np.array(self.scheduled)
        intervals = np.diff(starts)

        def q(x, p):
            return float(np.percentile(x, p)) if len(x) else float("nan")

        return {
            "ticks": len(starts),
            "period_s": self.period,
            "interval_median_s": q(intervals, 50),
            "interval_p99_s": q(intervals, 99),
            "interval_max_s": float(np.max(intervals)) if len(intervals) else float("nan"),
            "jitter_median_s": q(lateness, 50),
            "jitter_p99_s": q(lateness, 99),
            "jitter_max_s": float(np.max(lateness)) if len(lateness) else float("nan"),
            "compute_median_s": q(durations, 50),
            "compute_p99_s": q(durations, 99),
            "compute_max_s": float(np.max(durations)) if len(durations) else float("nan"),
            "overruns": int(np.sum(durations > self.period)),
            "missed_ticks": int(self.missed),
        }


def format_summary(name: str, summary: dict) -> str:
    """One line of a `TimingStats.summary()` in milliseconds."""
    ms = {k: 1e3 * v for k, v in summary.items() if k.endswith("_s")}
    return (
        f"{name}: {summary['ticks']} ticks at {ms['period_s']:.1f} ms; interval median "
        f"{ms['interval_median_s']:.3f} p99 {ms['interval_p99_s']:.3f} ms; jitter p99 "
        f"{ms['jitter_p99_s']:.3f} max {ms['jitter_max_s']:.3f} ms; compute median "
        f"{ms['compute_median_s']:.3f} p99 {ms['compute_p99_s']:.3f} max "
        f"{ms['compute_max_s']:.3f} ms; overruns {summary['overruns']}, missed "
        f"{summary['missed_ticks']}"
    )
