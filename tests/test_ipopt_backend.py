"""The CasADi + IPOPT backend against the JAX problem it mirrors.

(a) one knot transition (substeps of the Moreau step, contact solve, actuator, manifold
    integration) equals `trajopt.problem.transition` to 1e-9;
(b) the total cost equals `fddp.compiled(problem).evaluate` to 1e-9 (relative);
(c) slow: on a small crouch, IPOPT and FDDP from the same start reach the same cost within 1 %.
"""

import dataclasses
import functools
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from contact import incline, steps
from trajopt import fddp, gaits, ipopt
from trajopt import problem as P
from trajopt.solve import initial_guess, solve

ROBOT = "solo12"  # the cheapest robot to build and evaluate


# `trajopt.problem.running_residuals` broadcasts `stance[:, None] * e_z` ((k, 1) with (3,)),
# which conftest's `jax_numpy_rank_promotion="raise"` rejects; allowed around the JAX cost.
def allow_rank_promotion(test):
    @functools.wraps(test)
    def wrapper(*args, **kwargs):
        with jax.numpy_rank_promotion("allow"):
            return test(*args, **kwargs)

    return wrapper


def _problem(contact="smooth", control="pd", terrain=None, **kwargs):
    pr = gaits.make_problem(
        ROBOT, "trot", 0.3, duration=0.06, dt=0.02, substeps=2, contact=contact, control=control
    )
    if terrain is not None:
        pr = pr.replace_data(params=pr.data.params.replace(terrain=terrain))
    return pr


def _states(pr: P.Problem):
    """Standing at rest, with random velocities, slightly airborne (inside the margin and the
    speculative band), one foot lifted (FL knee bent), and a twisting base."""
    rng = np.random.default_rng(3)
    q0 = np.asarray(pr.data.x0.q)
    nv = pr.model.nv
    out = []
    q, v = q0.copy(), np.zeros(nv)
    out.append((q, v))
    out.append((q0.copy(), 0.3 * rng.normal(size=nv)))
    q = q0.copy()
    q[2] += 0.01
    out.append((q, 0.2 * rng.normal(size=nv)))
    q = q0.copy()
    q[8] += 0.3
    q[9] -= 0.6  # FL foot 8 cm up, the others on the ground
    out.append((q, 0.1 * rng.normal(size=nv)))
    q = q0.copy()
    q[3:7] = np.array([0.02, -0.03, 0.1, 1.0]) / np.linalg.norm([0.02, -0.03, 0.1, 1.0])
    v = 0.1 * rng.normal(size=nv)
    v[3:6] = [0.5, -0.4, 2.0]
    out.append((q, v))
    return out


def _controls(pr: P.Problem, rng):
    u_prev = np.asarray(pr.data.x0.u_prev)
    if pr.control == "pd":
        return u_prev + 0.2 * rng.normal(size=pr.nu)
    return 0.5 * rng.normal(size=pr.nu)


@functools.cache
def _jax_transition(contact, control):
    """Jitted `transition(data, x, u)`, compiled once per structure (data is traced)."""
    pr = _problem(contact, control)
    return jax.jit(lambda data, x, u: P.transition(pr, data, x, u))


@pytest.mark.parametrize(
    "contact,control,terrain",
    [
        ("hard", "pd", None),
        ("smooth", "pd", None),
        ("smooth", "torque", None),
        ("hard", "pd", "incline"),
    ],
)
def test_casadi_transition_matches_jax(contact, control, terrain):
    terrain = incline(0.1, friction=0.6) if terrain == "incline" else None
    pr = _problem(contact, control, terrain)
    knot = ipopt.knot_function(pr)
    rng = np.random.default_rng(7)
    ref = ipopt.reference_vector(pr, 0)
    u_prev = np.asarray(pr.data.x0.u_prev)
    transition = _jax_transition(contact, control)
    touching = 0
    for q, v in _states(pr):
        u = _controls(pr, rng)
        x = P.KnotState(jnp.asarray(q), jnp.asarray(v), jnp.asarray(u_prev))
        nxt, forces, taus = transition(pr.data, x, jnp.asarray(u))
        x_next, _, f_ca, tau_ca = knot(np.concatenate([q, v, u_prev]), u, ref)
        expected = ipopt.flatten(jax.tree_util.tree_map(lambda a: a[None], nxt))[0]
        np.testing.assert_allclose(np.asarray(x_next).ravel(), expected, rtol=0, atol=1e-9)
        scale = 1.0 + np.max(np.abs(forces))
        np.testing.assert_allclose(np.asarray(f_ca), forces, rtol=0, atol=1e-9 * scale)
        np.testing.assert_allclose(np.asarray(tau_ca).ravel(), taus, rtol=0, atol=1e-9)
        touching += int(np.any(np.abs(np.asarray(forces)) > 1e-3))
    assert touching >= 3  # the contact solve is exercised, not only free flight


