"""CPU time of the floating-base terms' Jacobian rule (`dynamics.floating_base_terms`), per part.

    taskset -c 1 python benchmarks/bench_floating_base_rule.py              # go2, 15 rounds
    taskset -c 1 python benchmarks/bench_floating_base_rule.py --robot anymal_c --rounds 5

The base-frame terms `(M_B, h_B, J_f,B, p_f,B)` of the robot's feet as the `custom_jvp` that
`frame_terms(..., jacobian_rule=True)` uses, in each layout the module has ("generic": `jacfwd`
of the dense terms over the 12 joint angles and of `h_B` over `(v, g_B)`; "legs": the same
Jacobians one leg at a time, `dynamics.leg_terms`), jitted as

    forward          the terms (the custom_jvp's primal)
    d/dq_j           `jacfwd` over the joint angles only (the rule's angle part: `dv`, `dg` are
                     symbolic zeros)
    d/d(v, g_B)      `jacfwd` over the velocity and base-frame gravity (the rule's bias part)
    all              `jacfwd` over all three (both parts and the contractions)

at a random configuration and velocity. Process CPU time per call, median of `--rounds`
interleaved batches of 20 calls, and the compiled program's HLO line count. Pin it to one
core (`taskset`): XLA's threads otherwise fight other processes.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def functions(robot: str, layout: str):
    """`{part: f(q_joints, v, g_B)}` for one layout of the rule, and a random point."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    import dynamics
    from dynamics import floating_base_terms

    model = dynamics.load_robot(robot)
    terms = floating_base_terms.with_jacobian_rule(
        model, tuple(model.foot_frames), per_leg=layout == "legs"
    )
    rng = np.random.default_rng(3)
    point = (
        jnp.asarray(np.asarray(model.q_standing)[7:] + 0.3 * rng.normal(size=model.nv - 6)),
        jnp.asarray(rng.normal(size=model.nv)),
        jnp.asarray([0.3, -0.2, -9.8]),
    )
    return {
        "forward": jax.jit(terms),
        "d/dq_j": jax.jit(jax.jacfwd(terms, argnums=0)),
        "d/d(v, g_B)": jax.jit(jax.jacfwd(terms, argnums=(1, 2))),
        "all": jax.jit(jax.jacfwd(terms, argnums=(0, 1, 2))),
    }, point


def measure(robot: str, layouts: list[str], rounds: int) -> list[dict]:
    import jax
    import numpy as np

    calls = {}
    for layout in layouts:
        fs, point = functions(robot, layout)
        for part, f in fs.items():
            jax.block_until_ready(f(*point))
            hlo = f.lower(*point).compile().as_text().count("\n")
            calls[(layout, part)] = (f, point, hlo)
    times = {key: [] for key in calls}
    for _ in range(rounds):
        for key, (f, point, _) in calls.items():
            start = time.process_time()
            for _ in range(20):
                out = f(*point)
            jax.block_until_ready(out)
            times[key].append((time.process_time() - start) / 20)
    return [
        {"layout": layout, "part": part, "us": 1e6 * float(np.median(times[(layout, part)])),
         "hlo": calls[(layout, part)][2]}
        for layout, part in calls
    ]  # fmt: skip


def render(rows: list[dict]) -> str:
    lines = ["| layout | part | us per call | HLO lines |", "|---|---|---:|---:|"]
    lines += [f"| {r['layout']} | {r['part']} | {r['us']:.1f} | {r['hlo']} |" for r in rows]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--robot", default="go2")
    parser.add_argument("--layouts", default="generic,legs", help="comma-separated")
    parser.add_argument("--rounds", type=int, default=15, help="interleaved batches of 20 calls")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error(f"--rounds must be >= 1, got {args.rounds}")
    load = os.getloadavg()[0]
    table = render(measure(args.robot, args.layouts.split(","), args.rounds))
    print(table)
    print(f"\n1-min load average {load:.2f} before, {os.getloadavg()[0]:.2f} after")
    return table


if __name__ == "__main__":
    main()
