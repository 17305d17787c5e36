"""Trajectory optimisation benchmark: our FDDP against Crocoddyl's on a trot.

    python benchmarks/bench_trajopt.py [--horizons 56,100] [--iterations 30] [--output FILE]

In one run on one machine, pinned to one core (`os.sched_setaffinity(0, {0})` before JAX
starts, and `taskset -c 0` for the Crocoddyl subprocess; `--no-pin` to skip):

1. Crocoddyl (3.2.1, its own virtual environment `benchmarks/.venv-crocoddyl`, created here
   from PyPI if missing: Crocoddyl with the PyPI `pin` 4.1 computes garbage, so `pin==4.0.0`
   is pinned, and it stays out of the project's environment): `benchmarks/crocoddyl_trot.py`,
   the trotting problem of its `examples/quadrupedal_gaits_fwddyn.py` (ANYmal, 56 knots at
   10 ms, step length 0.15 m, height 0.1 m), `SolverFDDP` on one thread, median of repeats.
   Run for the example's robot ("anymal", ANYmal B) and for "anymal_c" (our robot).
2. Ours: `trajopt.gaits.make_problem(robot, "trot", velocity=0.2, duration=H * dt, dt=0.01,
   substeps=1, period=0.56, lead_in=0)`: the same robot, knot length, cycle (two diagonal
   swings in 0.56 s) and average speed (Crocoddyl's CoM reference moves 0.75 x 0.15 m in
   0.56 s, 0.2 m/s) as Crocoddyl's; H = 56 (Crocoddyl's horizon) and 100 (the issue's 1 s
   trot). FDDP single shooting from scratch (standing PD targets) with a fixed iteration budget:
   - the first solve includes JIT compilation (reported alone, as first solve - second solve);
   - the second solve of the same problem structure (`knot_backends.for_problem` caches the jitted
     functions) is the timed one: wall and CPU time, time per iteration (median of the
     per-iteration wall times, from a callback timestamp after each accepted iteration), and
     time to solution (to within 1 % of the cost reached by the whole budget, and the solver's
     own convergence if it stops early);
   - a third, instrumented solve splits the iteration time into linearisation (every knot),
     the backward pass (the Gauss-Newton model and the Riccati recursions) and the line search
     (forward rollouts + cost evaluations until a step is accepted); the rest of an iteration
     (Python, host transfers) is "other" (the initial guess, rollout and evaluation before the
     first iteration are not in it);
   - an MPC-like warm-started re-solve: the problem advanced by one knot (x0 = the solution's
     state at knot 1, references shifted) from `init=trajectory.shifted(1)`.
   Whether the PD at dt = 10 ms with one substep is stable (a 3 s open-loop standing rollout
   stays finite and settles) is checked and reported; `--substeps 2` otherwise.

Targets (not tests): time per iteration at most 2x Crocoddyl's; the whole solve of a
1 s trot at 10 ms under 2 s on one core.

Results are printed and written to the `## Trajectory optimisation vs Crocoddyl`
section of BENCHMARKS.md (the file is re-read right before writing; other sections are kept).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import markdown_report  # noqa: E402  (a sibling script module)

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(REPO))

SECTION = "## Trajectory optimisation vs Crocoddyl"
CROC_VENV = REPO / "benchmarks" / ".venv-crocoddyl"
CROC_SCRIPT = REPO / "benchmarks" / "crocoddyl_trot.py"
CROC_PINS = ("crocoddyl==3.2.1", "pin==4.0.0", "example-robot-data-loaders==5.0.0")
# Crocoddyl's trot: CoM reference advances 0.5 x (0.5 x 0.15 + 0.15) m = 0.1125 m in 56 knots
CROC_KNOTS, CROC_DT = 56, 0.01
CROC_SPEED = 0.5 * (0.5 * 0.15 + 0.15) / (CROC_KNOTS * CROC_DT)  # 0.2009 m/s
CROC_PERIOD = CROC_KNOTS * CROC_DT
# the pattern from the first knot: the problem these comparisons have always posed (a robot's
# own lead-in, `make_problem`'s default, would change the problem between robots and runs)
CROC_LEAD_IN = 0.0
TARGET_RATIO = 2.0
TARGET_SOLVE_S = 2.0


# ----------------------------------------------------------------------------- Crocoddyl
def crocoddyl_python(create: bool = True) -> Path | None:
    """The Python of the Crocoddyl venv, created (PyPI, pinned versions) if missing."""
    py = CROC_VENV / "bin" / "python"
    if py.exists():
        return py
    if not create:
        return None
    base = shutil.which("python3.11") or sys.executable
    print(f"creating {CROC_VENV} ({' '.join(CROC_PINS)})", flush=True)
    subprocess.run([base, "-m", "venv", str(CROC_VENV)], check=True)
    subprocess.run([str(py), "-m", "pip", "install", "-q", *CROC_PINS], check=True)
    return py


def run_crocoddyl(robot: str, repeats: int, pin: bool) -> dict:
    py = crocoddyl_python()
    cmd = [str(py), str(CROC_SCRIPT), "--robot", robot, "--repeats", str(repeats)]
    if pin and shutil.which("taskset"):
        cmd = ["taskset", "-c", "0", *cmd]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


# ----------------------------------------------------------------------------- ours
def _shift_problem(problem, traj):
    """The problem one knot later (MPC): x0 = the trajectory's knot 1, references shifted."""
    import jax
    import jax.numpy as jnp

    from trajopt import problem as P

    data = problem.data
    n = problem.horizon + 1
    x0 = P.KnotState(jnp.asarray(traj.q[1]), jnp.asarray(traj.v[1]), jnp.asarray(traj.u[0]))
    ref = jax.tree_util.tree_map(
        lambda a: jnp.concatenate([a[1:], a[-1:]]) if a.shape[:1] == (n,) else a, data.reference
    )
    return dataclasses.replace(problem, data=dataclasses.replace(data, x0=x0, reference=ref))


