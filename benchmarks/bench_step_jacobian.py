"""Where one step's Jacobian goes: CPU time of a Go2 step and of its pieces, forward and `jacfwd`.

    python benchmarks/bench_step_jacobian.py                 # every mode, 30 rounds
    python benchmarks/bench_step_jacobian.py --rounds 3      # quick

Every piece in both impulse-solve derivative modes ("unrolled", "implicit") and both rigid-body
modes ("autodiff": every tangent direction through the dense terms; "jacobian": their Jacobian
formed once, `dynamics.floating_base_terms`, what the trajectory solvers use).

One Go2 `contact.step` (smooth, 10 sweeps, 10 ms, standing pose, 0.3 m/s forward), as a function
of `x = [q (19), v (18), tau (12)]`, and the pieces it is built from (each includes the ones
before it): the rigid-body terms at the midpoint configuration (`M`, `h`, foot contacts), then
the free velocity and `M^-1 J^T`, then the whole step. Each function is jitted forward and as
`jax.jacfwd` (49 tangent directions); the process CPU time per call, median of `--rounds`
interleaved batches of 10 calls (so a busy spell hits every function alike), and the compiled
program's HLO line count. Run as a script, it pins itself to the last core before JAX starts.
Prints a Markdown table; BENCHMARKS.md, "Where one step's Jacobian goes", quotes its runs.
"""

from __future__ import annotations

import argparse
import importlib
import itertools
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def pieces(derivatives: str, rigid_body_derivatives: str = "autodiff"):
    """`{name: f(x)}` for the three nested pieces of one Go2 step, and the point `x (49,)`."""
    import jax.numpy as jnp

    import dynamics
    from contact.params import StepParams
    from dynamics.configuration import State, integrate

    step_module = importlib.import_module("contact.step")
    model = dynamics.load_robot("go2")
    params = StepParams(dt=0.01)
    nq, nv = model.nq, model.nv
    q = jnp.asarray(model.q_standing)
    v = jnp.zeros(nv).at[0].set(0.3)
    x = jnp.concatenate([q, v, jnp.zeros(model.nu)])

    def split(x):
        return x[:nq], x[nq : nq + nv], x[nq + nv :]

    def flat(tree):
        import jax

        return jnp.concatenate([jnp.ravel(a) for a in jax.tree_util.tree_leaves(tree)])

    def rigid_body_terms(x):
        q, v, _ = split(x)
        return flat(step_module._dynamics_at(
            model, params, integrate(model, q, v * 0.005), v, rigid_body_derivatives
        ))  # fmt: skip

    def free_velocity_and_response(x):
        q, v, tau = split(x)
        mass, bias, contacts = step_module._dynamics_at(
            model, params, integrate(model, q, v * 0.005), v, rigid_body_derivatives
        )
        jac = contacts.jacobian.reshape(3 * model.nfeet, nv)
        return flat(step_module._free_velocity_and_response(
            model, mass, bias, tau, jac, v, params.dt
        ))  # fmt: skip

    def whole_step(x):
        q, v, tau = split(x)
        nxt, _ = step_module.step(
            model, params, State(q, v), tau, contact="smooth", num_sweeps=10,
            derivatives=derivatives, rigid_body_derivatives=rigid_body_derivatives,
        )  # fmt: skip
        return jnp.concatenate([nxt.q, nxt.v])

    return {
        "rigid-body terms": rigid_body_terms,
        "+ free velocity and M^-1 J^T": free_velocity_and_response,
        "the whole step": whole_step,
    }, x


def measure(rounds: int) -> list[dict]:
    import jax
    import numpy as np

    calls = {}
    for derivatives, rigid_body in itertools.product(
        ("unrolled", "implicit"), ("autodiff", "jacobian")
    ):
        functions, x = pieces(derivatives, rigid_body)
        for name, f in functions.items():
            name = f"{name} ({rigid_body})"
            for mode, g in (("forward", jax.jit(f)), ("jacfwd", jax.jit(jax.jacfwd(f)))):
                jax.block_until_ready(g(x))
                hlo = g.lower(x).compile().as_text().count("\n")
                calls[(derivatives, name, mode)] = (g, hlo)
    times = {key: [] for key in calls}
    for _ in range(rounds):
        for key, (g, _) in calls.items():
            start = time.process_time()
            for _ in range(10):
                out = g(x)
            jax.block_until_ready(out)
            times[key].append((time.process_time() - start) / 10)
    return [
        {"derivatives": d, "piece": n, "mode": m, "us": 1e6 * float(np.median(times[(d, n, m)])),
         "hlo": calls[(d, n, m)][1]}
        for (d, n, m) in calls
    ]  # fmt: skip


def render(rows: list[dict]) -> str:
    lines = [
        "| piece (each includes the ones above) | derivatives | forward us | jacfwd us | "
        "jacfwd / forward | HLO lines forward / jacfwd |",
        "|---|---|---:|---:|---:|---:|",
    ]
    keyed = {(r["derivatives"], r["piece"], r["mode"]): r for r in rows}
    for d, n, m in keyed:
        if m != "forward":
            continue
        fwd, jac = keyed[(d, n, "forward")], keyed[(d, n, "jacfwd")]
        lines.append(
            f"| {n} | {d} | {fwd['us']:.0f} | {jac['us']:.0f} | {jac['us'] / fwd['us']:.1f} | "
            f"{fwd['hlo']} / {jac['hlo']} |"
        )
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30, help="interleaved batches of 10 calls")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error(f"--rounds must be >= 1, got {args.rounds}")
    import jax

    jax.config.update("jax_enable_x64", True)
    load = os.getloadavg()[0]
    table = render(measure(args.rounds))
    print(table)
    print(f"\n1-min load average {load:.2f} before, {os.getloadavg()[0]:.2f} after")
    return table


if __name__ == "__main__":
    if hasattr(os, "sched_setaffinity"):  # before JAX starts its threads
        os.sched_setaffinity(0, {max(os.sched_getaffinity(0))})
    main()
