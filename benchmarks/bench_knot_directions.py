"""The FDDP knot linearisation before and after the u_prev directions left the simulation
(issue 15): CPU time of one knot's Jacobian, interleaved in one process, and the agreement.

    taskset -c 0 python benchmarks/bench_knot_directions.py go2

`old_lin` is the previous rule (every tangent direction, `2 nv + 2 nu`, pushed through the
contact steps), kept here as the reference; `trajopt.fddp._linearize_knot` pushes `2 nv + nu`
and builds the `u_prev` block from the residuals alone. Prints the largest difference of
every output and the medians of 30 interleaved calls (process CPU time).
"""

import functools
import os
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import trajopt.solve as S
from trajopt import fddp
from trajopt import problem as P
from trajopt.gaits import make_problem


def old_lin(problem, data, x, u, t):
    nominal, _, _ = P.transition(problem, data, x, u)
    ref_t = P.reference_at(data.reference, t)

    def g(dx, du):
        xp = P.retract(problem, x, dx)
        up = u + du
        nxt, forces, taus = P.transition(problem, data, xp, up)
        res = P.weighted(
            P.running_residuals(problem, data, xp, up, forces, taus, ref_t), data.weights
        )
        return (P.local(problem, nominal, nxt), res), res

    dx0 = jnp.zeros(problem.nx, dtype=x.v.dtype)
    du0 = jnp.zeros(problem.nu, dtype=x.v.dtype)
    (j_next, j_res), r = jax.jacfwd(g, argnums=(0, 1), has_aux=True)(dx0, du0)
    return j_next[0], j_next[1], r, j_res[0], j_res[1]


prob = make_problem(sys.argv[1], "trot", 0.5, duration=0.5, dt=0.02, substeps=2)
fn = fddp.compiled(prob)
data = prob.data
xs, us = S.initial_guess(prob, None, "auto")
xs, _, _ = fn.rollout(data, us)
x3 = jax.tree_util.tree_map(lambda a: a[3], xs)
new = jax.jit(functools.partial(fddp._linearize_knot, prob))
old = jax.jit(functools.partial(old_lin, prob))
a = new(data, x3, us[3] + 0.01, 3)
b = old(data, x3, us[3] + 0.01, 3)
print("max abs diff", [float(jnp.max(jnp.abs(p - q))) for p, q in zip(a, b)])
fwd = jax.jit(lambda d, x, u: P.transition(prob, d, x, u))
jax.block_until_ready(fwd(data, x3, us[3]))
pt = time.process_time
T = {"new": [], "old": [], "fwd": []}
for i in range(30):
    for name, f in (("new", new), ("old", old), ("fwd", fwd)):
        args = (data, x3, us[3], 3) if name != "fwd" else (data, x3, us[3])
        t0 = pt()
        jax.block_until_ready(f(*args))
        T[name].append(pt() - t0)
for k, v in T.items():
    print(k, f"{1e3 * np.median(v):.2f} ms")
print(
    "new/old",
    np.median(T["new"]) / np.median(T["old"]),
    "old/fwd",
    np.median(T["old"]) / np.median(T["fwd"]),
    "new/fwd",
    np.median(T["new"]) / np.median(T["fwd"]),
)
print("load", os.getloadavg())
