"""The compiled FDDP iteration (issue 15, item 3) against independent references.

- the `lax.scan` Riccati recursion (`riccati.backward`) equals a NumPy recursion written here
  (the solver's former backward pass) to 1e-10 on random data, and flags a `Q_uu` that is not
  positive definite where NumPy's Cholesky refuses it;
- all knots linearised in one call equal the per-knot jitted linearisation;
- the line search in one call accepts the same step as trying `ALPHAS` one by one on the host;
- the Riccati recursion in C (`compiled_riccati`, derivatives="compiled") equals the NumPy
  recursion on random data with the knot state's structure (zero rows and columns of `A`, the
  identity rows of `B`) and JAX's on a Go2 trot's linearisation, to 1e-10, and flags the same
  indefinite `Q_uu`.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from native import c_library
from trajopt.engine import compiled_riccati, fddp, knot_backends, riccati, shooting
from trajopt.gaits import make_problem
from trajopt.solver import initial_guess


def numpy_backward(A, B, r, Rx, Ru, rT, RT, defects, mu):
    """Riccati recursion in NumPy float64; `(k, K, dV1, dV2)` or None if a `Q_uu` is not PD."""
    T, nx, nu = B.shape
    k = np.zeros((T, nu))
    K = np.zeros((T, nu, nx))
    Vx, Vxx = RT.T @ rT, RT.T @ RT
    dV1 = dV2 = 0.0
    for t in range(T - 1, -1, -1):
        vx = Vx + Vxx @ defects[t + 1]
        Qx = Rx[t].T @ r[t] + A[t].T @ vx
        Qu = Ru[t].T @ r[t] + B[t].T @ vx
        Qxx = Rx[t].T @ Rx[t] + A[t].T @ Vxx @ A[t]
        Quu = Ru[t].T @ Ru[t] + B[t].T @ Vxx @ B[t] + mu * np.eye(nu)
        Qux = Ru[t].T @ Rx[t] + B[t].T @ Vxx @ A[t]
        try:
            np.linalg.cholesky(Quu)
        except np.linalg.LinAlgError:
            return None
        k[t] = -np.linalg.solve(Quu, Qu)
        K[t] = -np.linalg.solve(Quu, Qux)
        dV1 += k[t] @ Qu
        dV2 += k[t] @ Quu @ k[t]
        Vx = Qx + K[t].T @ Quu @ k[t] + K[t].T @ Qu + Qux.T @ k[t]
        Vxx = Qxx + K[t].T @ Quu @ K[t] + K[t].T @ Qux + Qux.T @ K[t]
        Vxx = 0.5 * (Vxx + Vxx.T)
    return k, K, dV1, dV2


def random_linearisation(rng, T=7, nx=6, nu=3, nr=9, nr_T=5):
    A = np.eye(nx) + 0.1 * rng.normal(size=(T, nx, nx))
    B = rng.normal(size=(T, nx, nu))
    r = rng.normal(size=(T, nr))
    Rx = rng.normal(size=(T, nr, nx))
    Ru = rng.normal(size=(T, nr, nu))
    rT, RT = rng.normal(size=nr_T), rng.normal(size=(nr_T, nx))
    defects = 0.1 * rng.normal(size=(T + 1, nx))
    return (A, B, r, Rx, Ru, rT, RT), defects


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_compiled_backward_pass_equals_the_numpy_recursion(seed):
    lin, defects = random_linearisation(np.random.default_rng(seed))
    for mu in (0.0, 1e-6, 1.0):
        k, K, dV1, dV2, ok = jax.jit(riccati.backward)(lin, defects, mu)
        k_ref, K_ref, dV1_ref, dV2_ref = numpy_backward(*lin, defects, mu)
        assert bool(ok)
        scale = max(1.0, np.abs(K_ref).max())
        np.testing.assert_allclose(np.asarray(k), k_ref, rtol=0, atol=1e-10 * scale)
        np.testing.assert_allclose(np.asarray(K), K_ref, rtol=0, atol=1e-10 * scale)
        assert float(dV1) == pytest.approx(dV1_ref, rel=1e-10)
        assert float(dV2) == pytest.approx(dV2_ref, rel=1e-10)


def test_compiled_backward_pass_flags_an_indefinite_q_uu():
    rng = np.random.default_rng(3)
    lin, defects = random_linearisation(rng)
    A, B, r, Rx, Ru, rT, RT = lin
    Ru = 1e-3 * Ru  # nearly no control cost: -mu makes Q_uu indefinite at some knot
    lin = (A, B, r, Rx, Ru, rT, np.zeros_like(RT))
    mu = -1.0
    assert numpy_backward(*lin, defects, mu) is None
    *_, ok = jax.jit(riccati.backward)(lin, defects, mu)
    assert not bool(ok)


def structured_linearisation(rng, T=6, nq=5, nu=3, nr=11, nr_T=4):
    """Random data shaped like a knot state `(dq, dv, u_prev)`: `A`'s `u_prev` rows and
    columns zero (the next state does not read it), `B`'s `u_prev` rows the identity, sparse
    residual Jacobians (every Gauss-Newton product's zero-skipping branch runs)."""
    nx = 2 * nq + nu
    (A, B, r, Rx, Ru, rT, RT), defects = random_linearisation(rng, T, nx, nu, nr, nr_T)
    A[:, 2 * nq :, :] = 0.0
    A[:, :, 2 * nq :] = 0.0
    B[:, 2 * nq :, :] = np.eye(nu)
    Rx = Rx * (rng.random(Rx.shape) < 0.3)
    Ru = Ru * (rng.random(Ru.shape) < 0.3)
    return (A, B, r, Rx, Ru, rT, RT), defects


needs_compiler = pytest.mark.skipif(
    not c_library.compiler_available(),
    reason=f"no C compiler ({c_library.compiler()!r}) for the Riccati pass in C",
)


@needs_compiler
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_riccati_pass_in_c_equals_the_numpy_recursion(seed):
    rng = np.random.default_rng(seed)
    for lin, defects in (random_linearisation(rng), structured_linearisation(rng)):
        model = compiled_riccati.gauss_newton(lin)
        A, B, r, Rx, Ru, *_ = lin
        np.testing.assert_allclose(model.l_xx, np.swapaxes(Rx, 1, 2) @ Rx, rtol=0, atol=1e-12)
        np.testing.assert_allclose(model.l_ux, np.swapaxes(Ru, 1, 2) @ Rx, rtol=0, atol=1e-12)
        for mu in (0.0, 1e-6, 1.0):
            k, K, dV1, dV2, ok = compiled_riccati.backward(model, defects, mu)
            k_ref, K_ref, dV1_ref, dV2_ref = numpy_backward(*lin, defects, mu)
            assert ok
            scale = max(1.0, np.abs(K_ref).max())
            np.testing.assert_allclose(k, k_ref, rtol=0, atol=1e-10 * scale)
            np.testing.assert_allclose(K, K_ref, rtol=0, atol=1e-10 * scale)
            assert dV1 == pytest.approx(dV1_ref, rel=1e-10)
            assert dV2 == pytest.approx(dV2_ref, rel=1e-10)


@needs_compiler
def test_the_riccati_pass_in_c_flags_an_indefinite_q_uu_and_bad_shapes():
    rng = np.random.default_rng(3)
    (A, B, r, Rx, Ru, rT, RT), defects = random_linearisation(rng)
    lin = (A, B, r, Rx, 1e-3 * Ru, rT, np.zeros_like(RT))
    assert numpy_backward(*lin, defects, -1.0) is None
    assert not compiled_riccati.backward(compiled_riccati.gauss_newton(lin), defects, -1.0)[4]
    model = compiled_riccati.gauss_newton(lin)
    with pytest.raises(ValueError, match=r"defects must be \(8, 6\)"):
        compiled_riccati.backward(model, defects[1:], 1e-6)
    with pytest.raises(ValueError, match="inconsistent linearisation shapes"):
        compiled_riccati.gauss_newton((A, B[:, :, :2], r, Rx, Ru, rT, RT))


@needs_compiler
def test_the_riccati_pass_in_c_equals_jaxs_on_a_go2_trot():
    """The Go2 trot of the MPC's kind (smooth contact, 10 knots), linearised by the generated
    code part-way through a solve: gains and expected change of the C pass against the
    `lax.scan` one, with defects, at the solver's smallest and a large `mu`."""
    problem = make_problem("go2", "trot", 0.5, duration=0.2, dt=0.02, substeps=2,
                           contact="smooth", derivatives="compiled")  # fmt: skip
    fn = knot_backends.for_problem(problem)
    assert fn.backward is compiled_riccati.backward  # what the solver calls for this problem
    _, us = initial_guess(problem)
    solved = fddp.solve_fddp(problem, None, us, max_iterations=2, verbose=False)
    xs, us = solved.xs, solved.us
    lin = fn.linearize_all(problem.data, xs, us)
    defects = 1e-3 * np.random.default_rng(4).normal(size=(problem.horizon + 1, problem.nx))
    model = fn.gauss_newton(lin)
    for mu in (1e-9, 10.0):
        k, K, dV1, dV2, ok = fn.backward(model, defects, mu)
        k_j, K_j, dV1_j, dV2_j, ok_j = jax.device_get(riccati.RICCATI(lin, defects, mu))
        assert ok and bool(ok_j)
        np.testing.assert_allclose(k, k_j, rtol=0, atol=1e-10 * max(1.0, np.abs(k_j).max()))
        np.testing.assert_allclose(K, K_j, rtol=0, atol=1e-10 * max(1.0, np.abs(K_j).max()))
        assert dV1 == pytest.approx(float(dV1_j), rel=1e-10)
        assert dV2 == pytest.approx(float(dV2_j), rel=1e-10)


@pytest.fixture(scope="module")
def tiny():
    problem = make_problem("solo12", "trot", 0.3, duration=0.06, dt=0.02, substeps=2)
    fn = knot_backends.for_problem(problem)
    _, us = initial_guess(problem, guess="standing")
    xs, _, _ = fn.rollout(problem.data, us)
    return problem, fn, xs, us


@pytest.mark.slow  # ~80-130 s of compilation (fast suite under 15 min)
def test_all_knots_in_one_call_equal_the_per_knot_linearisation(tiny):
    problem, fn, xs, us = tiny
    lin = jax.device_get(fn.linearize_all(problem.data, xs, us))
    for t in range(problem.horizon):
        knot = fn.linearize(problem.data, shooting.index_knots(xs, t), us[t], t)
        for a, b in zip(lin[:5], knot):
            np.testing.assert_allclose(a[t], np.asarray(b), rtol=1e-12, atol=1e-12)
    terminal = fn.linearize_terminal(problem.data, shooting.index_knots(xs, problem.horizon))
    for a, b in zip(lin[5:], terminal):
        np.testing.assert_allclose(a, np.asarray(b), rtol=1e-12, atol=1e-12)


@pytest.mark.slow  # ~80-130 s of compilation (fast suite under 15 min)
def test_line_search_in_one_call_accepts_the_first_step_the_host_loop_accepts(tiny):
    problem, fn, xs, us = tiny
    data = problem.data
    cost, _, defects, _, _ = fn.evaluate(data, xs, us)
    defects = np.asarray(defects)
    lin = fn.linearize_all(data, xs, us)
    k, K, *_ = riccati.RICCATI(lin, defects, 1e-6)
    for merit_old in (shooting.merit(cost, defects), float(cost) - 1e-3, -1.0):
        expected = -1
        for i, alpha in enumerate(shooting.ALPHAS):  # the former host loop, one call per step
            xs_t, us_t = fn.forward(data, xs, us, k, K, defects, alpha)
            c_t, _, d_t, _, _ = fn.evaluate(data, xs_t, us_t)
            if np.isfinite(float(c_t)) and shooting.merit(c_t, np.asarray(d_t)) < merit_old:
                expected = i
                break
        index, trials, (xs_t, us_t, c_t, *_) = fn.line_search(
            data, xs, us, k, K, defects, merit_old
        )
        assert int(index) == expected, merit_old
        assert int(trials) == (expected + 1 if expected >= 0 else len(shooting.ALPHAS))
        if expected >= 0:
            xs_ref, us_ref = fn.forward(data, xs, us, k, K, defects, shooting.ALPHAS[expected])
            np.testing.assert_allclose(np.asarray(us_t), np.asarray(us_ref), atol=1e-12)
            np.testing.assert_allclose(np.asarray(xs_t.q), np.asarray(xs_ref.q), atol=1e-12)


@pytest.mark.slow  # ~16 s of compilation; the one-call iteration's fast tests cover the evaluations
def test_evaluations_from_known_transitions_equal_the_simulating_evaluation(tiny):
    """`rollout_and_evaluate` and a forward pass's trial evaluated from its own transitions
    (`_evaluate_transitions`, what the line search does) equal `_evaluate`, which simulates
    every knot again: cost, terms, defects (an infeasible trial: alpha < 1 leaves them),
    forces and torques."""
    problem, fn, xs, us = tiny
    data = problem.data

    def close(ours, ref):
        for a, b in zip(jax.tree_util.tree_leaves(ours), jax.tree_util.tree_leaves(ref)):
            np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-12, atol=1e-12)

    xs_r, *evaluated = fn.rollout_and_evaluate(data, us)
    close(xs_r, xs)
    close(evaluated, fn.evaluate(data, xs, us))
    rng = np.random.default_rng(0)
    k = jnp.asarray(rng.normal(scale=0.05, size=us.shape))
    K = jnp.zeros((problem.horizon, problem.nu, problem.nx))
    defects = jnp.asarray(rng.normal(scale=1e-3, size=(problem.horizon + 1, problem.nx)))

    @jax.jit
    def both(alpha):
        xs_t, us_t, *transitions = shooting.forward_with_transitions(
            problem, data, xs, us, k, K, defects, alpha
        )
        return (shooting.evaluate_transitions(problem, data, xs_t, us_t, *transitions),
                shooting.evaluate(problem, data, xs_t, us_t))  # fmt: skip

    ours, ref = both(0.5)
    close(ours, ref)
    assert float(np.max(np.abs(np.asarray(ref[2])))) > 1e-5  # the trial's defects are not zero


