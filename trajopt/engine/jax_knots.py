"""The JAX knot backend: `trajopt.engine.shooting`'s knot model jitted for one problem structure.

A knot backend is what a shooting solver calls; `trajopt.engine.compiled_knots.CompiledKnots` has
the same calls. Each takes the problem's data as an argument (never a constant), so problems of one
structure (`shooting.structure_key`) share one backend:

    rollout(data, us) -> (xs, forces, taus)
    evaluate(data, xs, us) -> (cost, terms, defects, forces, taus)
    rollout_and_evaluate(data, us) -> (xs, cost, terms, defects, forces, taus)
    evaluate_transitions(data, xs, us, nexts, forces, taus) -> (cost, terms, defects, ...)
    linearize_all(data, xs, us) -> shooting.Linearization
    line_search(data, xs, us, k, K, defects, merit_old) -> (index, trials, trial)
    gauss_newton(lin) -> the Riccati pass's model of the linearisation (here `lin` itself)
    backward(model, defects, mu) -> (k (T, nu) NumPy, K (T, nu, nx), dV1, dV2, ok) as floats
    linearize(data, x, u, t), linearize_terminal(data, x), forward(data, xs, us, k, K, f, a)

An FDDP iteration is `linearize_all` (every knot, one call), the Riccati pass and `line_search`
(all step lengths in one call, stopping at the first accepted): no per-knot Python. The
functions of the iteration and the rollout are `program_cache.DiskCachedFunction`s: their
traced programs are saved on disk, keyed by the structure, so a later process with the same
structure does not trace them again (`DIFFLOCO_CACHE_DIR`, see `trajopt.engine.program_cache`),
except for a problem with its own terms (`trajopt.terms`), whose functions' code no key can see.
`linearize`, `linearize_terminal` and `forward` (the pieces, for tests and benchmarks) compile
when first called.
"""

from __future__ import annotations

import concurrent.futures
import functools

import jax
import jax.numpy as jnp
import numpy as np

from .. import problem as P
from . import shooting
from .program_cache import DiskCachedFunction
from .riccati import RICCATI


class JaxKnots:
    """The jitted knot functions of one problem structure (module docstring for the calls), a
    `KnotModel`."""

    def __init__(self, problem: P.Problem):
        self.problem = problem
        self.terms_in_jax: dict = {}  # every term runs in JAX: none beside other code
        self.jax_terms_seconds = 0.0
        self._value_and_gradient = None  # `cost_value_and_gradient`, jitted on first use
        context = repr(shooting.structure_key(problem))

        def disk(name, fun):
            if problem.terms:  # a user's functions: the key cannot see their code
                return jax.jit(fun)
            return DiskCachedFunction(f"fddp.{name}", jax.jit(fun), context)

        def bound(fun):
            return functools.partial(fun, problem)

        self.rollout = disk("rollout", bound(shooting.rollout))
        self.evaluate = disk("evaluate", bound(shooting.evaluate))
        self.rollout_and_evaluate = disk(
            "rollout_and_evaluate", bound(shooting.rollout_and_evaluate)
        )
        self.evaluate_transitions = disk(
            "evaluate_transitions", bound(shooting.evaluate_transitions)
        )
        self.linearize = jax.jit(bound(shooting.linearize_knot))
        self.linearize_terminal = jax.jit(bound(shooting.linearize_terminal))
        self.forward = jax.jit(bound(shooting.forward))
        self.linearize_all = disk("linearize_all", bound(shooting.linearize_horizon))
        self.linearize_knots = disk("linearize_knots", bound(shooting.linearize_knots))
        self.linearize_knots_ready = False  # compiled (`linearize_in_two_threads`)
        self.line_search = disk("line_search", bound(shooting.line_search_trials))

    def linearizer(self, threads: int):
        """`linearize_all` (1 thread), or `linearize_in_two_threads` (2)."""
        return self.linearize_in_two_threads if threads == 2 else self.linearize_all

    @staticmethod
    def iterate_in_one_call(data, xs, us, cost, defects, mu, deadline=float("inf")):
        """None: an iteration in JAX runs over the calls (`fddp_step.iterate`)."""
        return None

    def cost_value_and_gradient(self, data, us):
        """`(cost, d cost / d us)` of the single-shooting rollout of `us (T, nu)` (reverse mode,
        jitted on first use, one simulation of the horizon for both)."""
        if self._value_and_gradient is None:

            def total(data, us):
                return self.rollout_and_evaluate(data, us)[1]

            self._value_and_gradient = jax.jit(jax.value_and_grad(total, argnums=1))
        return self._value_and_gradient(data, us)

    @staticmethod
    def gauss_newton(lin):
        """The Riccati pass's model of `lin`: `lin` itself (`trajopt.engine.riccati.backward` forms
        `R^T r` and `R^T R` inside its scan)."""
        return lin

    @staticmethod
    def backward(model, defects, mu: float):
        """`trajopt.engine.riccati.RICCATI` on `model`: `(k, K, dV1, dV2, ok)` with `k` on the host
        (NumPy), `K` on the device, the rest Python numbers (one transfer)."""
        k, K, dV1, dV2, ok = RICCATI(model, defects, mu)
        ok, dV1, dV2, k = jax.device_get((ok, dV1, dV2, k))
        return k, K, float(dV1), float(dV2), bool(ok)

    def linearize_in_two_threads(self, data, xs, us) -> shooting.Linearization:
        """`linearize_all` with the running knots split in two halves, linearised at the same
        time: the second half by a helper thread, the first half and the terminal knot by the
        caller. The same program per knot, so the same values as `linearize_all`.

        Why: a knot's linearisation is a long chain of small operations, which one call runs
        mostly on one core; a second call from a second thread uses another
        (`benchmarks/bench_linearize.py` measures both). The first call of a structure
        linearises both halves in the caller, so the program compiles once."""
        T = self.problem.horizon
        if T < 2:  # nothing to split
            return self.linearize_all(data, xs, us)
        half = (T + 1) // 2
        first = np.arange(half)
        second = np.minimum(np.arange(half, 2 * half), T - 1)  # T odd: the last knot twice
        if not self.linearize_knots_ready:
            parts = [self.linearize_knots(data, xs, us, first)]
            parts.append(self.linearize_knots(data, xs, us, second))
            self.linearize_knots_ready = True
        else:
            future = _linearize_pool().submit(
                lambda: jax.block_until_ready(self.linearize_knots(data, xs, us, second))
            )
            parts = [jax.block_until_ready(self.linearize_knots(data, xs, us, first))]
            parts.append(future.result())
        rT, RT = self.linearize_terminal(data, shooting.index_knots(xs, T))
        A, B, r, Rx, Ru, contact_residual = (
            jnp.concatenate([a, b[: T - half]]) for a, b in zip(*parts)
        )
        return shooting.Linearization(A, B, r, Rx, Ru, rT, RT, contact_residual)


@functools.cache
def _linearize_pool() -> concurrent.futures.ThreadPoolExecutor:
    """The helper thread of `linearize_in_two_threads` (one per process, made on first use)."""
    return concurrent.futures.ThreadPoolExecutor(
        max_workers=1, thread_name_prefix="diffloco-linearize"
    )
