"""Rollouts: `lax.scan` over `step`, open loop (a control sequence) or closed loop (a controller).

Both return the final state and the stacked trajectory `(states, infos)` with a leading time
axis; they are differentiable end to end (reverse mode stores one step's residuals per step).
"""

from __future__ import annotations

import jax

from dynamics.configuration import State
from dynamics.model import Model

from .params import StepParams
from .step import step


def rollout(model: Model, params: StepParams, state: State, controls, **step_options):
    """Apply `controls (T, nu)` torques; returns `(final_state, (states, infos))`, states after
    each step (T entries). `step_options`: the static options of `step` (`contact`,
    `num_sweeps`, `method`, `derivatives`, `rigid_body_derivatives`)."""

    def body(s, tau):
        s_next, info = step(model, params, s, tau, **step_options)
        return s_next, (s_next, info)

    return jax.lax.scan(body, state, controls)


def simulate(
    model: Model, params: StepParams, state: State, controller, num_steps: int, **step_options
):
    """Closed loop: `tau = controller(state)` each step (a pure JAX function), `num_steps` steps.

    Returns `(final_state, (states, infos))` like `rollout`.
    """

    def body(s, _):
        s_next, info = step(model, params, s, controller(s), **step_options)
        return s_next, (s_next, info)

    return jax.lax.scan(body, state, None, length=num_steps)
