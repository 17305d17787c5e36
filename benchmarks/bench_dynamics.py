"""Rigid-body dynamics benchmark: our JAX and CasADi forward dynamics against Pinocchio.

    python benchmarks/bench_dynamics.py [--robot go2] [--quick] [--output BENCHMARKS.md]

Times, on this machine and in this run (medians over repeats, per-state microseconds):

1. Pinocchio C++ from Python: `pinocchio.aba` and `pinocchio.computeABADerivatives`, one call
   (the reference).
2. JAX forward dynamics (`dynamics.forward_dynamics` (ABA), `dynamics.forward_dynamics_cholesky`)
   jitted, one call and `jax.vmap`-batched, float64 and float32.
3. The JAX Jacobian of forward dynamics with respect to (q in the tangent space, v, tau), the
   three blocks `computeABADerivatives` returns, in several batched layouts.
4. The CasADi `Function` (`casadi_forward_dynamics`) and its Jacobian, called from Python one
   state at a time and through `Function.map(N)`.

Every variant is also checked against Pinocchio on the states it was timed on (max abs error).
The results are printed and written to the `## Rigid-body dynamics` section of
BENCHMARKS.md (other sections are kept).
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import casadi as ca
import jax
import jax.numpy as jnp
import numpy as np
import pinocchio as pin

import dynamics
from dynamics.casadi_functions import casadi_forward_dynamics

sys.path.insert(0, str(Path(__file__).resolve().parent))
import markdown_report  # noqa: E402  (a sibling script module)

SECTION = "## Rigid-body dynamics"
REPO = Path(__file__).resolve().parents[1]
TARGET_RATIO = 3.0


# ----------------------------------------------------------------------------- timing
def time_call(fn, *, repeats: int, target_s: float) -> float:
    """Median over `repeats` of the mean time of one `fn()` call, in seconds.

    `fn` must block until its result is ready. The number of calls per repeat is chosen so a
    repeat takes about `target_s`."""
    fn()  # warm up (compilation happened before)
    t0 = time.perf_counter()
    fn()
    once = time.perf_counter() - t0
    inner = max(1, int(target_s / max(once, 1e-7)))
    if once > 1.0:  # very slow variant: do not spend minutes on it
        repeats = min(repeats, 3)
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        samples.append((time.perf_counter() - t0) / inner)
    return float(np.median(samples))


@dataclass
class Row:
    group: str
    variant: str
    dtype: str
    batch: int
    per_call_us: float
    reference: str  # "aba" or "dABA": which Pinocchio call it is compared with
    max_err: float = float("nan")
    compile_s: float = float("nan")
    note: str = ""
    ratio: float = field(default=float("nan"))

    @property
    def per_state_us(self) -> float:
        return self.per_call_us / self.batch


# ----------------------------------------------------------------------------- states
def make_states(pin_model, n: int, seed: int = 0):
    """`n` random states (q on the manifold, v, tau) as float64 NumPy arrays."""
    rng = np.random.default_rng(seed)
    q0 = pin.neutral(pin_model)
    # reproducible points on the manifold: the neutral pose moved by a random tangent vector
    qs = np.stack(
        [pin.integrate(pin_model, q0, rng.uniform(-1.0, 1.0, pin_model.nv)) for _ in range(n)]
    )
    vs = rng.standard_normal((n, pin_model.nv))
    taus = rng.standard_normal((n, pin_model.nv)) * 5.0
    return qs, vs, taus


def pinocchio_reference(pin_model, qs, vs, taus):
    data = pin_model.createData()
    qdd, jac = [], []
    for q, v, tau in zip(qs, vs, taus, strict=True):
        qdd.append(pin.aba(pin_model, data, q, v, tau).copy())
        pin.computeABADerivatives(pin_model, data, q, v, tau)
        jac.append(np.hstack([data.ddq_dq, data.ddq_dv, data.Minv]))
    return np.stack(qdd), np.stack(jac)


# ----------------------------------------------------------------------------- JAX pieces
def tangent_jacobian_fn(model, fd):
    """`J(q, v, tau) (nv, 3 nv)` = d fd(integrate(q, eps), v, tau) / d(eps, v, tau) at eps = 0."""
    nv = model.nv

    def g(x, q):
        eps, v, tau = x[:nv], x[nv : 2 * nv], x[2 * nv :]
        return fd(model, dynamics.integrate(model, q, eps), v, tau)

    def jac(q, v, tau):
        x = jnp.concatenate([jnp.zeros_like(v), v, tau])
        return jax.jacfwd(g)(x, q)

    def jac_rev(q, v, tau):
        x = jnp.concatenate([jnp.zeros_like(v), v, tau])
        return jax.jacrev(g)(x, q)

    def jac_linearize(q, v, tau):
        # one linearisation, then push the 3 nv identity directions through it
        x = jnp.concatenate([jnp.zeros_like(v), v, tau])
        _, lin = jax.linearize(lambda x: g(x, q), x)
        return jax.vmap(lin, out_axes=1)(jnp.eye(3 * nv, dtype=x.dtype))

    return jac, jac_rev, jac_linearize


def jax_fd_variants(model):
    """name -> per-state function (q, v, tau) -> qdd."""
    return {
        "aba": lambda q, v, t: dynamics.forward_dynamics(model, q, v, t),
        "cholesky": lambda q, v, t: dynamics.forward_dynamics_cholesky(model, q, v, t),
    }


def jax_jac_layouts(model, few: bool):
    """name -> (batched function (Q, V, T) -> J (B, nv, 3nv), single-state function or None,
    largest batch to time it at).

    Reverse mode (18 cotangents) measured far faster here than forward mode (54 tangents), so
    `few` keeps the reverse-mode layouts only."""
    jac, jac_rev, jac_lin = tangent_jacobian_fn(model, dynamics.forward_dynamics)
    big = 1 << 30
    layouts = {
        "lax.map(jacrev)": (
            lambda Q, V, T: jax.lax.map(lambda a: jac_rev(*a), (Q, V, T)),
            jac_rev,
            big,
        ),
        # vmap(jacrev) at batch 1024 hung (a process asleep on a futex, no CPU) in two full
        # runs here, and alone it took about 530 us/state against about 90 at batch 64
        "vmap(jacrev)": (jax.vmap(jac_rev), None, 64),
    }
    if few:
        return layouts
    layouts.update(
        {
            "lax.map(jacfwd)": (
                lambda Q, V, T: jax.lax.map(lambda a: jac(*a), (Q, V, T)),
                jac,
                big,
            ),
            # vmap of jacfwd scales badly (ENVIRONMENT.md): time it at small batches only
            "vmap(jacfwd)": (jax.vmap(jac), None, 64),
            "lax.map(linearize+vmap(eye))": (
                lambda Q, V, T: jax.lax.map(lambda a: jac_lin(*a), (Q, V, T)),
                jac_lin,
                big,
            ),
            "lax.map(jacrev, batch_size=16)": (
                lambda Q, V, T: jax.lax.map(lambda a: jac_rev(*a), (Q, V, T), batch_size=16),
                None,
                big,
            ),
        }
    )
    return layouts


def _compile(fn, *args):
    jitted = jax.jit(fn)
    t0 = time.perf_counter()
    compiled = jitted.lower(*args).compile()
    return compiled, time.perf_counter() - t0


# ----------------------------------------------------------------------------- CasADi pieces
def casadi_tangent_jacobian(model, f: ca.Function) -> ca.Function:
    """`J(q, v, tau) (nv, 3 nv)`, the tangent-space Jacobian, built symbolically.

    Only first order matters at eps = 0, so `integrate(q, eps)` is replaced by its linearisation
    `q + dq/deps eps`: base position `R(quat) eps_lin`, quaternion `0.5 L(quat)[:, :3] eps_ang`
    (xyzw, right multiplication by `exp(eps_ang)`), joints `eps_joints`."""
    nq, nv = model.nq, model.nv
    q, v, tau, eps = (ca.SX.sym(n, k) for n, k in (("q", nq), ("v", nv), ("tau", nv), ("e", nv)))
    if model.has_free_flyer:
        x, y, z, w = q[3], q[4], q[5], q[6]
        rot = ca.vertcat(
            ca.horzcat(1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)),
            ca.horzcat(2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)),
            ca.horzcat(2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)),
        )
        av = q[3:6]
        skew = ca.vertcat(
            ca.horzcat(0, -av[2], av[1]), ca.horzcat(av[2], 0, -av[0]), ca.horzcat(-av[1], av[0], 0)
        )
        dquat_vec = 0.5 * (w * ca.SX.eye(3) + skew) @ eps[3:6]
        dquat_w = -0.5 * ca.dot(av, eps[3:6])
        q_plus = q + ca.vertcat(rot @ eps[0:3], dquat_vec, dquat_w, eps[6:])
    else:
        q_plus = q + eps
    qdd = f(q_plus, v, tau)
    jac = ca.jacobian(qdd, ca.vertcat(eps, v, tau))
    jac = ca.substitute(jac, eps, ca.DM.zeros(nv))
    return ca.Function("fd_tangent_jacobian", [q, v, tau], [jac], ["q", "v", "tau"], ["J"])


# ----------------------------------------------------------------------------- the benchmark
@dataclass
class Settings:
    robot: str = "go2"
    quick: bool = False
    batches: tuple = (1, 64, 1024)
    jac_batches: tuple = (1, 64, 1024)
    dtypes: tuple = ("float64", "float32")
    repeats: int = 7
    target_s: float = 0.2
    output: Path | None = REPO / "BENCHMARKS.md"
    command: str = ""
    load_start: float = float("nan")
    load_end: float = float("nan")


def run(s: Settings, log=print) -> list[Row]:
    robot = dynamics.load_pinocchio(s.robot)
    pm = robot.model
    model = dynamics.load_robot(s.robot)
    nmax = max(max(s.batches), max(s.jac_batches))
    qs, vs, taus = make_states(pm, nmax)
    ref_qdd, ref_jac = pinocchio_reference(pm, qs, vs, taus)
    rows: list[Row] = []
    s.load_start = os.getloadavg()[0]

    def add(row: Row):
        rows.append(row)
        log(
            f"  {row.group:8s} {row.variant:34s} {row.dtype:8s} B={row.batch:5d} "
            f"{row.per_call_us:12.1f} us/call {row.per_state_us:9.2f} us/state "
            f"err={row.max_err:.1e} compile={row.compile_s:.1f}s {row.note}"
        )

    # 1. Pinocchio -------------------------------------------------------------------------
    log(f"Pinocchio {pin.__version__} ({s.robot}, nq={pm.nq}, nv={pm.nv})")
    data = pm.createData()
    q0, v0, t0 = qs[0], vs[0], taus[0]
    t_aba = time_call(lambda: pin.aba(pm, data, q0, v0, t0), repeats=s.repeats, target_s=s.target_s)
    t_daba = time_call(
        lambda: pin.computeABADerivatives(pm, data, q0, v0, t0),
        repeats=s.repeats,
        target_s=s.target_s,
    )
    add(Row("pinocchio", "aba", "float64", 1, t_aba * 1e6, "aba", 0.0))
    add(Row("pinocchio", "computeABADerivatives", "float64", 1, t_daba * 1e6, "dABA", 0.0))

    # 2. JAX forward dynamics ----------------------------------------------------------------
    log(f"JAX {jax.__version__} forward dynamics")
    for dtype_name in s.dtypes:
        dtype = jnp.dtype(dtype_name)
        m = model.astype(dtype)
        fd_variants = jax_fd_variants(m)
        if s.quick:
            fd_variants = {"aba": fd_variants["aba"]}
        for name, f in fd_variants.items():
            batch_only = False
            if not batch_only and not s.quick and 1 in s.batches:
                args = tuple(jnp.asarray(a[0], dtype) for a in (qs, vs, taus))
                c, ct = _compile(f, *args)
                out = np.asarray(c(*args))
                err = float(np.max(np.abs(out - ref_qdd[0])))
                t = time_call(
                    lambda c=c, args=args: c(*args).block_until_ready(),
                    repeats=s.repeats,
                    target_s=s.target_s,
                )
                add(Row("jax fd", f"jit {name} (single)", dtype_name, 1, t * 1e6, "aba", err, ct))
            for b in s.batches:
                args = tuple(jnp.asarray(a[:b], dtype) for a in (qs, vs, taus))
                fb = f if batch_only else jax.vmap(f)
                c, ct = _compile(fb, *args)
                out = np.asarray(c(*args))
                err = float(np.max(np.abs(out - ref_qdd[:b])))
                t = time_call(
                    lambda c=c, args=args: c(*args).block_until_ready(),
                    repeats=s.repeats,
                    target_s=s.target_s,
                )
                label = name if batch_only else f"vmap {name}"
                add(Row("jax fd", label, dtype_name, b, t * 1e6, "aba", err, ct))

    # 3. JAX Jacobians -----------------------------------------------------------------------
    log("JAX Jacobian of forward dynamics (d/dq tangent, d/dv, d/dtau)")
    for dtype_name in s.dtypes[:1] if s.quick else s.dtypes:
        dtype = jnp.dtype(dtype_name)
        m = model.astype(dtype)
        layouts = jax_jac_layouts(m, s.quick or dtype_name != "float64")
        if s.quick:
            layouts = {"lax.map(jacrev)": layouts["lax.map(jacrev)"]}
        single_done = set()
        for name, (fb, f1, bmax) in layouts.items():
            if f1 is not None and not s.quick and 1 in s.jac_batches and f1 not in single_done:
                single_done.add(f1)
                args = tuple(jnp.asarray(a[0], dtype) for a in (qs, vs, taus))
                c, ct = _compile(f1, *args)
                err = float(np.max(np.abs(np.asarray(c(*args)) - ref_jac[0])))
                t = time_call(
                    lambda c=c, args=args: c(*args).block_until_ready(),
                    repeats=s.repeats,
                    target_s=s.target_s,
                )
                label = name.replace("lax.map(", "jit(").replace("batched ", "")
                add(Row("jax jac", f"{label} (single)", dtype_name, 1, t * 1e6, "dABA", err, ct))
            for b in s.jac_batches:
                if b > bmax:
                    log(f"  skip {name} at batch {b} (scales badly)")
                    continue
                args = tuple(jnp.asarray(a[:b], dtype) for a in (qs, vs, taus))
                c, ct = _compile(fb, *args)
                t0_ = time.perf_counter()
                out = np.asarray(c(*args))
                first = time.perf_counter() - t0_
                err = float(np.max(np.abs(out - ref_jac[:b])))
                if first > 20.0:  # do not spend minutes on a layout that scales badly
                    t, note = first, "1 call only (too slow)"
                else:
                    t = time_call(
                        lambda c=c, args=args: c(*args).block_until_ready(),
                        repeats=s.repeats,
                        target_s=s.target_s,
                    )
                    note = ""
                add(Row("jax jac", name, dtype_name, b, t * 1e6, "dABA", err, ct, note))

    # 4. CasADi -------------------------------------------------------------------------------
    log(f"CasADi {ca.__version__}")
    t0_ = time.perf_counter()
    f = casadi_forward_dynamics(model)
    jf = casadi_tangent_jacobian(model, f)
    build_s = time.perf_counter() - t0_
    err = float(np.max(np.abs(np.asarray(f(q0, v0, t0)).ravel() - ref_qdd[0])))
    t = time_call(lambda: f(q0, v0, t0), repeats=s.repeats, target_s=s.target_s)
    add(Row("casadi", "Function call (single)", "float64", 1, t * 1e6, "aba", err, build_s))
    err = float(np.max(np.abs(np.asarray(jf(q0, v0, t0)) - ref_jac[0])))
    t = time_call(lambda: jf(q0, v0, t0), repeats=s.repeats, target_s=s.target_s)
    add(Row("casadi", "jacobian Function (single)", "float64", 1, t * 1e6, "dABA", err))
    for b in s.batches:
        if b == 1:
            continue
        fm = f.map(b)
        qT, vT, tT = qs[:b].T.copy(), vs[:b].T.copy(), taus[:b].T.copy()
        err = float(np.max(np.abs(np.asarray(fm(qT, vT, tT)).T - ref_qdd[:b])))
        t = time_call(lambda fm=fm, a=(qT, vT, tT): fm(*a), repeats=s.repeats, target_s=s.target_s)
        add(Row("casadi", f"Function.map({b})", "float64", b, t * 1e6, "aba", err))
    for b in s.jac_batches:
        if b == 1:
            continue
        jm = jf.map(b)
        qT, vT, tT = qs[:b].T.copy(), vs[:b].T.copy(), taus[:b].T.copy()
        out = np.asarray(jm(qT, vT, tT)).reshape(model.nv, b, 3 * model.nv).transpose(1, 0, 2)
        err = float(np.max(np.abs(out - ref_jac[:b])))
        t = time_call(lambda jm=jm, a=(qT, vT, tT): jm(*a), repeats=s.repeats, target_s=s.target_s)
        add(Row("casadi", f"jacobian Function.map({b})", "float64", b, t * 1e6, "dABA", err))

    s.load_end = os.getloadavg()[0]
    for r in rows:
        r.ratio = r.per_state_us / (t_aba * 1e6 if r.reference == "aba" else t_daba * 1e6)
    return rows


# ----------------------------------------------------------------------------- report
def _cpu_name() -> str:
    return markdown_report.cpu_name()


def _best(rows, group, reference, batch, dtype=None):
    cands = [
        r
        for r in rows
        if r.group == group
        and r.reference == reference
        and r.batch == batch
        and (dtype is None or r.dtype == dtype)
    ]
    return min(cands, key=lambda r: r.per_state_us) if cands else None


def targets(rows, batch: int) -> list[str]:
    aba = next(r for r in rows if r.variant == "aba" and r.group == "pinocchio")
    daba = next(r for r in rows if r.variant == "computeABADerivatives")
    lines = []
    for label, group, ref, base in (
        ("JAX forward dynamics", "jax fd", "aba", aba),
        ("JAX Jacobian", "jax jac", "dABA", daba),
    ):
        for dtype in ("float64", "float32"):
            best = _best(rows, group, ref, batch, dtype)
            if best is None:
                continue
            ok = best.ratio <= TARGET_RATIO
            lines.append(
                f"- {label} per state at batch {batch} ({dtype})"
                + f": best `{best.variant}` {best.per_state_us:.2f} us = {best.ratio:.2f}x "
                f"Pinocchio `{base.variant}` ({base.per_call_us:.2f} us); target <= "
                f"{TARGET_RATIO:.0f}x: **{'met' if ok else 'NOT met'}**"
            )
    return lines


def render(rows: list[Row], s: Settings) -> str:
    batch = max(s.batches)
    lines = [
        SECTION,
        "",
        "Written by `benchmarks/bench_dynamics.py`.",
        "",
        f"- Command: `{s.command}`",
        f"- Date: {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}",
        f"- CPU: {_cpu_name()}, {os.cpu_count()} logical cores; Python {platform.python_version()}",
        f"- Versions: jax {jax.__version__}, jaxlib {jax.lib.__version__ if hasattr(jax.lib, '__version__') else jax.__version__}, "  # noqa: E501
        f"pin {pin.__version__}, casadi {ca.__version__}, numpy {np.__version__}",
        f"- 1-minute load average at start / end: {s.load_start:.2f} / {s.load_end:.2f}",
        f"- Robot: {s.robot}; {s.repeats} repeats, median of the per-call mean; "
        "per state = per call / batch; ratio = per state / Pinocchio's single call "
        "(`aba`; Jacobians: `computeABADerivatives`); err = max abs difference from Pinocchio.",
        "- JAX: jitted with the model closed over, timed to `block_until_ready`, compilation in "
        "its own column. Jacobian: d/d(eps, v, tau) of `fd(integrate(q, eps), v, tau)` at "
        "eps = 0, against `[ddq_dq, ddq_dv, Minv]`.",
        "",
        "### Targets",
        "",
        *targets(rows, batch),
        "",
        "### Results",
        "",
        "| group | variant | dtype | batch | us/call | us/state | ratio | max err | compile s "
        "| note |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        comp = "" if np.isnan(r.compile_s) else f"{r.compile_s:.1f}"
        lines.append(
            f"| {r.group} | {r.variant} | {r.dtype} | {r.batch} | {r.per_call_us:.1f} | "
            f"{r.per_state_us:.2f} | {r.ratio:.2f} | {r.max_err:.1e} | {comp} | {r.note} |"
        )
    return "\n".join(lines) + "\n"


def write_section(path: Path, text: str) -> None:
    """Replace (or append) this script's section of `path` (see markdown_report)."""
    markdown_report.replace_section(path, SECTION, text)


