"""Implicit against unrolled derivatives through contact.

Measures, in one process pinned to one core (CPU time, best of `--repeats` batches):

1. one knot of the ANYmal C trot of `bench_trajopt.py` (56 knots at 10 ms, 1 substep, 10 smooth
   sweeps): its forward transition and its FDDP linearisation (`shooting.linearize_knot`: a jitted
   `jacfwd` of the transition over its 48 tangent directions, and of the costs, whose foot
   kinematics see the 18 of `dq` only) with `derivatives="implicit"` and `"unrolled"` (the
   solvers' default: AD through every sweep); the ratio linearisation / forward is the
   issue's "knot Jacobian / forward step";
2. the gap between the derivative of the computed iterate and of the exact solution at the
   sweep counts the solvers use (FDDP 10, `step`'s default 20): `max |A - A_ref| / max |A_ref|`
   of the knot's state Jacobian against the converged one (500 sweeps, where implicit and
   unrolled agree), with the solve's residual at that knot;
3. the reverse-mode gradient of a 1 s Go2 rollout under its PD (500 steps at 2 ms, the loss of
   `bench_contact.py`) over the rollout itself, implicit and unrolled.

    python benchmarks/bench_derivatives.py              # writes its BENCHMARKS.md section
    python benchmarks/bench_derivatives.py --no-write --repeats 2
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import functools
import os
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import markdown_report  # noqa: E402  (a sibling script module)

SECTION = "## Derivatives through contact: implicit vs unrolled"
MODES = ("implicit", "unrolled")
READING = """
### Reading

- At the solvers' sweep counts the linearisation point is far from the converged contact
  solution (residual 6e-3 m/s at 10 sweeps): both modes differ from the converged derivative by
  the same 17 % (4 % at 20 sweeps), so more sweeps change the accuracy, the rule does not. The
  modes differ only in the impulse solve (the mass-matrix solves use `dM X` products in both).
