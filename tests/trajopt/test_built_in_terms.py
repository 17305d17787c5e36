"""The built-in terms as `Term`s (`trajopt.built_in_terms`) against the values the fixed-term
implementation gave before them (`data/built_in_terms_before.npz`, recorded from it): costs,
gradients, linearisations, FDDP iterates, and the CasADi model's functions, to 1e-12."""

import dataclasses
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import trajopt
from contact.terrain import steps
from dynamics.casadi_functions import numpy_model
from trajopt import problem as P
from trajopt.engine import casadi_knots, casadi_model, shooting

BEFORE = Path(__file__).parent / "data" / "built_in_terms_before.npz"
TOL = 1e-12


@pytest.fixture(scope="module")
def before():
    return dict(np.load(BEFORE))


@pytest.fixture(scope="module")
def trot():
    # the recorded values are of the paper's fixed sweeps, which the CasADi model also runs
    return trajopt.make_problem("go2", "trot", 0.5, duration=0.16, dt=0.02, substeps=2,
                                derivatives="unrolled", contact_tolerance=None,
                                num_sweeps=10)  # fmt: skip


def close(a, b, tol=TOL):
    a, b = np.asarray(a, float), np.asarray(b, float)
    assert a.shape == b.shape
    assert np.max(np.abs(a - b), initial=0.0) <= tol * max(1.0, np.max(np.abs(b), initial=0.0))


def test_costs_are_the_fixed_terms(before, trot):
    us = jnp.asarray(before["us"])
    _, cost, terms, _, _, _ = shooting.rollout_and_evaluate(trot, trot.data, us)
    close(cost, before["cost"])
    assert set(terms) == {k[len("term_"):] for k in before if k.startswith("term_")}
    for name, value in terms.items():
        close(value, before["term_" + name])


@pytest.mark.slow  # the rollout's reverse-mode gradient and the horizon's linearisation, ~60 s
def test_gradient_and_linearisation_are_the_fixed_terms(before, trot):
    us = jnp.asarray(before["us"])
    xs = shooting.rollout_and_evaluate(trot, trot.data, us)[0]
    grad = jax.grad(lambda u: shooting.rollout_and_evaluate(trot, trot.data, u)[1])(us)
    close(grad, before["grad"])
    lin = shooting.linearize_horizon(trot, trot.data, xs, us)
    for name in ("r", "R_x", "R_u", "r_T", "R_T"):
        close(getattr(lin, name), before["lin_" + name])


@pytest.mark.slow  # an FDDP compilation, ~20 s
def test_fddp_iterates_are_the_fixed_terms(before, trot):
    traj = trajopt.solve(trot, max_iterations=3, verbose=False)
    close(traj.q, before["fddp_q"])
    close(traj.u, before["fddp_u"])


def test_residuals_on_stairs_are_the_fixed_terms(before, trot):
    terrain = steps(0.06, 0.22, 0.1, num_steps=3.0)
    pr = trot.replace_data(params=dataclasses.replace(trot.data.params, terrain=terrain))
    for i in range(3):
        x = P.KnotState(*(jnp.asarray(before[f"stairs_in_{n}_{i}"]) for n in ("q", "v", "up")))
        res = P.running_residuals(pr, pr.data, x, jnp.asarray(before["us"][i]),
                                  jnp.asarray(before[f"stairs_in_f_{i}"]),
                                  jnp.asarray(before[f"stairs_in_tau_{i}"]), None, i)  # fmt: skip
        for name in P.RUNNING_TERMS:
            close(res[name], before[f"stairs_res_{i}_{name}"])
        res = P.terminal_residuals(pr, pr.data, x)
        close(res["terminal_state"], before[f"stairs_term_{i}"])


def test_the_casadi_model_is_the_fixed_terms(before, trot):
    us = jnp.asarray(before["us"])
    T = trot.horizon
    xs, _, _, _, forces, taus = shooting.rollout_and_evaluate(trot, trot.data, us)
    m, plane = numpy_model(trot.model), casadi_model.plane_of(trot.data.params.terrain)
    flat = np.concatenate([np.asarray(xs.q), np.asarray(xs.v), np.asarray(xs.u_prev)], axis=1)
    refs = casadi_model.reference_rows(trot.data.reference)
    knot = casadi_model.knot_function(trot)
    costs = [float(knot(flat[t], before["us"][t], refs[t])[1]) for t in range(T)]
    close(costs, before["casadi_knot_cost"])
    names = casadi_knots.running_terms(trot)
    sqrt_w = np.sqrt([float(trot.data.weights[n]) for n in names])
    out = casadi_knots.costs_function(trot, m, plane)(
        x=flat[2], u=before["us"][2], forces=np.asarray(forces[2]).reshape(-1),
        taus=np.asarray(taus[2]), ref=refs[2], sqrt_w=sqrt_w,
    )  # fmt: skip
    for name, value in out.items():
        close(value, before["casadi_costs_" + name])
    w_T = np.sqrt(float(trot.data.weights["terminal_state"]))
    out = casadi_knots.terminal_function(trot, m, plane)(x=flat[T], ref=refs[T], sqrt_w=w_T)
    for name, value in out.items():
        close(value, before["casadi_terminal_" + name])
    close(casadi_model.total_cost(trot, xs, us), before["casadi_total"])