def parse_args(argv=None) -> Settings:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--robot", default="go2", choices=dynamics.available_robots())
    p.add_argument(
        "--quick",
        action="store_true",
        help="smoke run: tiny batches, float64 ABA only, one Jacobian layout",
    )
    p.add_argument("--batches", type=str, default=None, help="comma list, e.g. 1,64,1024")
    p.add_argument("--repeats", type=int, default=None)
    p.add_argument(
        "--output",
        type=str,
        default=str(REPO / "BENCHMARKS.md"),
        help="markdown file to update ('' to skip)",
    )
    a = p.parse_args(argv)
    s = Settings(robot=a.robot, quick=a.quick)
    if a.quick:
        s.batches, s.jac_batches, s.dtypes = (4,), (2,), ("float64",)
        s.repeats, s.target_s = 3, 0.02
    if a.batches:
        s.batches = s.jac_batches = tuple(int(b) for b in a.batches.split(","))
    if a.repeats:
        s.repeats = a.repeats
    s.output = Path(a.output) if a.output else None
    s.command = "python benchmarks/bench_dynamics.py" + (" " + " ".join(argv) if argv else "")
    return s


def main(argv=None) -> list[Row]:
    if argv is None:
        argv = sys.argv[1:]
    s = parse_args(argv)
    rows = run(s)
    text = render(rows, s)
    markdown_report.publish(s.output, SECTION, text)
    return rows


if __name__ == "__main__":
    main()
