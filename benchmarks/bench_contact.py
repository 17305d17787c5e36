"""Contact time-stepper benchmark: `contact.step` throughput and gradients vs MuJoCo.

    python benchmarks/bench_contact.py [--robot go2] [--quick] [--output BENCHMARKS.md]

In one run on one machine (medians over repeats):

1. `contact.step` of a quadruped standing on flat ground under the joint PD controller
   (`dynamics.actuator.standing_controller`, four feet in contact), for each contact model
   ("hard", "smooth", "penalty") and dtype (float64, float32): one state (a jitted `lax.scan`
   of 500 steps, so the ~6 us jit dispatch does not dominate) and `jax.vmap` over batches of
   1, 256 and 4096 states (a scan of `8192 / batch` steps, clamped to [2, 500]).
2. The reverse-mode gradient of a 1 s rollout (500 steps): `loss(u) = sum_t |z_t - z*|^2 +
   1e-6 |u|^2` with `tau_t = PD(x_t) + u_t`, `jax.grad` w.r.t. the whole control sequence
   `u (500, nu)`, against the same rollout's forward pass (the jitted loss).
3. MuJoCo (C, one thread) on the MJCF generated from the same model (`dynamics.mjcf`), the
   same PD law evaluated in C by its actuators (gain `Kp`, bias `-Kp q - Kd qdot`, force
   clipped to the effort limits), `mujoco.mj_step(m, d, nstep=N)` so Python is out of the loop.

Cores: JAX's CPU backend may use every core for one computation. Each JAX row records its CPU
utilisation (process CPU time / wall time over the timed calls) and reports steps/s per core
as steps per CPU-second (steps/s divided by that; below 1 other processes took a share of the
core), the same for MuJoCo. Unless `--no-pinned`, the batched smooth rows are also rerun in a
subprocess pinned to one core (`taskset -c 0`), the direct one-core number.

Targets (not tests): batched `smooth` steps/s per core >= MuJoCo's one-thread steps/s;
the gradient of a rollout costs at most 4x the rollout.

The results are printed and written to the `## Contact step` section of BENCHMARKS.md
(other sections are kept; the file is re-read right before writing).
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(REPO))

import contact  # noqa: E402
import dynamics  # noqa: E402
from dynamics.actuator import default_gains, standing_controller  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import markdown_report  # noqa: E402  (a sibling script module)

SECTION = "## Contact step"
CONTACTS = ("hard", "smooth", "penalty")
GRAD_TARGET = 4.0  # gradient of a rollout <= 4x the rollout
THROUGHPUT_STEPS = 8192  # steps per batched call (batch x scan length), before clamping


# ----------------------------------------------------------------------------- settings
@dataclass
class Settings:
    robot: str = "go2"
    quick: bool = False
    contacts: tuple = CONTACTS
    dtypes: tuple = ("float64", "float32")
    batches: tuple = (1, 256, 4096)
    single_steps: int = 500
    grad_steps: int = 500
    # (contact, dtype) pairs whose rollout gradient is timed (each compiles for ~0.5-1 min)
    grads: tuple = (
        ("hard", "float64"),
        ("smooth", "float64"),
        ("penalty", "float64"),
        ("smooth", "float32"),
    )
    mujoco_steps: int = 5000
    repeats: int = 5
    target_s: float = 0.3
    pinned: bool = True
    pinned_worker: bool = False
    output: Path | None = None
    json_out: Path | None = None
    command: str = ""
    load_before: float = float("nan")  # 1-minute load average, other processes included
    load_after: float = float("nan")


@dataclass
class Row:
    group: str  # "step", "step (1 core)", "mujoco", "grad"
    contact: str
    dtype: str
    batch: int  # 0: one state, no vmap
    steps_per_call: int
    seconds_per_call: float
    cpu_util: float = 1.0  # process CPU time / wall time while timing
    compile_s: float = float("nan")
    forward_s: float = float("nan")  # grad rows: the forward rollout's time per call
    note: str = ""

    @property
    def steps_per_s(self) -> float:
        return self.steps_per_call / self.seconds_per_call

    @property
    def steps_per_s_per_core(self) -> float:
        """Steps per CPU-second of this process: corrects both for JAX using more than one
        core and for other processes taking a share of the core (`cpu_util < 1`)."""
        return self.steps_per_s / self.cpu_util if self.cpu_util > 0 else self.steps_per_s


# ----------------------------------------------------------------------------- timing
def time_call(fn, *, repeats: int, target_s: float) -> tuple[float, float]:
    """`(seconds per call, CPU utilisation)`: median over `repeats` of the mean time of one
    `fn()` call (which must block until its result is ready), and the process CPU time over
    the wall time of all timed calls. The number of calls per repeat makes a repeat take about
    `target_s`."""
    fn()  # warm up
    t0 = time.perf_counter()
    fn()
    once = time.perf_counter() - t0
    inner = max(1, int(target_s / max(once, 1e-7)))
    if once > 1.0:
        repeats = min(repeats, 3)
    samples = []
    c0, w0 = time.process_time(), time.perf_counter()
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        samples.append((time.perf_counter() - t0) / inner)
    c1, w1 = time.process_time(), time.perf_counter()
    cpu = c1 - c0
    return float(np.median(samples)), float(cpu / (w1 - w0))


def _block(x):
    return jax.block_until_ready(x)


# ----------------------------------------------------------------------------- JAX setup
def _cast(tree, dtype):
    """Every floating leaf (arrays and Python floats) of a pytree as `dtype`."""

    def cast(x):
        if isinstance(x, float) or (hasattr(x, "dtype") and jnp.issubdtype(x.dtype, jnp.floating)):
            return jnp.asarray(x, dtype=dtype)
        return x

    return jax.tree_util.tree_map(cast, tree)


def setup(robot: str, dtype: str):
    """Model, params, controller and the standing state, all in `dtype`."""
    dt = jnp.dtype(dtype)
    model = dynamics.load_robot(robot)
    if dt != jnp.float64:
        model = model.astype(dt)
    params = _cast(contact.StepParams(), dt)
    kp, kd = default_gains(model)
    controller = standing_controller(model, kp, kd)
    state = dynamics.State(jnp.asarray(model.q_standing, dtype=dt), jnp.zeros(model.nv, dtype=dt))
    return model, params, controller, state


def batch_states(model, state, batch: int, seed: int = 0):
    """`batch` standing states with joint angles perturbed by up to 0.02 rad."""
    rng = np.random.default_rng(seed)
    q = np.tile(np.asarray(state.q, dtype=float), (batch, 1))
    q[:, model.nq - model.nu :] += rng.uniform(-0.02, 0.02, (batch, model.nu))
    v = np.zeros((batch, model.nv))
    return dynamics.State(jnp.asarray(q, state.q.dtype), jnp.asarray(v, state.v.dtype))


def scan_length(batch: int, single_steps: int) -> int:
    if batch == 0:
        return single_steps
    return int(np.clip(THROUGHPUT_STEPS // batch, 2, single_steps))


def bench_step(s: Settings, contact_model: str, dtype: str, batch: int) -> Row:
    model, params, controller, state = setup(s.robot, dtype)
    n = scan_length(batch, s.single_steps)

    def run(x):
        final, _ = contact.simulate(model, params, x, controller, n, contact=contact_model)
        return final

    if batch == 0:
        fn, x = jax.jit(run), state
    else:
        fn, x = jax.jit(jax.vmap(run)), batch_states(model, state, batch)
    t0 = time.perf_counter()
    out = _block(fn(x))
    compile_s = time.perf_counter() - t0
    if not bool(jnp.all(jnp.isfinite(out.q))):
        raise FloatingPointError(f"non-finite state: {contact_model} {dtype} batch {batch}")
    sec, util = time_call(lambda: _block(fn(x)), repeats=s.repeats, target_s=s.target_s)
    group = "step (1 core)" if s.pinned_worker else "step"
    return Row(
        group,
        contact_model,
        dtype,
        batch,
        max(batch, 1) * n,
        sec,
        util,
        compile_s,
        note=f"scan {n}",
    )


def rollout_loss_fn(model, params, controller, state, contact_model):
    """`loss(u)`: 1 s closed-loop rollout with feed-forward `u (T, nu)` on top of the PD."""
    z_target = state.q[2]

    def loss(u):
        def body(x, u_t):
            x_next, _ = contact.step(model, params, x, controller(x) + u_t, contact=contact_model)
            return x_next, (x_next.q[2] - z_target) ** 2

        final, heights = jax.lax.scan(body, state, u)
        return jnp.sum(heights) + jnp.sum(final.v**2) * 1e-3 + 1e-6 * jnp.sum(u**2)

    return loss


def bench_grad(s: Settings, contact_model: str, dtype: str) -> Row:
    model, params, controller, state = setup(s.robot, dtype)
    loss = rollout_loss_fn(model, params, controller, state, contact_model)
    rng = np.random.default_rng(1)
    u = jnp.asarray(rng.normal(scale=0.5, size=(s.grad_steps, model.nu)), dtype=state.q.dtype)
    forward = jax.jit(loss)
    grad = jax.jit(jax.grad(loss))
    _block(forward(u))
    t0 = time.perf_counter()
    g = _block(grad(u))
    compile_s = time.perf_counter() - t0
    if not bool(jnp.all(jnp.isfinite(g))):
        raise FloatingPointError(f"non-finite gradient: {contact_model} {dtype}")
    fwd_s, _ = time_call(lambda: _block(forward(u)), repeats=s.repeats, target_s=s.target_s)
    grad_s, util = time_call(lambda: _block(grad(u)), repeats=s.repeats, target_s=s.target_s)
    return Row(
        "grad",
        contact_model,
        dtype,
        0,
        s.grad_steps,
        grad_s,
        util,
        compile_s,
        forward_s=fwd_s,
        note=f"rollout {s.grad_steps} steps",
    )


# ----------------------------------------------------------------------------- MuJoCo
def mujoco_pd_model(model, timestep: float):
    """The generated MuJoCo model with its motors turned into the clipped joint PD in C:
    `force = clip(Kp ctrl - Kp q - Kd qdot, -effort, effort)`, `ctrl` = standing angles."""
    import mujoco

    from dynamics.mjcf import mujoco_model, qpos_from_q

    kp, kd = default_gains(model)
    mj = mujoco_model(model, timestep=timestep, actuators="motor")
    mj.actuator_gaintype[:] = mujoco.mjtGain.mjGAIN_FIXED
    mj.actuator_gainprm[:, 0] = kp
    mj.actuator_biastype[:] = mujoco.mjtBias.mjBIAS_AFFINE
    mj.actuator_biasprm[:, :3] = [0.0, -kp, -kd]
    effort = np.asarray(model.effort_limit, dtype=float)[model.nv - model.nu :]
    mj.actuator_ctrllimited[:] = 0
    mj.actuator_forcelimited[:] = 1
    mj.actuator_forcerange[:] = np.stack([-effort, effort], axis=1)
    qpos = qpos_from_q(model, np.asarray(model.q_standing, dtype=float))
    return mj, qpos


def bench_mujoco(s: Settings) -> list[Row]:
    import mujoco

    model = dynamics.load_robot(s.robot)
    mj, qpos = mujoco_pd_model(model, float(contact.StepParams().dt))
    d = mujoco.MjData(mj)

    def reset():
        mujoco.mj_resetData(mj, d)
        d.qpos[:] = qpos
        d.ctrl[:] = qpos[7:]

    reset()
    mujoco.mj_step(mj, d, nstep=500)  # settle once, check it stands on four feet
    if not (np.all(np.isfinite(d.qpos)) and d.ncon == model.nfeet):
        raise RuntimeError(f"MuJoCo {s.robot} did not stand: ncon = {d.ncon}")
    settled = (d.qpos.copy(), d.qvel.copy())

    def run():
        d.qpos[:], d.qvel[:] = settled
        mujoco.mj_step(mj, d, nstep=s.mujoco_steps)

    sec, util = time_call(run, repeats=s.repeats, target_s=s.target_s)
    rows = [
        Row(
            "mujoco",
            "soft (MuJoCo)",
            "float64",
            0,
            s.mujoco_steps,
            sec,
            util,
            note=f"mj_step(nstep={s.mujoco_steps}), PD in C, ncon {d.ncon}",
        )
    ]

    # For context: one Python call per step (what a Python control loop pays).
    n_py = max(50, s.mujoco_steps // 10)

    def run_py():
        d.qpos[:], d.qvel[:] = settled
        for _ in range(n_py):
            mujoco.mj_step(mj, d)

    sec, util = time_call(run_py, repeats=s.repeats, target_s=s.target_s)
    rows.append(
        Row(
            "mujoco",
            "soft (MuJoCo)",
            "float64",
            0,
            n_py,
            sec,
            util,
            note="mj_step from a Python loop, one call per step",
        )
    )
    reset()
    return rows


# ----------------------------------------------------------------------------- pinned run
def pinned_rows(s: Settings) -> list[Row]:
    """Rerun the batched smooth rows in a subprocess pinned to core 0 (`taskset -c 0`)."""
    if not shutil.which("taskset") or "smooth" not in s.contacts:
        return []
    batches = [b for b in s.batches if b > 1] or list(s.batches)
    out = Path(os.environ.get("TMPDIR", "/tmp")) / f"bench_contact_pinned_{os.getpid()}.json"
    cmd = [
        "taskset",
        "-c",
        "0",
        sys.executable,
        str(Path(__file__).resolve()),
        "--pinned-worker",
        "--robot",
        s.robot,
        "--contacts",
        "smooth",
        "--dtypes",
        ",".join(s.dtypes),
        "--batches",
        ",".join(map(str, batches)),
        "--repeats",
        str(s.repeats),
        "--output",
        "",
        "--json",
        str(out),
    ]
    print("+", " ".join(cmd), flush=True)
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        print(proc.stdout, proc.stderr, sep="\n")
        return []
    rows = [Row(**r) for r in json.loads(out.read_text())]
    out.unlink()
    return rows


# ----------------------------------------------------------------------------- run
def run(s: Settings) -> list[Row]:
    rows: list[Row] = []
    s.load_before = os.getloadavg()[0]

    def add(row: Row):
        rows.append(row)
        print(fmt_row(row), flush=True)

    if not s.pinned_worker:
        for row in bench_mujoco(s):
            add(row)
    for dtype in s.dtypes:
        for c in s.contacts:
            for batch in ((0,) if not s.pinned_worker else ()) + tuple(s.batches):
                add(bench_step(s, c, dtype, batch))
    if s.pinned_worker:
        return rows
    for c, dtype in s.grads:
        add(bench_grad(s, c, dtype))
    if s.pinned:
        for row in pinned_rows(s):
            add(row)
    s.load_after = os.getloadavg()[0]
    return rows


def fmt_row(r: Row) -> str:
    batch = "single" if r.batch == 0 else f"vmap {r.batch}"
    extra = f"  grad/fwd {r.seconds_per_call / r.forward_s:.2f}" if r.group == "grad" else ""
    return (
        f"{r.group:14s} {r.contact:14s} {r.dtype:8s} {batch:10s} "
        f"{r.steps_per_s:12.0f} steps/s  {r.steps_per_s_per_core:12.0f} /core  "
        f"cpu {r.cpu_util:.2f}  compile {r.compile_s:5.1f} s{extra}  {r.note}"
    )


# ----------------------------------------------------------------------------- report
def _cpu_name() -> str:
    return markdown_report.cpu_name()


def _versions() -> str:
    return markdown_report.versions("jax", "jaxlib", "mujoco", "numpy")


def targets(rows: list[Row]) -> list[str]:
    out = []
    mj = next((r for r in rows if r.group == "mujoco"), None)
    batched = [
        r for r in rows if r.contact == "smooth" and r.batch > 1 and r.group.startswith("step")
    ]
    if mj is not None and batched:
        best = max(batched, key=lambda r: r.steps_per_s_per_core)
        ratio = best.steps_per_s_per_core / mj.steps_per_s_per_core
        how = (
            "pinned to one core with taskset"
            if best.group == "step (1 core)"
            else f"steps per CPU-second, CPU utilisation {best.cpu_util:.2f}"
        )
        out.append(
            f"- Batched `smooth` steps/s per core >= MuJoCo one thread: "
            f"**{'met' if ratio >= 1 else 'not met'}**. Best: {best.dtype}, vmap {best.batch}, "
            f"{best.steps_per_s_per_core:,.0f} steps/s per core ({how}) vs MuJoCo "
            f"{mj.steps_per_s_per_core:,.0f} steps/s: ratio {ratio:.2f}."
        )
        for dtype in sorted({r.dtype for r in batched} - {best.dtype}):
            sub = [r for r in batched if r.dtype == dtype]
            b = max(sub, key=lambda r: r.steps_per_s_per_core)
            out.append(
                f"  - {dtype}: best vmap {b.batch} ({b.group}), "
                f"{b.steps_per_s_per_core / mj.steps_per_s_per_core:.2f}x MuJoCo per core."
            )
    grads = [r for r in rows if r.group == "grad"]
    if grads:
        worst = max(r.seconds_per_call / r.forward_s for r in grads)
        out.append(
            f"- Reverse-mode gradient of a {grads[0].steps_per_call}-step rollout <= "
            f"{GRAD_TARGET:g}x the rollout: **{'met' if worst <= GRAD_TARGET else 'not met'}** "
            f"(worst ratio {worst:.2f}; "
            + ", ".join(
                f"{r.contact} {r.dtype} {r.seconds_per_call / r.forward_s:.2f}" for r in grads
            )
            + ")."
        )
    return out


def render(rows: list[Row], s: Settings) -> str:
    mj = next((r for r in rows if r.group == "mujoco"), None)
    mj_rate = mj.steps_per_s_per_core if mj is not None else float("nan")
    lines = [
        SECTION,
        "",
        "Written by `benchmarks/bench_contact.py`.",
        "",
        f"- Command: `{s.command}`",
        f"- Date: {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}",
        f"- CPU: {_cpu_name()}, {os.cpu_count()} logical cores; 1-min load average "
        f"{s.load_before:.2f} before, {s.load_after:.2f} after",
        f"- Versions: {_versions()}",
        f"- Robot: {s.robot} standing on flat ground under the joint PD "
        f"(`standing_controller`, gains {default_gains(dynamics.load_robot(s.robot))}), four "
        "feet in contact, dt = 2 ms, 20 Gauss-Seidel sweeps (hard/smooth); "
        f"{s.repeats} repeats, medians of the per-call mean, compilation in its own column.",
        "- `single`: a jitted `lax.scan` of steps on one state; `vmap B`: that scan over B "
        "states (scan length in the note); steps/s counts state-steps. `cpu` = process CPU "
        "time / wall time; `per core` = steps/s / cpu; `xMuJoCo` = per-core steps/s over "
        "MuJoCo's (one thread, `mj_step(nstep=N)`, the PD in C). `JAX, 1 core` rows ran "
        "pinned with `taskset -c 0`.",
        "- Gradient: `jax.grad` of a scalar loss of a 1 s closed-loop rollout (PD + feed-forward "
        "u, 500 steps) w.r.t. u (500 x 12); `fwd ms` the jitted loss alone.",
        "",
        "### Targets",
        "",
        *targets(rows),
        "",
        "### Step throughput",
        "",
        "| engine | contact | dtype | batch | steps/s | cpu | steps/s per core | xMuJoCo "
        "| us/step/core | compile s | note |",
        "|---|---|---|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        if r.group == "grad":
            continue
        batch = "single" if r.batch == 0 else f"vmap {r.batch}"
        comp = "" if np.isnan(r.compile_s) else f"{r.compile_s:.1f}"
        engine = {"mujoco": "MuJoCo C", "step": "JAX", "step (1 core)": "JAX, 1 core"}[r.group]
        lines.append(
            f"| {engine} | {r.contact} | {r.dtype} | {batch} | {r.steps_per_s:,.0f} | "
            f"{r.cpu_util:.2f} | {r.steps_per_s_per_core:,.0f} | "
            f"{r.steps_per_s_per_core / mj_rate:.2f} | {1e6 / r.steps_per_s_per_core:.1f} | "
            f"{comp} | {r.note} |"
        )
    grads = [r for r in rows if r.group == "grad"]
    if grads:
        lines += [
            "",
            "### Reverse-mode gradient of a 1 s rollout",
            "",
            "| contact | dtype | fwd ms | grad ms | grad / fwd | fwd steps/s | cpu (grad) "
            "| compile s (grad) |",
            "|---|---|---:|---:|---:|---:|---:|---:|",
        ]
        for r in grads:
            lines.append(
                f"| {r.contact} | {r.dtype} | {1e3 * r.forward_s:.1f} | "
                f"{1e3 * r.seconds_per_call:.1f} | {r.seconds_per_call / r.forward_s:.2f} | "
                f"{r.steps_per_call / r.forward_s:,.0f} | {r.cpu_util:.2f} | "
                f"{r.compile_s:.1f} |"
            )
    return "\n".join(lines) + "\n"


def write_section(path: Path, text: str) -> None:
    """Replace (or append) this script's section of `path` (see markdown_report)."""
    markdown_report.replace_section(path, SECTION, text)