def timed_solve(problem, init=None, max_iterations=30):
    """FDDP single shooting as `trajopt.solver.solve(problem, init, solver="fddp")` runs it, with
    a timestamp after every accepted iteration. Returns `(trajectory, stats)`."""
    from trajopt.engine import fddp
    from trajopt.solver import initial_guess
    from trajopt.trajectory import Trajectory

    stamps = []
    wall0, cpu0 = time.perf_counter(), time.process_time()
    _, us = initial_guess(problem, init)
    guessed = time.perf_counter()
    result = fddp.solve_fddp(
        problem,
        None,
        us,
        max_iterations=max_iterations,
        verbose=False,
        callback=lambda rec: stamps.append((time.perf_counter(), rec["cost"])),
    )
    solved = time.perf_counter()
    traj = Trajectory.from_solution(problem, result, "fddp-single")
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    times = [t - wall0 for t, _ in stamps]
    per_iter = [b - a for a, b in zip([0.0, *times[:-1]], times)]
    costs = [c for _, c in stamps]
    within = None
    if costs:
        goal = costs[-1] + 0.01 * abs(costs[-1])
        within = next(t for t, c in zip(times, costs) if c <= goal)
    return traj, {
        "wall_s": wall,
        "cpu_s": cpu,
        "guess_s": guessed - wall0,  # the initial guess (kinematic gait, or the warm start)
        "finish_s": wall0 + wall - solved,  # the Trajectory's assembly after the solve
        "iterations": traj.iterations,
        "status": traj.status,
        "cost": float(traj.cost),
        "defects": float(traj.meta.get("defects", float("nan"))),
        "per_iteration_s_median": statistics.median(per_iter) if per_iter else float("nan"),
        "per_iteration_cpu_s": cpu / max(traj.iterations, 1),
        "time_to_1pct_s": within,
        "iterations_to_1pct": (times.index(within) + 1) if within is not None else None,
    }


