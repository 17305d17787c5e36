"""Metrics files written as training goes: a `progress_fn` for the trainers.

    log = MetricsLog("runs/go2/checkpoints")
    result = train(config, iterations=500, checkpoint_dir="runs/go2/checkpoints",
                   progress_fn=log)

`progress_fn(step, metrics)` is the trainers' progress callback (Brax's convention: `step`
the environment steps so far, `metrics` a flat dict of one iteration's numbers).
`MetricsLog(folder)` keeps the records it was given and, after every one, replaces
`metrics.json` (the list of records) and `metrics.csv` (one row per record, the columns of the
first) in `folder` atomically (a temporary file, then `os.replace`): a crash at any moment
leaves the files of the last complete iteration. A record whose step is not beyond the last
one's starts the history again from there (the records at and after its step are dropped): a
resumed run, which replays the checkpoint's history first, or a fresh run in the same folder
writes its own history, not a mix.
"""

from __future__ import annotations

import csv
import json
import os

METRICS_NAME = "metrics"  # metrics.json / metrics.csv


def write_metrics(folder: str, metrics: list) -> tuple[str, str]:
    """`metrics.json` and `metrics.csv` in `folder` (atomically replaced). Returns the paths."""
    os.makedirs(folder, exist_ok=True)
    paths = []
    for ext in ("json", "csv"):
        path = os.path.join(folder, f"{METRICS_NAME}.{ext}")
        tmp = f"{path}.tmp{os.getpid()}"
        with open(tmp, "w", newline="") as f:
            if ext == "json":
                json.dump(metrics, f, indent=1)
            elif metrics:
                writer = csv.DictWriter(f, fieldnames=list(metrics[0].keys()))
                writer.writeheader()
                writer.writerows(metrics)
        os.replace(tmp, path)
        paths.append(path)
    return paths[0], paths[1]


class MetricsLog:
    """`progress_fn(step, metrics)` that keeps the records and rewrites `metrics.json` and
    `metrics.csv` in `folder` after each one (module docstring). `records`: the history."""

    def __init__(self, folder: str):
        self.folder = folder
        self.records: list[dict] = []
        self._steps: list[int] = []

    def __call__(self, step: int, metrics: dict) -> None:
        while self._steps and self._steps[-1] >= step:  # a restart from `step`
            self._steps.pop()
            self.records.pop()
        self._steps.append(int(step))
        self.records.append(dict(metrics))
        write_metrics(self.folder, self.records)
