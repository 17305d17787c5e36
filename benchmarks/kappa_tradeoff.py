"""How the smooth model's `kappa` trades fidelity for gradient quality.

    python benchmarks/kappa_tradeoff.py [--kappas 100,300,1000,3000,10000,100000] [--quick]
                                        [--output BENCHMARKS.md]

Everything uses the 1 kg box (0.2 x 0.1 x 0.05 m, 8 corner contacts, mu = 0.8, dt = 2 ms) and
the default `bias = 8`, `margin = 0.02 m`; `kappa` is a traced parameter, so each quantity is
one compiled function `vmap`-ed over all kappas.

Fidelity (difference from `hard`, the kappa -> inf limit, and from textbook physics):
    stop      box sliding on the ground from 1 m/s: stopping distance error vs the hard model
              [mm] (analytic v0^2 / (2 mu g) = 63.7 mm; the hard model is within dt v0 of it).
    rest      box dropped from 2 cm and left to settle: resting height of the bottom face [mm]
              (hard: 0; positive = hovering on the activation zone, negative = sunk in).
    push      weightless box drifting 1 cm above the plate at 1 m/s, pushed down at
              vz0 = -0.125 m/s: final vx error vs hard [mm/s] (impact friction: 0.9 m/s).
Gradient quality on the push problem of tests/contact/test_contact_gradients.py (choose vz0 so that
vx_T = 0.9 m/s), over a grid of vz0 from -0.2 to -0.002 m/s (approach and contact):
    inform.   fraction of grid points with d vx_T / d vz0 > 1e-9 (hard: only after contact).
    spike     max / median of |d vx_T / d vz0| over the contact part of the grid (1 = a
              straight line; large = spikes at touchdown-time switches).
    fd err    median relative difference between the analytic derivative and central
              differences (h = 1e-6) of the same rollout.
    solved    optimisations from several starts (Adam without momentum, 20 iterations, as in
              the test) that end within 2 mm/s of the target.
w(margin) = sigmoid(bias - kappa margin) is the weight at which the activation is cut off at
the margin: above ~1e-6 the smooth model is discontinuous there (kappa < ~1000 at the defaults).
"""

from __future__ import annotations

import argparse
import datetime
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from contact import StepParams, simulate
from dynamics import State, free_body

sys.path.insert(0, str(Path(__file__).resolve().parent))
import markdown_report  # noqa: E402  (a sibling script module)

SECTION = "## Smooth contact: kappa trade-off"
REPO = Path(__file__).resolve().parents[1]
FAST_COMPILE = {"xla_backend_optimization_level": 0}
NO_TORQUE = jnp.zeros(0)
HALF_HEIGHT = 0.025
TARGET_VX = 0.9


@dataclass
class Settings:
    kappas: tuple = (100.0, 300.0, 1000.0, 3000.0, 10000.0, 100000.0)
    stop_steps: int = 100
    rest_steps: int = 250
    push_steps: int = 100
    grid: int = 40
    starts: tuple = (-0.003, -0.006, -0.01, -0.02, -0.05, -0.25)
    iterations: int = 20
    output: Path | None = None
    command: str = ""


@dataclass
class Row:
    kappa: float
    stop_mm: float = 0.0
    rest_mm: float = 0.0
    push_mm_s: float = 0.0
    informative: float = 0.0
    spike: float = 0.0
    fd_err: float = 0.0
    solved: str = ""
    w_margin: float = 0.0
    extra: dict = field(default_factory=dict)


def _box_state(z, v):
    return State(jnp.array([0.0, 0.0, z, 0.0, 0.0, 0.0, 1.0]), jnp.asarray(v, dtype=float))


def _final(model, params, state, num_steps, contact):
    final, _ = simulate(model, params, state, lambda _: NO_TORQUE, num_steps, contact=contact)
    return final


