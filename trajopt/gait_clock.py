"""The gait clock: the one definition of the gait's phase that a policy observes.

    clock = gait_clock(t, period)          # (..., 3) for t (...) [s], NumPy
    clock = gait_clock(t, period, xp=jnp)  # the same in traced JAX code (the environment)

    phi   = (t / period) mod 1                                   in [0, 1)
    clock = [ sin(2 pi phi), cos(2 pi phi), 1 / period [1/s] ]

`t` [s] is the time since the gait started: a gait-library problem's first knot
(`trajopt.gaits.make_problem`, `gait_reference(start_time=0)`), the MPC's reset
(`controllers.mpc.MPC`, whose cycle at `t` builds its references from `start_time = t`), the
training environment's reset (`EnvState.t * CONTROL_DT`), the deployment controller's reset
(`PolicyController`: measurement timestamps minus the reset's).

`phi` is the phase of the gait cycle before any gait's own shifts: foot i of a
`trajopt.gaits.Gait` has the phase `(phi - lead_in - offset_i + s0) mod 1` in
`trajopt.gaits.stance_pattern` at the same `t` and period (`s0 = 1 - duty` for a gait that
starts in stance, else 0) and swings while it is below `1 - duty`, from `t = lead_in * period`
on. The lead-in is not in `phi`, so the clock is one time base for every gait (a lead-in only
delays the pattern's start by a constant number of periods).

The phase is observed as a point on the unit circle, continuous across the wrap from 1 to 0,
and the frequency tells a policy how fast it turns. `learning.numpy_policy_runner`
holds a NumPy-only copy (the exported runner imports nothing of this project); a test holds
the two equal to 1e-12.

NumPy only at import (the deployment adapter imports this module without the solver stack).
"""

from __future__ import annotations

import numpy as np

CLOCK_SIZE = 3  # entries of the clock in an observation


def check_gait_period(period, name: str = "period") -> float:
    """`period` [s] as a float; raises ValueError naming `name` unless it is finite and > 0."""
    try:
        value = float(period)
    except (TypeError, ValueError):
        value = float("nan")
    if not (np.isfinite(value) and value > 0.0):
        raise ValueError(f"{name} must be a finite number of seconds > 0, got {period!r}")
    return value


def gait_phase(t, period: float, xp=np):
    """The gait's cycle phase `phi = (t / period) mod 1` in [0, 1) at time `t` [s] (any shape)
    since the gait started (module docstring). `xp`: the array module, `numpy` or
    `jax.numpy` (traced code). Raises ValueError unless `period` [s] is finite and > 0."""
    period = check_gait_period(period)
    return xp.mod(xp.asarray(t) / period, 1.0)


def gait_clock(t, period: float, xp=np):
    """The clock `(..., 3)` for `t (...)` [s]: `[sin(2 pi phi), cos(2 pi phi), 1 / period]`
    with `phi = gait_phase(t, period)` (module docstring); `(3,)` for a scalar `t`.

    The `mod` is exact and keeps the sine's argument in [0, 2 pi), so a float32 clock (the
    float32 environment's) loses no more than its `t / period` does. Raises ValueError
    unless `period` [s] is finite and > 0."""
    period = check_gait_period(period)
    angle = 2.0 * np.pi * gait_phase(t, period, xp)
    return xp.stack([xp.sin(angle), xp.cos(angle), xp.full_like(angle, 1.0 / period)], axis=-1)