@allow_rank_promotion
def test_casadi_cost_matches_jax():
    pr = _problem("smooth")
    # distinct weights per term, so a wrong term cannot hide behind another
    pr = pr.replace_data(
        weights={k: jnp.asarray(1.0 + 0.37 * i) for i, k in enumerate(P.COST_TERMS)}
    )
    fn = fddp.compiled(pr)
    xs, us = initial_guess(pr)
    rng = np.random.default_rng(11)
    us = us + 0.1 * rng.normal(size=us.shape)
    T = pr.horizon
    q = xs.q.at[:, 7:].add(0.1 * rng.normal(size=(T + 1, pr.nu)))
    q = q.at[:, 2].add(0.02 * rng.normal(size=T + 1))  # some feet in the air, some in contact
    q = q.at[2, 9].set(10.5)  # beyond the joint limit: the joint_limits term is non-zero
    v = xs.v + 0.2 * rng.normal(size=xs.v.shape)
    perturbed = P.KnotState(q, v, xs.u_prev + 0.1 * rng.normal(size=xs.u_prev.shape))
    for trajectory in (xs, perturbed):
        expected = float(fn.evaluate(pr.data, trajectory, us)[0])
        got = ipopt.total_cost(pr, trajectory, us)
        assert abs(got - expected) <= 1e-9 * abs(expected), (got, expected)


def test_unsupported_inputs_raise():
    with pytest.raises(NotImplementedError, match="penalty"):
        ipopt.knot_function(_problem("penalty"))
    with pytest.raises(NotImplementedError, match="plane terrains"):
        ipopt.knot_function(_problem("smooth", terrain=steps(0.05, 0.3, 0.5)))


@pytest.mark.slow
@pytest.mark.xfail(
    reason="open (issue 4): FDDP stalls on a non-smooth cost. Measured 2026-11-30: FDDP stops "
    "at 1.5813 (line search fails at mu 1e7); IPOPT started from that point descends to 1.5688 "
    "(200 it). On friction 2.0 ground IPOPT converges (25 it) at 1.5530, FDDP stalls at 1.5820 "
    "(1.9 %); there, central differences of the cost along -gradient rise on both sides for "
    "steps 1e-7..1e-1 (a kink), and with 40 sweeps the cost jumps by 0.03 for 1e-6 changes of "
    "the controls: the fixed-sweep contact solve is rough where the stance is loaded",
    strict=False,
)
@allow_rank_promotion
def test_ipopt_and_fddp_reach_the_same_crouch_cost():
    """Stand-to-crouch (base 5 cm lower): FDDP and IPOPT from the rollout of the standing
    targets. Measured (before the torque_limits term and the activation cut-off change):
    FDDP 1.4760213 (10 it), IPOPT 1.4760204 (42 it); after: FDDP 1.4920 (92 it), IPOPT 1.4790
    (9 it, 12 s), 0.9 % apart (FDDP stops at a slightly worse point)."""
    pr = gaits.make_problem(ROBOT, "stand", 0.0, duration=0.2, dt=0.02, substeps=1)
    ref = pr.data.reference
    pr = pr.replace_data(reference=dataclasses.replace(ref, base_height=ref.base_height - 0.05))
    start = time.perf_counter()
    traj_fddp = solve(pr, solver="fddp", max_iterations=100, verbose=False)
    time_fddp = time.perf_counter() - start
    _, us = initial_guess(pr)
    start = time.perf_counter()
    traj_ipopt = ipopt.solve_ipopt(pr, None, us, max_iterations=150, verbose=False)
    time_ipopt = time.perf_counter() - start
    print(
        f"FDDP cost {traj_fddp.cost:.8g} ({traj_fddp.iterations} it, {time_fddp:.1f} s), "
        f"IPOPT cost {traj_ipopt.cost:.8g} ({traj_ipopt.iterations} it, {time_ipopt:.1f} s, "
        f"{traj_ipopt.meta['ipopt_status']})"
    )
    assert traj_fddp.status == "converged"
    assert traj_ipopt.status == "converged", traj_ipopt.meta["ipopt_status"]
    assert traj_ipopt.meta["defects"] < 1e-4
    assert abs(traj_ipopt.cost - traj_fddp.cost) <= 0.01 * traj_fddp.cost
    assert abs(traj_ipopt.meta["ipopt_cost"] - traj_ipopt.cost) <= 1e-6 * traj_ipopt.cost
