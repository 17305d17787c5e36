"""One FDDP iteration from an iterate, on any knot backend (`trajopt.engine.fddp` runs the loop).

At `(xs, us)` with cost `cost` and defects `f (T + 1, nx)`:

1. linearise every knot and form the Gauss-Newton model (`fn.gauss_newton`, the same for
   every `mu`);
2. for `mu`, `10 mu`, ... below `MU_MAX`: the Riccati pass (`fn.backward`; a `Q_uu` that is not
   positive definite raises `mu`) and the line search (`fn.line_search`: the step lengths
   `shooting.ALPHAS` in order, the first finite trial whose merit `cost + nu sum_t |f_t|_1` is
   below the iterate's accepted); a search with no step accepted raises `mu`.

Before each Riccati pass a `deadline` past (`time.perf_counter()` seconds) ends the iteration
("out_of_time"). `iterate` is that iteration in Python over the backend's calls;
`trajopt.engine.compiled_iteration` is the same iteration in one C call, for
`derivatives="compiled"`.
"""

from __future__ import annotations

import time
from typing import NamedTuple

import jax
import numpy as np

from .shooting import ALPHAS, merit

MU_MAX = 1e10  # the regularisation at which an iteration gives up its line search
# Crocoddyl's schedule for the regularisation an iteration hands to the next (`next_mu`)
MU_MIN, MU_CARRIED_MAX = 1e-9, 1e9
STEP_LOWERING_MU = 0.5  # an accepted step at least this long divides mu by 10
STEP_RAISING_MU = 0.01  # an accepted step at most this long multiplies it by 10
ITERATION_PARTS = ("linearize", "backward", "line_search")  # `Iteration.seconds`' keys
LINEARIZE_PARTS = ("generated_code", "elimination")  # `Iteration.linearize_parts`' keys


def next_mu(mu, alpha, xp=np):
    """The regularisation the next iteration starts from, after a step of length `alpha` was
    accepted at `mu` (Crocoddyl's schedule): `mu / 10` after a long step (`alpha >=
    STEP_LOWERING_MU`: the model is trusted), `10 mu` after a short one (`alpha <=
    STEP_RAISING_MU`: the model over-predicts, as at a kink of the contact model), else `mu`;
    clipped to `[MU_MIN, MU_CARRIED_MAX]`. `xp`: `numpy` or `jax.numpy` (elementwise, for a
    batch of problems)."""
    factor = xp.where(alpha >= STEP_LOWERING_MU, 0.1, xp.where(alpha <= STEP_RAISING_MU, 10.0, 1.0))
    return xp.clip(mu * factor, MU_MIN, MU_CARRIED_MAX)


class Iteration(NamedTuple):
    """What one iteration did: `status` "accepted", "no_step" (no step at any `mu` below
    `MU_MAX`) or "out_of_time"; the accepted step's `alpha` and `trial = (xs, us, cost, terms,
    defects, forces, taus)` (host values; None otherwise); the last Riccati pass's `k (T, nu)`,
    `K (T, nu, nx)`, `dV1`, `dV2` and `k_max = max |k|`; `mu`, where the search stopped (the
    accepted step's, or past the last one tried); `first = (|dV1|, max |k|, mu, dV2)` of the
    first positive definite pass (None if none); `trials`, `(mu, merit change)` of each
    rejected search's smallest step; the linearisation point's largest contact residual [m/s];
    the seconds spent per part (`ITERATION_PARTS`); how many Riccati passes and forward passes
    (line-search trials) ran; and, from the one-call iteration, `linearize_parts`: the seconds
    of the linearisation spent in the generated code and in the substeps' elimination
    (`LINEARIZE_PARTS`; None from `iterate`); `knot_residuals (T,)`, each knot's largest
    contact residual [m/s] at the linearisation point."""

    status: str
    alpha: float | None
    trial: tuple | None
    k: np.ndarray | None
    K: np.ndarray | None
    dV1: float
    dV2: float
    k_max: float
    mu: float
    first: tuple | None
    trials: list
    contact_residual: float
    seconds: dict
    passes: int
    rollouts: int
    linearize_parts: dict | None = None
    knot_residuals: np.ndarray | None = None


def iterate(fn, linearize, data, xs, us, cost: float, defects, mu: float,
            deadline: float = float("inf")) -> Iteration:  # fmt: skip
    """One iteration (module docstring) by the knot backend `fn`'s calls, with `linearize`
    (`fn.linearize_all`, or its two-thread form) for the linearisation."""
    seconds = dict.fromkeys(ITERATION_PARTS, 0.0)
    tic = time.perf_counter()
    lin = linearize(data, xs, us)
    knot_residuals = np.asarray(lin.contact_residual)  # waits for `lin`
    contact_residual = float(np.max(knot_residuals))
    seconds["linearize"] += time.perf_counter() - tic
    tic = time.perf_counter()
    model = fn.gauss_newton(lin)
    seconds["backward"] += time.perf_counter() - tic
    merit_old = merit(cost, defects)
    first, trials = None, []
    k = K = None
    dV1 = dV2 = k_max = 0.0
    status = "no_step"
    passes = rollouts = 0
    while mu < MU_MAX:
        if time.perf_counter() > deadline:
            status = "out_of_time"
            break
        tic = time.perf_counter()
        k, K, dV1, dV2, ok = fn.backward(model, defects, mu)
        seconds["backward"] += time.perf_counter() - tic
        passes += 1
        if not ok:
            mu *= 10.0
            continue
        k_max = float(np.max(np.abs(k))) if np.size(k) else 0.0
        if first is None:
            first = (abs(dV1), k_max, mu, dV2)
        tic = time.perf_counter()
        index, tried, trial = fn.line_search(data, xs, us, k, K, defects, merit_old)
        index, rollouts = int(index), rollouts + int(tried)
        if index >= 0:
            xs_t, us_t, cost_t, terms, d, forces, taus = trial
            cost_t, terms, d = jax.device_get((cost_t, terms, d))
            seconds["line_search"] += time.perf_counter() - tic
            return Iteration(
                "accepted", ALPHAS[index], (xs_t, us_t, float(cost_t), terms, d, forces, taus),
                k, K, float(dV1), float(dV2), k_max, mu, first, trials, contact_residual,
                seconds, passes, rollouts, knot_residuals=knot_residuals,
            )  # fmt: skip
        trials.append((mu, merit(*jax.device_get((trial[2], trial[4]))) - merit_old))
        mu *= 10.0
        seconds["line_search"] += time.perf_counter() - tic
    return Iteration(status, None, None, k, K, float(dV1), float(dV2), k_max, mu, first, trials,
                     contact_residual, seconds, passes, rollouts,
                     knot_residuals=knot_residuals)  # fmt: skip