def run(s: Settings, log=print) -> list[Row]:
    box = free_body.box()
    weightless = box.replace(gravity=jnp.zeros(3))
    base = StepParams()
    mu, g = float(base.terrain.friction), 9.81
    kappas = jnp.asarray(s.kappas, dtype=float)
    jit = lambda f: jax.jit(f, compiler_options=FAST_COMPILE)  # noqa: E731

    def fidelity(kappa, contact):
        p = base.replace(kappa=kappa)
        stop = _final(box, p, _box_state(HALF_HEIGHT, [1, 0, 0, 0, 0, 0]), s.stop_steps, contact)
        rest = _final(box, p, _box_state(HALF_HEIGHT + 0.02, [0] * 6), s.rest_steps, contact)
        push = _final(
            weightless,
            p,
            _box_state(HALF_HEIGHT + 0.01, [1, 0, -0.125, 0, 0, 0]),
            s.push_steps,
            contact,
        )
        return stop.q[0], rest.q[2] - HALF_HEIGHT, push.v[0]

    t0 = time.perf_counter()
    hard = [float(x) for x in jit(lambda: fidelity(base.kappa, "hard"))()]
    smooth = [np.asarray(x) for x in jit(jax.vmap(lambda k: fidelity(k, "smooth")))(kappas)]
    log(
        f"fidelity: {time.perf_counter() - t0:.1f} s; hard: stop {hard[0] * 1e3:.2f} mm "
        f"(analytic {1e3 / (2 * mu * g):.2f}), rest {hard[1] * 1e3:.3f} mm, vx {hard[2]:.4f}"
    )

    def push_vx(vz0, kappa, contact):
        p = base.replace(kappa=kappa)
        state = _box_state(HALF_HEIGHT + 0.01, jnp.zeros(6).at[0].set(1.0).at[2].set(vz0))
        return _final(weightless, p, state, s.push_steps, contact).v[0]

    pairwise = {}

    def value_and_derivative(contact):
        """`(vz0 (N,), kappa (N,)) -> (vx_T, d vx_T / d vz0)`, one jitted function per model
        (landscape and optimisation share its compilation when their batch sizes agree)."""
        if contact not in pairwise:
            f = jax.value_and_grad(lambda z, k: push_vx(z, k, contact))
            pairwise[contact] = jit(jax.vmap(f))
        return pairwise[contact]

    def landscape(contact, ks):
        zz = jnp.tile(points, ks.shape[0])
        kk = jnp.repeat(ks, points.shape[0])
        vx, d = value_and_derivative(contact)(zz, kk)
        return np.asarray(vx).reshape(ks.shape[0], -1), np.asarray(d).reshape(ks.shape[0], -1)

    grid = jnp.linspace(-0.2, -0.002, s.grid)
    h = 1e-6
    points = jnp.concatenate([grid, grid + h, grid - h])
    t0 = time.perf_counter()
    vx_s, d_s = landscape("smooth", kappas)
    vx_h, d_h = (x[0] for x in landscape("hard", kappas[:1]))
    log(f"landscapes: {time.perf_counter() - t0:.1f} s")
    n = s.grid

    def quality(vx, d):
        d_grid = d[:n]
        fd = (vx[n : 2 * n] - vx[2 * n :]) / (2 * h)
        informative = float(np.mean(d_grid > 1e-9))
        in_contact = vx[:n] < 1.0 - 1e-3
        mags = np.abs(d_grid[in_contact]) if np.any(in_contact) else np.array([np.nan])
        spike = float(np.max(mags) / np.median(mags))
        rel = np.abs(d_grid - fd) / np.maximum(np.abs(d_grid), 1e-3 * np.max(np.abs(d_grid)))
        return informative, spike, float(np.median(rel))

    # optimisation from several starts, all kappas at once: loss = (vx_T - target)^2
    starts = jnp.asarray(s.starts, dtype=float)

    def optimise(contact, ks):
        """Adam without momentum from every start for every kappa: one batch of pairs."""
        vd = value_and_derivative(contact)
        kk = jnp.repeat(ks, starts.shape[0])
        x = jnp.tile(starts, ks.shape[0])
        v = jnp.zeros_like(x)
        for it in range(1, s.iterations + 1):
            vx, d = vd(x, kk)
            grad = 2 * (vx - TARGET_VX) * d
            v = 0.999 * v + 0.001 * grad**2
            v_hat = v / (1 - 0.999**it)
            x = x - 0.05 * 0.9 ** (it - 1) * grad / (jnp.sqrt(v_hat) + 1e-30)
        vx, _ = vd(x, kk)
        return np.asarray(jnp.abs(vx - TARGET_VX) < 2e-3).reshape(ks.shape[0], -1)

    t0 = time.perf_counter()
    solved_s = optimise("smooth", kappas)
    solved_h = optimise("hard", kappas[:1])[0]
    log(f"optimisations: {time.perf_counter() - t0:.1f} s")

    rows = []
    for i, k in enumerate(s.kappas):
        informative, spike, fd_err = quality(vx_s[i], d_s[i])
        rows.append(
            Row(
                kappa=k,
                stop_mm=(smooth[0][i] - hard[0]) * 1e3,
                rest_mm=smooth[1][i] * 1e3,
                push_mm_s=(smooth[2][i] - hard[2]) * 1e3,
                informative=informative,
                spike=spike,
                fd_err=fd_err,
                solved=f"{int(solved_s[i].sum())}/{len(s.starts)}",
                w_margin=float(
                    1 / (1 + np.exp(min(k * float(base.margin) - float(base.bias), 700)))
                ),
            )
        )
    informative, spike, fd_err = quality(vx_h, d_h)
    rows.append(
        Row(
            kappa=float("inf"),
            stop_mm=0.0,
            rest_mm=hard[1] * 1e3,
            push_mm_s=0.0,
            informative=informative,
            spike=spike,
            fd_err=fd_err,
            solved=f"{int(solved_h.sum())}/{len(s.starts)}",
            w_margin=0.0,
            extra={"hard": True},
        )
    )
    return rows