def split_solve(problem, max_iterations):
    """Solve again with every piece timed (each jitted call waited for)."""
    import jax

    from trajopt.engine import knot_backends

    fn = knot_backends.for_problem(problem)
    acc = {"setup": 0.0, "linearisation": 0.0, "backward": 0.0, "line_search": 0.0}
    counts = {"linearize_calls": 0, "backward_passes": 0, "forward_rollouts": 0}

    def wrap(f, cat, count, per_call):
        def g(*args, **kwargs):
            t = time.perf_counter()
            out = f(*args, **kwargs)
            jax.block_until_ready(out)
            acc[cat] += time.perf_counter() - t
            if count:
                counts[count] += per_call(out)
            return out

        return g

    # one call each per iteration (the line search and backward pass again per raised mu)
    names = ("rollout", "evaluate", "rollout_and_evaluate", "linearize_all", "gauss_newton",
             "backward", "line_search")  # fmt: skip
    saved = {n: getattr(fn, n) for n in names}
    fn.rollout = wrap(saved["rollout"], "setup", None, None)
    fn.evaluate = wrap(saved["evaluate"], "setup", None, None)
    fn.rollout_and_evaluate = wrap(saved["rollout_and_evaluate"], "setup", None, None)
    fn.linearize_all = wrap(
        saved["linearize_all"], "linearisation", "linearize_calls", lambda _: problem.horizon
    )
    fn.gauss_newton = wrap(saved["gauss_newton"], "backward", None, None)
    fn.backward = wrap(saved["backward"], "backward", "backward_passes", lambda _: 1)
    fn.line_search = wrap(
        saved["line_search"], "line_search", "forward_rollouts", lambda out: int(out[1])
    )
    in_c = fn.iterate_in_one_call  # the compiled iteration in one C call times its own parts

    def iterate_in_one_call(*args, **kwargs):
        step = in_c(*args, **kwargs)
        if step is not None:
            for part, cat in (("linearize", "linearisation"), ("backward", "backward"),
                              ("line_search", "line_search")):  # fmt: skip
                acc[cat] += step.seconds[part]
            counts["linearize_calls"] += problem.horizon
            counts["backward_passes"] += step.passes
            counts["forward_rollouts"] += step.rollouts
        return step

    fn.iterate_in_one_call = iterate_in_one_call
    try:
        traj, stats = timed_solve(problem, None, max_iterations)
    finally:
        for n, f in saved.items():
            setattr(fn, n, f)
        del fn.iterate_in_one_call  # the class's method again
    its = max(stats["iterations"], 1)
    setup = acc.pop("setup")
    out = {k: v / its for k, v in acc.items()}
    # the iterations only: not the initial guess, the first rollout and evaluation, the
    # Trajectory's assembly
    out["total"] = (stats["wall_s"] - setup - stats["guess_s"] - stats["finish_s"]) / its
    out["guess_s"] = stats["guess_s"]
    out["other"] = out["total"] - sum(out[k] for k in acc)
    out["setup_s"] = setup
    out.update({k: v / its for k, v in counts.items()})
    out["per_knot_linearize_s"] = acc["linearisation"] / max(counts["linearize_calls"], 1)
    # one knot's forward transition alone: a jitted rollout of all knots, best of 5
    data, us = problem.data, traj.u
    fwd = []
    for _ in range(5):
        t = time.perf_counter()
        jax.block_until_ready(fn.rollout(data, us))
        fwd.append(time.perf_counter() - t)
    out["per_knot_forward_s"] = min(fwd) / problem.horizon
    return out


def pd_stability(problem, seconds=3.0):
    """Open-loop standing rollout (the solver's initial guess) of `seconds`: finite, settled?"""
    import numpy as np

    from trajopt.engine import knot_backends
    from trajopt.gaits import make_problem
    from trajopt.solver import initial_guess

    dt = problem.dt_knot
    longer = make_problem(
        problem.model.name,
        "stand",
        0.0,
        duration=seconds,
        dt=dt,
        substeps=problem.substeps,
    )
    _, us = initial_guess(longer)
    xs, _, _ = knot_backends.for_problem(longer).rollout(longer.data, us)
    q, v = np.asarray(xs.q), np.asarray(xs.v)
    return {
        "finite": bool(np.isfinite(q).all() and np.isfinite(v).all()),
        "base_z_min": float(q[:, 2].min()),
        "base_z_end": float(q[-1, 2]),
        "max_abs_v_last_10": float(np.abs(v[-10:]).max()),
        "stable": bool(np.isfinite(v).all() and np.abs(v[-10:]).max() < 0.05),
    }


def contact_solve(s) -> dict:
    """`make_problem`'s contact-solve options of the settings: the problem's converged solve
    by default, or the paper's fixed sweeps (`--fixed-sweeps`)."""
    from trajopt import problem as P

    if s.fixed_sweeps:
        return {"contact_tolerance": None, "num_sweeps": s.num_sweeps or 10}
    return {"contact_tolerance": s.contact_tolerance or P.CONTACT_TOLERANCE,
            "num_sweeps": s.num_sweeps or P.MAX_SWEEPS}  # fmt: skip


