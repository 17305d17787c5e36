"""Validity checks: parameters at construction, states at every step.

Parameters (`StepParams`, the terrain constructors) are checked where they are concrete:
`require(owner, name, value, condition)` raises `ValueError` naming the argument when a Python
number, NumPy array or concrete JAX array breaks the condition anywhere (every entry of a batch).
JAX tracers (values inside `jit`, `vmap`, `grad`) cannot raise and are passed through unchecked, as
is anything that is not an array (pytree placeholders).

States: `bad_state(model, state) -> () bool` is true when `q` or `v` holds a NaN or an
infinity, or the base quaternion `q[3:7]` is off the unit sphere by more than
`QUAT_NORM_TOLERANCE` (a zero quaternion included: it has no rotation, and `dynamics` does not
normalise before use). `contact.step` stores it as `StepInfo.bad_state` (the incoming state)
and `StepInfo.bad_result` (the state it returns); `first_bad_step(infos)` finds the first step
of a `rollout`/`simulate` where either is set.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

# |norm(quat) - 1| above which a base quaternion is not a rotation. Integration renormalises
# every step (error ~1e-16 in float64, ~1e-7 in float32), so only a corrupted state gets here.
QUAT_NORM_TOLERANCE = 1e-3

POSITIVE = ("> 0", lambda x: x > 0)
NONNEGATIVE = (">= 0", lambda x: x >= 0)


def concrete(value):
    """`value` as a NumPy array if it is concrete (number, NumPy or JAX array), else None."""
    if isinstance(value, jax.core.Tracer):
        return None
    if isinstance(value, (bool, int, float, np.ndarray, np.generic, jax.Array)):
        return np.asarray(value)
    return None


def require(owner: str, name: str, value, condition) -> None:
    """Raise `ValueError` ("owner: name must be > 0, got -0.001") if concrete `value` breaks
    `condition` (`POSITIVE`, `NONNEGATIVE`) anywhere; NaN breaks every condition. Tracers and
    non-arrays pass unchecked."""
    array = concrete(value)
    if array is None or array.dtype == object:
        return
    text, holds = condition
    if not np.all(holds(array)):
        shown = array.item() if array.size == 1 else array
        raise ValueError(f"{owner}: {name} must be {text}, got {shown}")


def bad_state(model, state):
    """`() bool`: `state.q`/`state.v` non-finite, or the base quaternion not of unit norm."""
    q, v = state.q, state.v
    bad = ~(jnp.all(jnp.isfinite(q)) & jnp.all(jnp.isfinite(v)))
    if model.has_free_flyer:
        norm = jnp.linalg.norm(q[3:7])
        bad = bad | ~(jnp.abs(norm - 1.0) <= QUAT_NORM_TOLERANCE)
    return bad


def first_bad_step(infos):
    """Index of the first step of a `rollout`/`simulate` (stacked `StepInfo`, leading time
    axis) whose incoming state was bad or whose result is (`bad_state | bad_result`), or None
    if every step was fine. With `states` the rollout's states after each step, the first bad
    state is `states[i]` if `infos.bad_result[i]` and `infos.bad_state[i]` is false, else the
    state entering step `i` (`states[i - 1]`, or the initial state for `i = 0`). Batched
    rollouts: call it per rollout (e.g. on `jax.tree.map(lambda x: x[b], infos)`)."""
    flags = np.asarray(infos.bad_state) | np.asarray(infos.bad_result)
    if flags.ndim != 1:
        raise ValueError(f"expected flags of one rollout (T,), got shape {flags.shape}")
    hits = np.flatnonzero(flags)
    return int(hits[0]) if hits.size else None
