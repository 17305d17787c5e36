"""Plots and a replay of a deployment log (`hardware.deployment_log`), matplotlib with Agg.

    >>> run = DeploymentLog.load("runs/deploy_go2_mpc_...")
    >>> base_state_errors(run)                  # RMS of the estimate against the truth
    >>> plot_deployment(run, "runs/deploy_go2_mpc_...")   # PNGs -> list of paths
    >>> traj = log_trajectory(run, base="estimate")       # for viz.view / export_html

Which columns (the names `RecordingRobot` writes): the estimate is the estimator probe's
(`estimator_base_linear_velocity` (ticks, 3) base frame [m/s], `estimator_base_position`
(ticks, 3) world [m]) when the log has it, else the base state the controller was given
(`base_linear_velocity`, `base_position`, from `base_state_source`); the truth is the
simulator's (`truth_base_linear_velocity`, `truth_base_position`). RMS errors are over the
ticks where both are finite:

    rms_j = sqrt(mean_t (x_hat_j(t) - x_j(t))^2)

Figures (`deployment_figures(run) -> {name: Figure}`):

    base_velocity   v_x, v_y, v_z (base frame): estimate against truth, RMS in each title
    base_height     base z: estimate against truth, RMS in the title
    foot_forces     the measured foot forces [N] (when the log has them)
"""

from __future__ import annotations

import os

import numpy as np


def _pyplot():
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


AXES = ("x", "y", "z")


def _column(run, *names):
    """The first of `names` the log has (and that is not all NaN), or None."""
    for name in names:
        if name in run and np.any(np.isfinite(run[name])):
            return np.asarray(run[name], dtype=float)
    return None


def estimated_base_state(run) -> tuple:
    """`(velocity (ticks, 3) or None, position (ticks, 3) or None, label)` of the estimate."""
    velocity = _column(run, "estimator_base_linear_velocity", "base_linear_velocity")
    position = _column(run, "estimator_base_position", "base_position")
    if "estimator_base_linear_velocity" in run:
        label = "estimate"
    else:
        sources = sorted(set(run["base_state_source"]) - {""}) if "base_state_source" in run else []
        label = "measured (" + ", ".join(sources) + ")" if sources else "measured"
    return velocity, position, label


def true_base_state(run) -> tuple:
    """`(velocity (ticks, 3) or None, position (ticks, 3) or None)` of the ground truth."""
    return _column(run, "truth_base_linear_velocity"), _column(run, "truth_base_position")


def rms_error(estimate, truth) -> float:
    """`sqrt(mean((estimate - truth)^2))` over the finite pairs (NaN when there are none)."""
    e = np.asarray(estimate, dtype=float) - np.asarray(truth, dtype=float)
    e = e[np.isfinite(e)]
    return float(np.sqrt(np.mean(e * e))) if e.size else float("nan")


def base_state_errors(run) -> dict:
    """RMS errors of the estimate against the truth: `velocity_x`, `velocity_y`,
    `velocity_z` [m/s] (base frame), `velocity` (the three together), `height` [m]; {} when
    the log has no ground truth or no estimate."""
    v_hat, p_hat, _ = estimated_base_state(run)
    v, p = true_base_state(run)
    out = {}
    if v_hat is not None and v is not None:
        for j, axis in enumerate(AXES):
            out[f"velocity_{axis}"] = rms_error(v_hat[:, j], v[:, j])
        out["velocity"] = rms_error(v_hat, v)
    if p_hat is not None and p is not None:
        out["height"] = rms_error(p_hat[:, 2], p[:, 2])
    return out


def _title(name: str, rms: float | None, unit: str) -> str:
    return name if rms is None or not np.isfinite(rms) else f"{name}: RMS error {rms:.4f} {unit}"


def base_velocity_figure(run):
    """Base velocity (base frame), estimate against truth, one panel per component."""
    plt = _pyplot()
    t = np.asarray(run["t"], dtype=float)
    v_hat, _, label = estimated_base_state(run)
    v, _ = true_base_state(run)
    errors = base_state_errors(run)
    fig, axes = plt.subplots(3, 1, figsize=(10, 7), sharex=True)
    for j, (ax, axis) in enumerate(zip(axes, AXES)):
        if v is not None:
            ax.plot(t, v[:, j], "k-", lw=1.2, label="truth")
        if v_hat is not None:
            ax.plot(t, v_hat[:, j], "-", color="tab:orange", lw=1.0, label=label)
        ax.set_title(_title(f"base velocity v_{axis} (base frame)", errors.get(f"velocity_{axis}"),
                            "m/s"), fontsize=10)  # fmt: skip
        ax.set_ylabel("m/s")
        ax.grid(True, alpha=0.3)
    axes[0].legend(fontsize=8, loc="upper left")
    axes[-1].set_xlabel("time [s]")
    fig.tight_layout()
    return fig