def run_ours(horizon: int, s) -> dict:
    from trajopt.gaits import make_problem

    problem = make_problem(
        s.robot,
        "trot",
        velocity=CROC_SPEED,
        duration=horizon * s.dt,
        dt=s.dt,
        substeps=s.substeps,
        period=CROC_PERIOD,
        lead_in=CROC_LEAD_IN,
        derivatives=s.derivatives,
        **contact_solve(s),
    )
    assert problem.horizon == horizon, (problem.horizon, horizon)
    print(f"[ours H={horizon}] first solve (compiles) ...", flush=True)
    _, first = timed_solve(problem, None, s.iterations)
    print(f"[ours H={horizon}] first {first['wall_s']:.1f} s; second solve ...", flush=True)
    traj, second = timed_solve(problem, None, s.iterations)
    print(
        f"[ours H={horizon}] second {second['wall_s']:.2f} s, {second['iterations']} it, "
        f"{1e3 * second['per_iteration_s_median']:.1f} ms/it; split ...",
        flush=True,
    )
    split = split_solve(problem, s.split_iterations)
    warm = []
    shifted = _shift_problem(problem, traj)
    for _ in range(s.warm_repeats):
        _, w = timed_solve(shifted, traj.shifted(1), s.warm_iterations)
        warm.append(w)
    warm_med = dict(
        min(warm, key=lambda w: abs(w["wall_s"] - statistics.median(x["wall_s"] for x in warm)))
    )
    print(f"[ours H={horizon}] warm re-solve {warm_med['wall_s']:.2f} s", flush=True)
    return {
        "horizon": horizon,
        "compile_s": first["wall_s"] - second["wall_s"],
        "first": first,
        "second": second,
        "split": split,
        "warm": warm_med,
        "warm_all_s": [w["wall_s"] for w in warm],
        "nx": int(problem.nx),
        "nu": int(problem.nu),
        "travel_m": float(traj.q[-1, 0] - traj.q[0, 0]),
    }


# ----------------------------------------------------------------------------- report
def _cpu_name() -> str:
    return markdown_report.cpu_name()


def _versions() -> str:
    return markdown_report.versions("jax", "jaxlib", "numpy")


def _ms(x):
    return "-" if x is None or x != x else f"{1e3 * x:.1f}"


def _s(x):
    return "-" if x is None or x != x else f"{x:.2f}"


