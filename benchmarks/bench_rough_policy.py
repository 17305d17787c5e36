"""The blind rough-ground policy beside the flat-ground one, over every terrain preset and the
flat randomised tour, in MuJoCo on what a Go2 measures.

    python benchmarks/bench_rough_policy.py          # writes its section of BENCHMARKS.md
    python benchmarks/bench_rough_policy.py --seeds 0 1 --terrains stairs --no-write

Each policy (`--policies`, exported folders) and terrain (`--terrains`: presets of
`contact.terrain_presets` and "flat") and seed (`--seeds`): one `learning.terrain_check.crossing`
run (16 s at 0.5 m/s forward with the estimator, sensor noise and that seed's disturbances;
"flat": the 28 s omnidirectional tour). Reported per policy and terrain: how many seeds
crossed, the median x where the true base ended, and the mean tracking error
`|v_xy - c_xy|` [m/s] over the seeds. JSON: `benchmarks/results/rough_policy.json`.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
HEADING = "## Blind policies on terrain"
POLICIES = ("go2_rough_proprio", "go2_omni_proprio")
TERRAINS = ("stairs", "slope", "rough", "blocks", "flat")


def run(policies, terrains, seeds) -> dict:
    """`{policy: {terrain: [crossing row per seed]}}`, printing each row."""
    from learning.terrain_check import crossing

    out: dict = {}
    for policy in policies:
        folder = str(ROOT / "examples" / "policies" / policy)
        for terrain in terrains:
            rows = out.setdefault(policy, {}).setdefault(terrain, [])
            for seed in seeds:
                start = time.perf_counter()
                row = {"seed": seed, **crossing(folder, terrain, seed)}
                row["wall_s"] = time.perf_counter() - start
                print(policy, terrain, json.dumps(row), flush=True)
                rows.append(row)
    return out


def markdown(results: dict, command: str, cpu: str, seeds) -> str:
    """The section: a row per policy, a column per terrain (crossed / seeds, median end x,
    mean tracking error)."""
    terrains = list(next(iter(results.values())))
    lines = [
        HEADING,
        "",
        f"`{command}` on {cpu}; seeds {', '.join(map(str, seeds))} of `DisturbanceRanges`, "
        "`learning.terrain_check.crossing`: 16 s at 0.5 m/s forward over the preset with "
        "sensor noise and the estimator; crossed: no fall, no damping, past the feature's end; "
        "flat: the tour's `walked`. Cells: crossed / seeds; median end x [m]; mean tracking "
        "error [m/s].",
        "",
        "| policy | " + " | ".join(terrains) + " |",
        "|---|" + "---|" * len(terrains),
    ]
    for policy, per_terrain in results.items():
        cells = []
        for terrain in terrains:
            rows = per_terrain[terrain]
            crossed = sum(r["crossed"] for r in rows)
            ends = [r["x_end"] for r in rows if r["x_end"] is not None]
            end = f"; {np.median(ends):.1f} m" if ends else ""
            error = np.mean([r["linear_error"] for r in rows])
            cells.append(f"{crossed}/{len(rows)}{end}; {error:.3f}")
        lines.append(f"| {policy} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policies", nargs="+", default=list(POLICIES))
    parser.add_argument("--terrains", nargs="+", default=list(TERRAINS), choices=TERRAINS)
    parser.add_argument("--seeds", nargs="+", type=int, default=list(range(8)))
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" /
                                             "rough_policy.json"))  # fmt: skip
    parser.add_argument("--no-write", action="store_true", help="print only")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from benchmarks.markdown_report import cpu_name, publish

    results = run(args.policies, args.terrains, args.seeds)
    shown = [a for a in (argv if argv is not None else sys.argv[1:]) if a != "--no-write"]
    command = ("python benchmarks/bench_rough_policy.py " + shlex.join(shown)).strip()
    text = markdown(results, command, cpu_name(), args.seeds)
    publish(None if args.no_write else ROOT / "BENCHMARKS.md", HEADING, text)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"command": command, "results": results}, indent=1))
    return results


if __name__ == "__main__":
    main()