def base_height_figure(run):
    """Base height (world z), estimate against truth."""
    plt = _pyplot()
    t = np.asarray(run["t"], dtype=float)
    _, p_hat, label = estimated_base_state(run)
    _, p = true_base_state(run)
    fig, ax = plt.subplots(figsize=(10, 3.5))
    if p is not None:
        ax.plot(t, p[:, 2], "k-", lw=1.2, label="truth")
    if p_hat is not None:
        ax.plot(t, p_hat[:, 2], "-", color="tab:orange", lw=1.0, label=label)
    ax.set_title(_title("base height z", base_state_errors(run).get("height"), "m"), fontsize=10)
    ax.set_xlabel("time [s]")
    ax.set_ylabel("m")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    return fig


def foot_forces_figure(run):
    """The measured foot forces [N], one line per foot."""
    plt = _pyplot()
    t = np.asarray(run["t"], dtype=float)
    fig, ax = plt.subplots(figsize=(10, 3.5))
    names = run.header.get("foot_names") or [f"foot {i}" for i in range(4)]
    force = _column(run, "foot_force")
    for i in range(0 if force is None else force.shape[1]):
        ax.plot(t, force[:, i], lw=0.8, label=names[i] if i < len(names) else f"foot {i}")
    ax.set_title("foot force sensors" + ("" if force is not None else ": none in the log"))
    ax.set_xlabel("time [s]")
    ax.set_ylabel("N")
    ax.grid(True, alpha=0.3)
    if force is not None:
        ax.legend(fontsize=8, ncol=4, loc="upper right")
    fig.tight_layout()
    return fig


FIGURES = {
    "base_velocity": base_velocity_figure,
    "base_height": base_height_figure,
    "foot_forces": foot_forces_figure,
}


def deployment_figures(run) -> dict:
    """`{name: matplotlib Figure}` for every figure of the module docstring."""
    return {name: make(run) for name, make in FIGURES.items()}


def plot_deployment(run, out_dir: str, prefix: str = "deployment", dpi: int = 100) -> list:
    """Save every figure as `<out_dir>/<prefix>_<name>.png`; returns the paths."""
    plt = _pyplot()
    os.makedirs(out_dir, exist_ok=True)
    paths = []
    for name, fig in deployment_figures(run).items():
        path = os.path.join(out_dir, f"{prefix}_{name}.png")
        fig.savefig(path, dpi=dpi)
        plt.close(fig)
        paths.append(path)
    return paths


def log_trajectory(run, base: str = "estimate", every: int = 10, phase: str | None = None):
    """The logged run as a `trajopt.Trajectory` for the Meshcat replay (`status
    "closed_loop"`): knots every `every` ticks, `q = [base position, IMU quaternion (xyzw),
    joint_q]`, `v = [base velocity, gyro, joint_qd]`, `u` the commanded joint targets.
    `base`: "estimate" (the estimate, else the measured base state) or "truth" (the
    simulator's); ticks without a base position are left out (before the estimator is
    valid), as are those outside `phase` (a value of the log's `phase` column) if given."""
    from trajopt.trajectory import Trajectory

    if base not in ("estimate", "truth"):
        raise ValueError(f"base must be 'estimate' or 'truth', got {base!r}")
    if int(every) < 1:
        raise ValueError(f"every must be >= 1 tick, got {every!r}")
    v_hat, p_hat, _ = estimated_base_state(run)
    velocity, position = (v_hat, p_hat) if base == "estimate" else true_base_state(run)
    if position is None:
        raise ValueError(f"the log has no {base} base position to replay")
    quat = np.asarray(run["base_quat"], dtype=float)
    if base == "truth" and _column(run, "truth_base_quat") is not None:
        quat = np.asarray(run["truth_base_quat"], dtype=float)
    velocity = np.zeros_like(position) if velocity is None else np.nan_to_num(velocity)
    keep = np.all(np.isfinite(position), axis=1) & np.all(np.isfinite(quat), axis=1)
    if phase is not None and "phase" in run:
        keep &= run["phase"] == phase
    rows = np.flatnonzero(keep)[:: int(every)]
    if len(rows) < 2:
        raise ValueError(f"fewer than two ticks with a {base} base position to replay")
    q = np.concatenate([position[rows], quat[rows], run["joint_q"][rows]], axis=1)
    v = np.concatenate([velocity[rows], run["base_angular_velocity"][rows],
                        run["joint_qd"][rows]], axis=1)  # fmt: skip
    dt = float(np.median(np.diff(run["t"][rows])))
    header = run.header
    return Trajectory(
        q=q, v=v, u=np.asarray(run["command_q_target"], dtype=float)[rows[:-1]], dt=dt,
        status="closed_loop",
        meta={"robot": header.get("robot", "go2"), "problem": f"deploy_{header.get('controller')}",
              "solver": "deployment log", "base": base, "foot_names": header.get("foot_names")},
    )  # fmt: skip