"""


def _pin_to_one_core():
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {max(os.sched_getaffinity(0))})


def cpu_time(fn, *args, repeats: int, calls: int):
    """Best CPU time per call over `repeats` batches of `calls` calls (seconds)."""
    import jax

    jax.block_until_ready(fn(*args))
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        for _ in range(calls):
            out = fn(*args)
        jax.block_until_ready(out)
        best = min(best, (time.process_time() - start) / calls)
    return best


def knot_problem(num_sweeps: int):
    from trajopt.gaits import make_problem

    return make_problem(
        "anymal_c", "trot", velocity=0.2009, duration=0.56, dt=0.01, substeps=1, period=0.56,
        lead_in=0.0,
        num_sweeps=num_sweeps,
    )  # fmt: skip


@functools.cache
def knot_point(num_sweeps: int, knot: int = 20):
    """`(problem, x, u)` at knot `knot` of the standing-guess rollout."""
    from trajopt.engine import knot_backends, shooting
    from trajopt.solver import initial_guess

    problem = knot_problem(num_sweeps)
    _, us = initial_guess(problem, None)
    xs, _, _ = knot_backends.for_problem(problem).rollout(problem.data, us)
    return problem, shooting.index_knots(xs, knot), us[knot]


@contextlib.contextmanager
def derivatives_mode(mode: str):
    """Within the block, `contact.step` (the rollout gradient's) takes its derivatives by `mode`
    (functions traced inside keep it); restored on exit. The trajectory problems choose theirs
    by `Problem.derivatives`, which the call passes explicitly."""
    import contact

    saved = contact.step
    contact.step = functools.partial(sys.modules["contact.step"].step, derivatives=mode)
    try:
        yield
    finally:
        contact.step = saved


def bench_knot(repeats: int) -> dict:
    """Forward and linearisation CPU times of the knot, both modes timed in alternation (one
    batch each per round), so a busy spell on the machine hits both alike."""
    import jax

    from trajopt import problem as P
    from trajopt.engine import shooting

    base, x, u = knot_point(10)
    calls = {}
    for mode in MODES:
        problem = base.replace(derivatives=mode)
        forward = jax.jit(functools.partial(P.transition, problem))
        linearize = jax.jit(functools.partial(shooting.linearize_knot, problem))
        jax.block_until_ready((forward(problem.data, x, u), linearize(problem.data, x, u, 20)))
        calls[mode] = (forward, linearize)
    out = {mode: {"forward_s": float("inf"), "linearize_s": float("inf")} for mode in MODES}
    for _ in range(repeats):
        for mode, (forward, linearize) in calls.items():
            f_s = cpu_time(forward, base.data, x, u, repeats=1, calls=200)
            l_s = cpu_time(linearize, base.data, x, u, 20, repeats=1, calls=20)
            out[mode]["forward_s"] = min(out[mode]["forward_s"], f_s)
            out[mode]["linearize_s"] = min(out[mode]["linearize_s"], l_s)
    return out


def bench_gap() -> list[dict]:
    import numpy as np

    from trajopt.engine import shooting

    def jacobian(num_sweeps, mode):
        problem, x, u = knot_point(num_sweeps)
        problem = problem.replace(derivatives=mode)
        a, b, *_ = shooting.linearize_knot(problem, problem.data, x, u, 20)
        return np.concatenate([np.asarray(a), np.asarray(b)], axis=1)

    reference = jacobian(500, "implicit")
    unrolled_converged = jacobian(500, "unrolled")
    rows = [{"sweeps": 500, "mode": "unrolled", "gap": _rel(unrolled_converged, reference)}]
    for sweeps in (10, 20):
        for mode in MODES:
            gap = _rel(jacobian(sweeps, mode), reference)
            rows.append({"sweeps": sweeps, "mode": mode, "gap": gap})
    residual = {}
    for sweeps in (10, 20, 500):
        problem, x, u = knot_point(sweeps)
        residual[sweeps] = float(knot_residual(problem, x, u))
    for r in rows:
        r["residual"] = residual[r["sweeps"]]
    return rows


def knot_residual(problem, x, u):
    """The impulse solve's residual [m/s] in the knot's (single) contact step."""
    import contact
    from dynamics.configuration import State
    from trajopt import problem as P

    tau = P.joint_torque(problem, problem.data, State(x.q, x.v), u)
    _, info = contact.step(
        problem.model, problem.data.params, State(x.q, x.v), tau,
        contact=problem.contact, num_sweeps=problem.num_sweeps,
    )  # fmt: skip
    return info.residual


def _rel(a, b):
    import numpy as np

    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))


def bench_rollout_gradient(repeats: int, steps: int = 500) -> dict:
    import bench_contact
    import jax
    import jax.numpy as jnp
    import numpy as np

    out = {}
    model, params, controller, state = bench_contact.setup("go2", "float64")
    u = jnp.asarray(np.random.default_rng(1).normal(scale=0.5, size=(steps, model.nu)))
    for mode in MODES:
        with derivatives_mode(mode):
            loss = bench_contact.rollout_loss_fn(model, params, controller, state, "smooth")
            forward, grad = jax.jit(loss), jax.jit(jax.grad(loss))
            out[mode] = {
                "forward_s": cpu_time(forward, u, repeats=repeats, calls=1),
                "grad_s": cpu_time(grad, u, repeats=repeats, calls=1),
                "finite": bool(jnp.all(jnp.isfinite(grad(u)))),
            }
    return out


def render(knot, gap, grad, args, load_before, load_after) -> str:
    lines = [
        SECTION,
        "",
        "Written by `benchmarks/bench_derivatives.py`.",
        "",
        f"- Command: `python benchmarks/bench_derivatives.py --repeats {args.repeats}`",
        f"- Date: {datetime.datetime.now(datetime.UTC).isoformat(timespec='seconds')}",
        f"- CPU: {markdown_report.cpu_name()}, pinned to one core; CPU time, best of "
        f"{args.repeats} batches; 1-min load average {load_before:.2f} before, "
        f"{load_after:.2f} after",
        f"- Versions: {markdown_report.versions('jax', 'jaxlib', 'numpy')}",
        "",
        "### Knot Jacobian over knot forward step (ANYmal C trot knot, smooth, 10 sweeps)",
        "",
        "| derivatives | forward step us | linearisation us | linearisation / forward |",
        "|---|---:|---:|---:|",
    ]
    for mode in MODES:
        k = knot[mode]
        lines.append(
            f"| {mode} | {k['forward_s'] * 1e6:.0f} | {k['linearize_s'] * 1e6:.0f} | "
            f"{k['linearize_s'] / k['forward_s']:.1f} |"
        )
    lines += [
        "",
        "### Gap to the converged derivative at the solvers' sweep counts (same knot)",
        "",
        "`max |[A B] - [A B]_ref| / max |[A B]_ref|`, reference: implicit at 500 sweeps.",
        "",
        "| sweeps | derivatives | relative gap | solve residual m/s |",
        "|---:|---|---:|---:|",
    ]
    for r in gap:
        lines.append(f"| {r['sweeps']} | {r['mode']} | {r['gap']:.2e} | {r['residual']:.1e} |")
    lines += [
        "",
        f"### Reverse-mode gradient of a Go2 rollout ({args.gradient_steps} steps of 2 ms, "
        "smooth, 20 sweeps)",
        "",
        "| derivatives | rollout ms | gradient ms | gradient / rollout | finite |",
        "|---|---:|---:|---:|---|",
    ]
    for mode in MODES:
        g = grad[mode]
        lines.append(
            f"| {mode} | {g['forward_s'] * 1e3:.1f} | {g['grad_s'] * 1e3:.1f} | "
            f"{g['grad_s'] / g['forward_s']:.2f} | {g['finite']} |"
        )
    return "\n".join(lines) + "\n" + READING


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=7, help="timing batches (best is kept)")
    parser.add_argument("--no-write", action="store_true", help="print, do not edit BENCHMARKS.md")
    parser.add_argument("--skip-gradient", action="store_true", help="skip the rollout gradient")
    parser.add_argument("--gradient-steps", type=int, default=500, help="rollout length (2 ms)")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error(f"--repeats must be >= 1, got {args.repeats}")
    if args.gradient_steps < 1:
        parser.error(f"--gradient-steps must be >= 1, got {args.gradient_steps}")
    _pin_to_one_core()
    import jax

    jax.config.update("jax_enable_x64", True)
    load_before = os.getloadavg()[0]
    knot = bench_knot(args.repeats)
    gap = bench_gap()
    grad = (
        {m: {"forward_s": float("nan"), "grad_s": float("nan"), "finite": None} for m in MODES}
        if args.skip_gradient
        else bench_rollout_gradient(args.repeats, args.gradient_steps)
    )
    text = render(knot, gap, grad, args, load_before, os.getloadavg()[0])
    print(text)
    if not args.no_write:
        markdown_report.replace_section(REPO / "BENCHMARKS.md", SECTION, text)
    return knot, gap, grad


if __name__ == "__main__":
    main()