def render(rows: list[Row], s: Settings) -> str:
    lines = [
        SECTION,
        "",
        f"Command: `{s.command}`, run {datetime.date.today().isoformat()} (CPU, float64). Box "
        "(1 kg, 8 corners), mu = 0.8, dt = 2 ms, bias = 8, margin = 2 cm; last row `hard`. "
        "Columns (defined in the script): fidelity = differences from `hard` (stopping "
        "distance, resting height, push-problem final vx); "
        "gradient quality on the push problem of tests/contact/test_contact_gradients.py over "
        "vz0 in "
        f"[-0.2, -0.002] m/s ({s.grid} points) and Adam from {len(s.starts)} starts "
        f"{list(s.starts)} m/s ({s.iterations} iterations).",
        "",
        "| kappa [1/m] | stop err [mm] | rest height [mm] | push vx err [mm/s] | informative | "
        "spike | fd err | solved | w(margin) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        name = "hard" if r.extra.get("hard") else f"{r.kappa:g}"
        lines.append(
            f"| {name} | {r.stop_mm:+.2f} | {r.rest_mm:+.3f} | {r.push_mm_s:+.2f} | "
            f"{r.informative:.2f} | {r.spike:.3g} | {r.fd_err:.1e} | {r.solved} | "
            f"{r.w_margin:.1e} |"
        )
    return "\n".join(lines) + "\n"


def write_section(path: Path, text: str) -> None:
    """Replace (or append) this script's section of `path` (see markdown_report)."""
    markdown_report.replace_section(path, SECTION, text)


def parse_args(argv=None) -> Settings:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--kappas", type=str, default=None, help="comma list, e.g. 300,3000")
    p.add_argument("--quick", action="store_true", help="smoke run: short horizons, few points")
    p.add_argument(
        "--output",
        type=str,
        default=str(REPO / "BENCHMARKS.md"),
        help="markdown file to update ('' to skip)",
    )
    a = p.parse_args(argv)
    s = Settings()
    if a.quick:
        s.kappas, s.stop_steps, s.rest_steps, s.push_steps = (300.0, 3000.0), 40, 40, 40
        s.grid, s.starts, s.iterations = 1, (-0.003, -0.05, -0.25), 2
    if a.kappas:
        s.kappas = tuple(float(k) for k in a.kappas.split(","))
    s.output = Path(a.output) if a.output else None
    s.command = "python benchmarks/kappa_tradeoff.py" + (" " + " ".join(argv) if argv else "")
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
