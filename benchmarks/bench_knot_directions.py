"""The FDDP knot linearisation before and after the u_prev directions left the simulation:
CPU time of one knot's Jacobian, interleaved in one process, and the agreement.

    taskset -c 0 python benchmarks/bench_knot_directions.py --robot go2

`previous_rule` is the former rule (every tangent direction, `2 nv + 2 nu`, pushed through the
contact steps), kept here as the reference; `trajopt.engine.shooting.linearize_knot` pushes `2 nv
+ nu` and builds the `u_prev` block from the residuals alone. Prints the largest difference of every
output and the medians of `--repeats` interleaved calls (process CPU time), with the forward
transition of the same knot and the load average.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def previous_rule(problem, data, x, u, t):
    """`(A, B, r, R_x, R_u)` with all `nx + nu` directions through the transition."""
    import jax
    import jax.numpy as jnp

    from trajopt import problem as P

    nominal, _, _ = P.transition(problem, data, x, u)
    ref_t = P.reference_at(data.reference, t)

    def g(dx, du):
        xp, up = P.retract(problem, x, dx), u + du
        nxt, forces, taus = P.transition(problem, data, xp, up)
        residuals = P.running_residuals(problem, data, xp, up, forces, taus, ref_t)
        res = P.weighted(residuals, data.weights)
        return (P.local(problem, nominal, nxt), res), res

    dx0 = jnp.zeros(problem.nx, dtype=x.v.dtype)
    du0 = jnp.zeros(problem.nu, dtype=x.v.dtype)
    (j_next, j_res), r = jax.jacfwd(g, argnums=(0, 1), has_aux=True)(dx0, du0)
    return j_next[0], j_next[1], r, j_res[0], j_res[1]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--robot", default="go2")
    parser.add_argument("--repeats", type=int, default=30)
    args = parser.parse_args(argv)
    import jax
    import jax.numpy as jnp
    import numpy as np

    from trajopt import problem as P
    from trajopt.engine import knot_backends, shooting
    from trajopt.gaits import make_problem
    from trajopt.solver import initial_guess

    problem = make_problem(args.robot, "trot", 0.5, duration=0.5, dt=0.02, substeps=2)
    data = problem.data
    xs, us = initial_guess(problem, None, "auto")
    xs, _, _ = knot_backends.for_problem(problem).rollout(data, us)
    x, u = jax.tree_util.tree_map(lambda a: a[3], xs), us[3]
    calls = {
        "new": (jax.jit(functools.partial(shooting.linearize_knot, problem)), (data, x, u, 3)),
        "previous": (jax.jit(functools.partial(previous_rule, problem)), (data, x, u, 3)),
        "forward": (jax.jit(functools.partial(P.transition, problem)), (data, x, u)),
    }
    new, previous = (calls[k][0](*calls[k][1]) for k in ("new", "previous"))
    diff = max(float(jnp.max(jnp.abs(a - b))) for a, b in zip(new, previous))
    print(f"largest difference of (A, B, r, R_x, R_u): {diff:.1e}")
    times = {k: [] for k in calls}
    for _ in range(args.repeats):
        for name, (f, f_args) in calls.items():
            start = time.process_time()
            jax.block_until_ready(f(*f_args))
            times[name].append(time.process_time() - start)
    med = {k: float(np.median(v)) for k, v in times.items()}
    for k, v in med.items():
        print(f"{k}: {1e3 * v:.2f} ms CPU (median of {args.repeats})")
    print(
        f"new / previous {med['new'] / med['previous']:.2f}; Jacobian / forward: previous "
        f"{med['previous'] / med['forward']:.1f}x, new {med['new'] / med['forward']:.1f}x"
    )
    print(f"1-min load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