def render(results: dict, s) -> str:
    croc = results.get("crocoddyl") or {}
    ref = croc.get("anymal_c") or croc.get("anymal")
    ours = results["ours"]
    stab = results.get("stability")
    lines = [
        SECTION,
        "",
        "Written by `benchmarks/bench_trajopt.py`.",
        "",
        f"- Command: `{s.command}`",
        f"- Date: {s.date}",
        f"- CPU: {_cpu_name()}, {os.cpu_count()} logical cores; "
        + (
            "everything pinned to core 0 (ours: `sched_setaffinity` before JAX starts; "
            "Crocoddyl: `taskset -c 0`, `nthreads = 1`)"
            if s.pinned
            else "not pinned"
        )
        + f"; 1-min load average {s.load_before:.2f} before, {s.load_after:.2f} after",
        f"- Versions (ours): {_versions()}",
    ]
    if ref:
        v = ref["versions"]
        lines.append(
            f"- Versions (Crocoddyl venv `benchmarks/.venv-crocoddyl`): crocoddyl "
            f"{v['crocoddyl']}, pinocchio {v['pinocchio']}, numpy {v['numpy']}, "
            f"Python {v['python']}"
        )
    lines += [
        "",
        "### Problems",
        "",
        "- **Crocoddyl**: `createTrottingProblem(x0, 0.15, 0.1, 1e-2, 25, 2)` of its "
        "`examples/quadrupedal_gaits_fwddyn.py` (56 knots at 10 ms), `SolverFDDP.solve(xs=[x0]"
        f"*57, us=quasiStatic, maxiter=100)`, one thread, median of {s.croc_repeats} repeats; "
        "`anymal` (ANYmal B) and `anymal_c` from example-robot-data 5.0.0.",
        f'- **Ours**: `make_problem("{s.robot}", "trot", velocity={CROC_SPEED:.4f}, '
        f"duration=H*{s.dt}, dt={s.dt}, substeps={s.substeps}, period={CROC_PERIOD:.2f}, "
        f"lead_in={CROC_LEAD_IN:g}, "
        + ", ".join(f"{k}={v!r}" for k, v in contact_solve(s).items())
        + f", derivatives={s.derivatives!r})`: same robot, knot length, "
        "trot cycle and average speed. FDDP single shooting from the "
        f"standing PD targets, at most {s.iterations} iterations. H = 56 is Crocoddyl's "
        "horizon, H = 100 a 1 s trot.",
        "- **Not the same problem**: Crocoddyl fixes the contact sequence (rigid contacts, "
        "impulse models, tracked references, analytic derivatives, torque controls); ours is "
        "contact-implicit (smooth contact under a joint PD, the gait as soft costs). Compare "
        "time per iteration, not iteration counts.",
    ]
    if stab:
        lines.append(
            f"- PD at dt = {s.dt * 1e3:.0f} ms, {s.substeps} substep(s): 3 s open-loop standing "
            f"rollout {'stable' if stab['stable'] else 'NOT stable'} (finite {stab['finite']}, "
            f"base z min {stab['base_z_min']:.3f} m, end {stab['base_z_end']:.3f} m, max |v| over "
            f"the last 10 knots {stab['max_abs_v_last_10']:.2g})."
        )
    # --- ratio table
    lines += [
        "",
        "### Results",
        "",
        "| solver | problem | knots | iterations | status | solve s (wall) | solve CPU s "
        "| ms / iteration | CPU ms / iteration | x Crocoddyl / it (wall, CPU) | time to 1 % s "
        "| compile s | final cost |",
        "|---|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for robot in ("anymal", "anymal_c"):
        c = croc.get(robot)
        if not c:
            continue
        lines.append(
            f"| Crocoddyl FDDP | {robot} trot | {c['knots']} | {c['iterations']} | "
            f"{'converged' if c['converged'] else 'not converged'} | {_s(c['solve_s_median'])} | "
            f"{_s(c['solve_cpu_s_median'])} | {_ms(c['per_iteration_s_median'])} | "
            f"{_ms(c['per_iteration_cpu_s'])} | 1 | "
            f"{_s(c['solve_s_median'])} | 0 (C++) | {c['cost']:.4g} |"
        )
    ref_it = ref["per_iteration_s_median"] if ref else float("nan")
    ref_cpu = ref["per_iteration_cpu_s"] if ref else float("nan")
    for r in ours:
        for label, st, comp in (
            ("ours FDDP, from scratch", r["second"], r["compile_s"]),
            ("ours FDDP, warm start (shifted 1 knot)", r["warm"], None),
        ):
            lines.append(
                f"| {label} | {s.robot} trot, contact-implicit | {r['horizon']} | "
                f"{st['iterations']} | {st['status']} | {_s(st['wall_s'])} | {_s(st['cpu_s'])} | "
                f"{_ms(st['per_iteration_s_median'])} | {_ms(st['per_iteration_cpu_s'])} | "
                f"{st['per_iteration_s_median'] / ref_it:.1f}, "
                f"{st['per_iteration_cpu_s'] / ref_cpu:.1f} | {_s(st['time_to_1pct_s'])} | "
                f"{_s(comp) if comp is not None else '(cached)'} | {st['cost']:.4g} |"
            )
    lines += [
        "",
        "Crocoddyl ran twice (before and after ours, "
        + ", ".join(
            f"{k}: " + " / ".join(f"{x * 1e3:.0f}" for x in v.get("runs_s", [])) + " ms"
            for k, v in croc.items()
        )
        + "); the faster run is shown. `x Crocoddyl / it`: our time per iteration over "
        f"Crocoddyl's ({'anymal_c' if croc.get('anymal_c') else 'anymal'} row, 56 knots; per "
        "knot, divide the 100-knot rows by 1.8). `time to 1 %`: wall time until the cost is "
        "within 1 % of its final value. `compile s`: first solve minus second. Warm start: "
        "the problem advanced one knot, "
        f"`init = trajectory.shifted(1)`, at most {s.warm_iterations} iterations, median of "
        f"{s.warm_repeats}.",
        "",
        "### Where our iteration time goes",
        "",
        f"Instrumented solve (every call waited for), {s.split_iterations} iterations, per "
        "iteration; `other` is the Python around the calls:",
        "",
        "| knots | linearisation ms | backward pass ms | line search ms | other ms | total ms "
        "| one knot: linearisation ms | one knot: forward step ms "
        "| Crocoddyl calc+calcDiff, all knots, ms |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in ours:
        sp = r["split"]
        croc_lin = _ms(ref["linearisation_s_median"]) if ref else "-"
        lines.append(
            f"| {r['horizon']} | {_ms(sp['linearisation'])} | {_ms(sp['backward'])} | "
            f"{_ms(sp['line_search'])} ({sp['forward_rollouts']:.1f} rollouts) | "
            f"{_ms(sp['other'])} | {_ms(sp['total'])} | {_ms(sp['per_knot_linearize_s'])} | "
            f"{1e3 * sp['per_knot_forward_s']:.3f} | "
            f"{croc_lin if r['horizon'] == CROC_KNOTS else '-'} |"
        )
    lines += ["", "### Targets", "", *targets(results, s)]
    return "\n".join(lines) + "\n"


def targets(results: dict, s) -> list[str]:
    croc = results.get("crocoddyl") or {}
    ref = croc.get("anymal_c") or croc.get("anymal")
    out = []
    by_h = {r["horizon"]: r for r in results["ours"]}
    r56 = by_h.get(CROC_KNOTS) or results["ours"][0]
    if ref:
        ratio = r56["second"]["per_iteration_s_median"] / ref["per_iteration_s_median"]
        cpu_ratio = r56["second"]["per_iteration_cpu_s"] / ref["per_iteration_cpu_s"]
        out.append(
            f"- Time per iteration <= {TARGET_RATIO:g}x Crocoddyl's: "
            f"**{'met' if max(ratio, cpu_ratio) <= TARGET_RATIO else 'not met'}**: "
            f"{_ms(r56['second']['per_iteration_s_median'])} ms vs "
            f"{_ms(ref['per_iteration_s_median'])} ms at {r56['horizon']} knots, "
            f"{ratio:.0f}x wall ({cpu_ratio:.0f}x in CPU time), about "
            f"{ratio / TARGET_RATIO:.0f}x over the target."
        )
    r100 = by_h.get(100)
    if r100:
        w = r100["second"]
        ok = w["wall_s"] <= TARGET_SOLVE_S
        out.append(
            f"- Whole solve of a 1 s trot at 10 ms under {TARGET_SOLVE_S:g} s on one core: "
            f"**{'met' if ok else 'not met'}**: from scratch {w['wall_s']:.1f} s for "
            f"{w['iterations']} iterations ({w['status']}; within 1 % of that cost after "
            f"{_s(w['time_to_1pct_s'])} s), {w['wall_s'] / TARGET_SOLVE_S:.1f}x the target, "
            f"plus {r100['compile_s']:.0f} s of compilation on the first solve; a warm-started "
            f"re-solve took {r100['warm']['wall_s']:.1f} s ({r100['warm']['iterations']} "
            "iterations)."
        )
    sp = r56["split"]
    parts = {k: sp[k] for k in ("linearisation", "backward", "line_search", "other")}
    top = max(parts, key=parts.get)
    out.append(
        f"- What dominates: {top.replace('_', ' ')} "
        f"({100 * parts[top] / sp['total']:.0f} % of an iteration at {r56['horizon']} knots; "
        + ", ".join(
            f"{k.replace('_', ' ')} {100 * v / sp['total']:.0f} %" for k, v in parts.items()
        )
        + f"). One knot's linearisation costs {_ms(sp['per_knot_linearize_s'])} ms, "
        f"{sp['per_knot_linearize_s'] / sp['per_knot_forward_s']:.0f}x the knot's forward step "
        f"({1e3 * sp['per_knot_forward_s']:.3f} ms); Crocoddyl's analytic calc + calcDiff of "
        "all 56 knots costs "
        + (
            f"{_ms(ref['linearisation_s_median'])} ms "
            f"({1e3 * ref['linearisation_s_median'] / CROC_KNOTS:.3f} ms per knot)."
            if ref
            else "(not run)."
        )
    )
    return out


def write_section(path: Path, text: str) -> None:
    """Replace (or append) this script's section of `path` (see markdown_report)."""
    markdown_report.replace_section(path, SECTION, text)


def crocoddyl_runs(results: dict, s, when: str) -> None:
    """Run Crocoddyl (both robots); keep the run with the lower median solve time (the machine
    is shared: the slower run is the noisier one), and record both."""
    for robot in ("anymal", "anymal_c"):
        c = run_crocoddyl(robot, s.croc_repeats, s.pinned)
        c["per_iteration_cpu_s"] = c["solve_cpu_s_median"] / max(c["iterations"], 1)
        print(
            f"[crocoddyl {robot}, {when}] {c['iterations']} it, {c['solve_s_median'] * 1e3:.1f} "
            f"ms, {c['per_iteration_s_median'] * 1e3:.2f} ms/it, "
            f"{c['per_iteration_cpu_s'] * 1e3:.2f} CPU ms/it",
            flush=True,
        )
        old = results["crocoddyl"].get(robot)
        runs = [*(old["runs_s"] if old else []), c["solve_s_median"]]
        if old is None or c["solve_s_median"] < old["solve_s_median"]:
            results["crocoddyl"][robot] = c
        results["crocoddyl"][robot]["runs_s"] = runs


# ----------------------------------------------------------------------------- main
def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--robot", default="anymal_c")
    p.add_argument("--horizons", default="56,100", help="knot counts, comma separated")
    p.add_argument("--dt", type=float, default=CROC_DT)
    p.add_argument("--substeps", type=int, default=1)
    p.add_argument("--num-sweeps", type=int, default=None,
                   help="the most prox sweeps (default the problem's)")
    p.add_argument("--contact-tolerance", type=float, default=None,
                   help="the impulse solve's tolerance [m/s] (default the problem's)")
    p.add_argument("--fixed-sweeps", action="store_true",
                   help="the paper's fixed sweeps (--num-sweeps of them), no tolerance")
    p.add_argument("--derivatives", choices=("unrolled", "implicit", "compiled"),
                   default="unrolled",
                   help="the impulse solve's derivatives in our knot Jacobians")  # fmt: skip
    p.add_argument("--iterations", type=int, default=30, help="budget from scratch")
    p.add_argument("--split-iterations", type=int, default=5, help="instrumented solve")
    p.add_argument("--warm-iterations", type=int, default=10)
    p.add_argument("--warm-repeats", type=int, default=3)
    p.add_argument("--croc-repeats", type=int, default=10)
    p.add_argument("--skip-crocoddyl", action="store_true")
    p.add_argument("--no-stability", action="store_true", help="skip the 3 s PD rollout check")
    p.add_argument("--no-pin", action="store_true", help="do not pin to core 0")
    p.add_argument("--output", default=str(REPO / "BENCHMARKS.md"))
    p.add_argument("--no-write", action="store_true")
    p.add_argument("--save-json", default=None, help="also save the raw results here")
    p.add_argument(
        "--from-json",
        default=None,
        help="re-render the section from saved results (no measurement); the saved command, "
        "date, load and settings are kept",
    )
    s = p.parse_args(argv)
    s.horizons = tuple(int(h) for h in s.horizons.split(",") if h)
    s.command = " ".join(
        ["python benchmarks/bench_trajopt.py", *(argv if argv is not None else sys.argv[1:])]
    )
    return s


def main(argv=None) -> dict:
    s = parse_args(argv)
    if s.from_json:
        saved = json.loads(Path(s.from_json).read_text())
        results = saved["results"]
        for k, v in saved["settings"].items():
            setattr(s, k, tuple(v) if k == "horizons" else v)
        text = render(results, s)
        print(text)
        if not s.no_write:
            write_section(Path(s.output), text)
        return results
    s.pinned = False
    if not s.no_pin and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {0})  # before JAX creates its thread pools
        s.pinned = True
    s.load_before = os.getloadavg()[0]
    results = {"crocoddyl": {}, "ours": []}
    if not s.skip_crocoddyl:
        crocoddyl_runs(results, s, "before")
    for h in s.horizons:
        results["ours"].append(run_ours(h, s))
    if not s.skip_crocoddyl:
        crocoddyl_runs(results, s, "after")
    if not s.no_stability:
        from trajopt.gaits import make_problem

        probe = make_problem(s.robot, "stand", 0.0, duration=s.dt, dt=s.dt, substeps=s.substeps)
        results["stability"] = pd_stability(probe)
    s.load_after = os.getloadavg()[0]
    s.date = datetime.datetime.now().astimezone().isoformat(timespec="seconds")
    if s.save_json:
        keep = {k: v for k, v in vars(s).items() if k not in ("output", "from_json", "no_write")}
        Path(s.save_json).write_text(json.dumps({"settings": keep, "results": results}))
    text = render(results, s)
    print(text)
    if not s.no_write:
        write_section(Path(s.output), text)
    return results


if __name__ == "__main__":
    main()
