"""Training runs of several seeds side by side: mean and spread per method, curves with bands.

    python benchmarks/training_seeds.py RUN_DIR [RUN_DIR ...]              # print the table
    python benchmarks/training_seeds.py RUN_DIR ... --write                # and BENCHMARKS.md
    python benchmarks/training_seeds.py RUN_DIR ... --png out.png          # the curves elsewhere

Each `RUN_DIR` holds the `training_curves.json` of one `benchmarks/bench_training.py` run (one
seed, one or more methods: `--seed S --results RUN_DIR`). The runs are grouped by method; a
method's runs are its seeds. Per method it reports how many seeds reached each tracking-error
threshold (the first evaluation at or below it in which no run fell, as `bench_training`
counts it) and the mean and range of the environment steps and the wall time to it over the
seeds that reached it, the final and best errors (mean and range) and the final fall fraction.
The warm-start comparison is stated for the pair `shac-init` (from a saved
policy) against `shac-smooth` (fresh): the warm start's time to the threshold against half the
fresh start's, seed by seed and on average; a fresh run that never reached it counts as "more
than its budget", so the comparison is then a bound, and says so.

Curves (`--png`, default `benchmarks/results/training_seeds.png`): the tracking error and the
fraction of evaluation runs that fell, against environment steps and against training wall
time, per method the mean over seeds (each seed's evaluations held until its next one, on a
common grid up to the shortest run's end) with a band from the lowest to the highest seed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
from benchmarks.bench_training import first_reaching  # noqa: E402  (the one definition of "reached")

HEADING = "## Policy training: methods over seeds"
THRESHOLDS = (0.3, 0.1)  # [m/s]
WARM, FRESH = "shac-init", "shac-smooth"


def load_runs(folders) -> dict[str, list[dict]]:
    """`{method: [run, ...]}` from the `training_curves.json` of each folder (one seed each).
    A run is bench_training's record (`curve`, `compile_time`, `iterations`, `settings` when
    recorded) plus `folder`. Raises `FileNotFoundError` / `ValueError` naming the folder."""
    runs: dict[str, list[dict]] = {}
    for folder in folders:
        path = Path(folder) / "training_curves.json"
        if not path.is_file():
            raise FileNotFoundError(
                f"{folder}: no training_curves.json (a bench_training run's "
                "--results folder is expected)"
            )
        results = json.loads(path.read_text())
        if not isinstance(results, dict) or not results:
            raise ValueError(f"{path}: expected {{method: run}}, got {type(results).__name__}")
        for method, run in results.items():
            if not run.get("curve"):
                raise ValueError(f"{path}: method {method!r} has no evaluations")
            runs.setdefault(method, []).append({**run, "folder": str(folder)})
    return runs


def _spread(values):
    """`(mean, low, high)` of a non-empty list."""
    return sum(values) / len(values), min(values), max(values)


def summarize(runs: list[dict], thresholds=THRESHOLDS) -> dict:
    """One method's seeds: per threshold the seeds that reached it and the mean / range of env
    steps and wall seconds to it; the final and best errors and the final fall fraction (mean,
    low, high); the budget (each run's last evaluation time) and the seeds' numbers."""
    out = {
        "seeds": len(runs),
        "reached": {},
        "budget_s": [r["curve"][-1]["wall_time"] for r in runs],
    }
    for t in thresholds:
        points = [first_reaching(r["curve"], t) for r in runs]
        hit = [p for p in points if p is not None]
        out["reached"][t] = {
            "count": len(hit),
            "wall_s": [None if p is None else p["wall_time"] for p in points],
            "env_steps": [None if p is None else p["env_steps"] for p in points],
            "wall_spread": _spread([p["wall_time"] for p in hit]) if hit else None,
            "steps_spread": _spread([p["env_steps"] for p in hit]) if hit else None,
        }
    out["final_error"] = _spread([r["curve"][-1]["tracking_error"] for r in runs])
    out["best_error"] = _spread([min(p["tracking_error"] for p in r["curve"]) for r in runs])
    out["final_fell"] = _spread([r["curve"][-1]["fell_fraction"] for r in runs])
    out["seed_numbers"] = [r.get("settings", {}).get("seed") for r in runs]
    return out


def warm_against_fresh(summaries: dict, threshold: float = 0.1) -> str | None:
    """One sentence on the warm-start bar (the warm start reaches `threshold` in at most half the
    fresh start's wall time), from the two methods' summaries; None if either is missing."""
    if WARM not in summaries or FRESH not in summaries:
        return None
    warm, fresh = summaries[WARM]["reached"][threshold], summaries[FRESH]["reached"][threshold]
    n_warm, n_fresh = summaries[WARM]["seeds"], summaries[FRESH]["seeds"]
    if warm["count"] < n_warm:
        return (
            f"The warm start reached {threshold} m/s with no fall on {warm['count']} of "
            f"{n_warm} seeds: the bar (every seed, in half the fresh start's time) is not met."
        )
    warm_mean, _, warm_high = warm["wall_spread"]
    if fresh["count"] == 0:
        budget = min(summaries[FRESH]["budget_s"])
        verdict = "met (as a bound)" if warm_high <= 0.5 * budget else "not shown"
        return (
            f"The warm start reached {threshold} m/s with no fall on all {n_warm} seeds after "
            f"{warm_mean:.0f} s on average (at most {warm_high:.0f} s); the fresh start did "
            f"not reach it on any of its {n_fresh} seeds within {budget:.0f} s, so its time is "
            f"more than that and half of it more than {0.5 * budget:.0f} s: the bar is "
            f"{verdict}. How much longer the fresh start needs is not measured."
        )
    if fresh["count"] < n_fresh:
        # a fresh seed that never reached it took longer than its budget: a lower bound
        budgets = summaries[FRESH]["budget_s"]
        bound = sum(b if w is None else w for w, b in zip(fresh["wall_s"], budgets)) / n_fresh
        verdict = "met (as a bound)" if warm_mean <= 0.5 * bound else "not shown"
        return (
            f"The fresh start reached {threshold} m/s with no fall on {fresh['count']} of "
            f"{n_fresh} seeds (mean {fresh['wall_spread'][0]:.0f} s where it did); counting the "
            f"others at their budget, its mean time is more than {bound:.0f} s. The warm start "
            f"reached it on all {n_warm}, mean {warm_mean:.0f} s, at most {warm_high:.0f} s: "
            f"the bar (half the fresh start's time) is {verdict}."
        )
    fresh_mean = fresh["wall_spread"][0]
    verdict = "met" if warm_mean <= 0.5 * fresh_mean else "not met"
    return (
        f"Time to {threshold} m/s with no fall, mean over seeds: warm start {warm_mean:.0f} s, "
        f"fresh start {fresh_mean:.0f} s (ratio {warm_mean / fresh_mean:.2f}; the bar, 0.5 "
        f"or less, is {verdict})."
    )


def _held(curve, key, grid, value="tracking_error"):
    """The curve's `value` at each `grid` value of `key` (env_steps or wall_time): the last
    evaluation at or before it (NaN before the first)."""
    import numpy as np

    xs = np.asarray([p[key] for p in curve], float)
    ys = np.asarray([p[value] for p in curve], float)
    index = np.searchsorted(xs, grid, side="right") - 1
    return np.where(index >= 0, ys[np.clip(index, 0, None)], np.nan)


def plot(runs: dict[str, list[dict]], path: Path, threshold: float = 0.1) -> None:
    """Mean curve and lowest-highest band per method, against env steps and wall time: the
    tracking error (top) and the fraction of evaluation runs that fell (bottom)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, axes = plt.subplots(2, 2, figsize=(12, 8), sharex="col")
    for name, method_runs in runs.items():
        for column, key in enumerate(("env_steps", "wall_time")):
            end = min(r["curve"][-1][key] for r in method_runs)
            start = max(r["curve"][0][key] for r in method_runs)
            grid = np.linspace(start, end, 200)
            for row, value in enumerate(("tracking_error", "fell_fraction")):
                ax = axes[row, column]
                curves = np.stack([_held(r["curve"], key, grid, value) for r in method_runs])
                line = ax.plot(
                    grid, curves.mean(axis=0), label=f"{name} ({len(method_runs)} seeds)"
                )
                ax.fill_between(grid, curves.min(axis=0), curves.max(axis=0),
                                color=line[0].get_color(), alpha=0.2)  # fmt: skip
    for column, label in enumerate(("environment steps (policy steps)",
                                    "training wall time [s] (compilation included)")):  # fmt: skip
        top, bottom = axes[0, column], axes[1, column]
        top.axhline(threshold, color="k", lw=0.8, ls="--")
        top.set_ylabel("tracking error |v_xy - c_xy| [m/s]")
        top.set_yscale("log")
        bottom.set_ylabel("evaluation runs that fell")
        bottom.set_xlabel(label)
        for ax in (top, bottom):
            ax.grid(True, alpha=0.3, which="both")
            ax.legend(fontsize=8)
    fig.suptitle("Training: mean over seeds, band = lowest to highest seed (32 fixed resets, 3 s; "
                 f"dashed: {threshold} m/s)")  # fmt: skip
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _fmt_spread(spread, fmt="{:.0f}") -> str:
    if spread is None:
        return "not reached"
    mean, low, high = spread
    return f"{fmt.format(mean)} ({fmt.format(low)}-{fmt.format(high)})"


def render(runs: dict[str, list[dict]], thresholds=THRESHOLDS) -> str:
    """The Markdown table (one row per method) and the warm-start sentence."""
    summaries = {name: summarize(r, thresholds) for name, r in runs.items()}
    head = ["method", "seeds", "final error m/s", "best error m/s", "final fell"]
    for t in thresholds:
        head += [f"to {t} m/s: seeds", f"to {t} m/s: s", f"to {t} m/s: env steps"]
    lines = ["| " + " | ".join(head) + " |", "|---|---:|" + "---|" * (len(head) - 2)]
    for name, s in summaries.items():
        row = [
            name,
            str(s["seeds"]),
            _fmt_spread(s["final_error"], "{:.3f}"),
            _fmt_spread(s["best_error"], "{:.3f}"),
            _fmt_spread(s["final_fell"], "{:.0%}"),
        ]
        for t in thresholds:
            reached = s["reached"][t]
            row += [
                f"{reached['count']} of {s['seeds']}",
                _fmt_spread(reached["wall_spread"]),
                _fmt_spread(reached["steps_spread"], "{:,.0f}"),
            ]
        lines.append("| " + " | ".join(row) + " |")
    lines.append("")
    if 0.1 in thresholds:
        per_seed = []
        for name, s in summaries.items():
            times = ["-" if w is None else f"{w:.0f}" for w in s["reached"][0.1]["wall_s"]]
            per_seed.append(f"{name} " + ", ".join(times))
        lines.append(
            "Per seed, wall seconds to 0.1 m/s with no fall (`-`: not reached): "
            + "; ".join(per_seed)
            + "."
        )
    sentence = warm_against_fresh(summaries) if 0.1 in thresholds else None
    if sentence:
        lines += ["", sentence]
    return "\n".join(lines)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", help="bench_training --results folders, one per seed")
    parser.add_argument(
        "--png", default=str(ROOT / "benchmarks" / "results" / "training_seeds.png")
    )
    parser.add_argument("--write", action="store_true", help="write the BENCHMARKS.md section")
    parser.add_argument(
        "--note", default="", help="a line on how the runs were made (command, load)"
    )
    return parser.parse_args(argv)


def main(argv=None) -> str:
    args = parse_args(argv)
    from benchmarks.markdown_report import publish

    try:
        runs = load_runs(args.folders)
    except (FileNotFoundError, ValueError) as error:
        raise SystemExit(str(error)) from None
    png = Path(args.png)
    plot(runs, png)
    table = render(runs)
    lines = [
        HEADING,
        "",
        "Written by `benchmarks/training_seeds.py` from one `bench_training.py` "
        "run per method and seed.",
        "",
    ]
    if args.note:
        lines += [args.note, ""]
    lines += [
        f"Curves: `{os.path.relpath(png, ROOT)}` (mean over seeds, band lowest to highest). "
        "Spread in the table: mean (lowest-highest) over the seeds that reached it.",
        "",
        table,
    ]
    text = "\n".join(lines)
    publish(ROOT / "BENCHMARKS.md" if args.write else None, HEADING, text)
    return text


if __name__ == "__main__":
    main()
