"""The MPC plans a problem with a residual term of its own, and moves the term's target at run
time without recompiling (`MPC.set_target`)."""

import jax.numpy as jnp
import numpy as np
import pytest

import trajopt
from controllers.mpc import MPC
from dynamics.configuration import State
from trajopt.terms import Term

TARGET_Y = 0.03  # [m] where the plan's final base y should be


@pytest.mark.slow  # an MPC end to end, ~26 s; tests/trajopt/test_terms.py's FDDP test is fast
@pytest.mark.parametrize("derivatives", [
    "implicit",
    # the term in the generated C, its target an input: a new target regenerates nothing
    pytest.param("compiled", marks=pytest.mark.slow),
])  # fmt: skip
def test_the_mpc_optimises_a_term_and_moves_its_target_at_run_time(derivatives):
    traced = []

    def base_y(ctx):
        traced.append(1)  # runs when JAX traces
        return ctx.q[1:2] - ctx.target

    problem = trajopt.make_problem("go2", "trot", 0.5, duration=0.2, derivatives=derivatives)
    term = Term("reach_y", base_y, weight=2e4, target=[TARGET_Y], terminal=True)
    mpc = MPC(problem.with_terms(term), iterations=3, warmup_iterations=15)
    state = State(jnp.asarray(mpc.model.q_standing), jnp.zeros(mpc.model.nv))
    mpc.reset(state)
    assert abs(mpc.plan.q[-1, 1] - TARGET_Y) < 0.3 * TARGET_Y
    before = len(traced)
    mpc.set_target("reach_y", [-TARGET_Y])
    for _ in range(5):  # the same measured state: the plan turns to the new target
        mpc.update(state, 0.0)
    assert abs(mpc.plan.q[-1, 1] + TARGET_Y) < 0.3 * TARGET_Y
    assert len(traced) == before  # the same compiled functions (and generated C)
    with pytest.raises(ValueError, match="term 'reach_y': target must have shape"):
        mpc.set_target("reach_y", np.zeros(2))


def test_a_gait_switch_keeps_the_terms_weights():
    problem = trajopt.make_problem("go2", "trot", 0.5, duration=0.1, derivatives="implicit")
    term = Term("hold_y", lambda ctx: ctx.q[1:2], weight=7.0, terminal=True)
    mpc = MPC(problem.with_terms(term))
    mpc.set_gait("walk")
    assert float(mpc.problem.data.weights["hold_y"]) == 7.0
