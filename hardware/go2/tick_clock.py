"""The robot's sample clock on this computer's: LowState `tick` [ms] mapped to `perf_counter`.

    clock = TickClock()
    stamp = clock(msg.tick, time.perf_counter())   # [s], this computer's clock

A sample taken at robot time `tau` (the unwrapped uint32 `tick` / 1000) arrives at local time

    a = tau + c + d,     c the offset between the two clocks, d >= 0 its delay

(the robot's send, the network, this process's scheduling). The stamp is `tau + c_hat`, with
`c_hat` the smallest `a - tau` seen: the offset plus the smallest delay, i.e. when the sample
was taken on this computer's clock, up to the link's fastest delivery. Two consequences:

- consecutive stamps differ by the robot's own interval, however late or bunched the samples
  arrive: a filter that integrates over the interval (`hardware.estimator`) sees the robot's
  500 Hz, not this computer's scheduling;
- a stamp compared with `perf_counter()` gives a sample's age (command age, stale state).

`c_hat` is the running minimum during the first `calibration` [s] of robot time (stamps may
step back there, by how much faster a later sample arrived). After it, `c_hat` moves toward
each `window`'s minimum of `a - tau` by at most `drift_rate * window` per window: two quartz
clocks drift apart by well under 1e-4 s/s, and a stamp's interval is then off by at most
`drift_rate * window` once per window, far below a tick.
"""

from __future__ import annotations

TICK_WRAP = 2**32  # LowState_.tick is a uint32 of milliseconds (49.7 days)


class TickClock:
    """Robot tick [ms] -> local stamp [s] (module docstring)."""

    def __init__(self, calibration: float = 1.0, window: float = 1.0, drift_rate: float = 1e-4):
        for name, value in (("calibration", calibration), ("window", window),
                            ("drift_rate", drift_rate)):  # fmt: skip
            if not value >= 0.0:
                raise ValueError(f"TickClock {name} must be >= 0, got {value!r}")
        self.calibration = float(calibration)
        self.window = float(window)
        self.drift_rate = float(drift_rate)
        self.turns = 0
        self.last_tick: int | None = None
        self.first_tau: float | None = None
        self.offset: float | None = None  # c_hat [s]
        self.window_start = 0.0  # robot time [s]
        self.window_min = float("inf")

    def robot_time(self, tick_ms: int) -> float:
        """The unwrapped robot time [s] of `tick_ms` (a tick below the last by more than half
        the range is a wrap; a smaller step back is a reordered sample)."""
        tick = int(tick_ms) & (TICK_WRAP - 1)
        if self.last_tick is not None and self.last_tick - tick > TICK_WRAP // 2:
            self.turns += 1
        self.last_tick = tick
        return 1e-3 * (tick + self.turns * TICK_WRAP)

    def __call__(self, tick_ms: int, arrival: float) -> float:
        """The local stamp [s] of the sample `tick_ms` that arrived at `arrival` [s]."""
        tau = self.robot_time(tick_ms)
        delay = float(arrival) - tau
        if self.offset is None:
            self.first_tau, self.offset, self.window_start = tau, delay, tau
        elif tau - self.first_tau < self.calibration:
            self.offset = min(self.offset, delay)
            self.window_start = tau
        else:
            self.window_min = min(self.window_min, delay)
            if tau - self.window_start >= self.window:
                step = self.drift_rate * (tau - self.window_start)
                self.offset += min(max(self.window_min - self.offset, -step), step)
                self.window_start, self.window_min = tau, float("inf")
        return tau + self.offset