@pytest.mark.slow  # ~25 s of compilation; the fast suite keeps under 12 min
def test_two_threads_linearise_exactly_what_one_call_does(tiny):
    """`linearize_in_two_threads` (the horizon's halves at the same time; the tiny problem's 3
    knots are odd, so the second half repeats the last knot) equals `linearize_all` exactly,
    on its first call (both halves in the caller, compiling once) and on a threaded one."""
    problem, fn, xs, us = tiny
    reference = fn.linearize_all(problem.data, xs, us)
    for _ in range(2):
        lin = fn.linearize_in_two_threads(problem.data, xs, us)
        for name, a, b in zip(shooting.Linearization._fields, lin, reference):
            assert np.shape(a) == np.shape(b), name
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=name)
    assert fn.linearize_knots_ready


def test_linearize_threads_is_checked_before_any_work(tiny):
    problem, _, _, us = tiny
    for bad in (0, 3, 1.5):
        with pytest.raises(ValueError, match="linearize_threads must be 1 or 2"):
            fddp.solve_fddp(problem, None, us, linearize_threads=bad)


@pytest.mark.slow  # compiles the line search and the backward pass of the tiny problem
def test_solves_with_one_and_two_linearisation_threads_are_the_same(tiny):
    problem, _, _, us = tiny
    one = fddp.solve_fddp(problem, None, us, max_iterations=3, verbose=False)
    two = fddp.solve_fddp(problem, None, us, max_iterations=3, verbose=False, linearize_threads=2)
    assert one.iterations == two.iterations == 3
    assert one.cost == two.cost
    np.testing.assert_array_equal(np.asarray(one.us), np.asarray(two.us))