def _csv(kind):
    return lambda text: tuple(kind(x) for x in text.split(",") if x)


def parse_args(argv=None) -> Settings:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--robot", default="go2", choices=dynamics.available_robots())
    p.add_argument(
        "--quick",
        action="store_true",
        help="smoke run: smooth only, float64, tiny batch and horizons, no gradient "
        "(its compilation alone takes ~0.5 min), no pinning",
    )
    p.add_argument("--contacts", type=_csv(str), default=None, help="e.g. hard,smooth")
    p.add_argument("--dtypes", type=_csv(str), default=None, help="e.g. float64,float32")
    p.add_argument("--batches", type=_csv(int), default=None, help="e.g. 1,256,4096")
    p.add_argument(
        "--grads",
        type=str,
        default=None,
        help="contact:dtype pairs to time the rollout gradient of, e.g. "
        "smooth:float64,hard:float32, or 'none' (default: all contacts in float64 "
        "and smooth in float32; none with --quick)",
    )
    p.add_argument("--repeats", type=int, default=None)
    p.add_argument("--no-pinned", action="store_true", help="skip the taskset -c 0 rerun")
    p.add_argument("--pinned-worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--json", type=str, default="", help="also write the rows as JSON here")
    p.add_argument(
        "--output",
        type=str,
        default=str(REPO / "BENCHMARKS.md"),
        help="markdown file to update ('' to skip)",
    )
    a = p.parse_args(argv)
    s = Settings(robot=a.robot, quick=a.quick)
    if a.quick:
        s.contacts, s.dtypes, s.batches, s.grads = ("smooth",), ("float64",), (2,), ()
        s.single_steps, s.grad_steps, s.mujoco_steps = 5, 5, 100
        s.repeats, s.target_s, s.pinned = 1, 0.01, False
    if a.contacts:
        s.contacts = a.contacts
    if a.grads is not None:
        s.grads = tuple(tuple(g.split(":")) for g in a.grads.split(",") if g and g != "none")
    if a.dtypes:
        s.dtypes = a.dtypes
    if a.batches:
        s.batches = a.batches
    if a.repeats:
        s.repeats = a.repeats
    if a.no_pinned:
        s.pinned = False
    s.pinned_worker = a.pinned_worker
    s.output = Path(a.output) if a.output else None
    s.json_out = Path(a.json) if a.json else None
    s.command = "python benchmarks/bench_contact.py" + (" " + " ".join(argv) if argv else "")
    return s


def main(argv=None) -> list[Row]:
    if argv is None:
        argv = sys.argv[1:]
    s = parse_args(argv)
    rows = run(s)
    if s.json_out is not None:
        s.json_out.write_text(json.dumps([dataclasses.asdict(r) for r in rows]))
    if s.pinned_worker:
        return rows
    text = render(rows, s)
    markdown_report.publish(s.output, SECTION, text)
    return rows


if __name__ == "__main__":
    main()
