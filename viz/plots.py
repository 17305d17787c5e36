"""Plots of a trajectory (matplotlib, Agg: no display needed).

    >>> paths = plot_trajectory(traj, "results")   # results/trot_go2_<figure>.png

Figures (`trajectory_figures(traj) -> {name: Figure}`):

    convergence     cost per term and total over the solver iterations (log scale)
    base            base position x, y, z and velocity v_x, v_y (base frame), yaw rate
                    against the reference (commanded velocity integrated from the start)
    joint_positions one panel per joint with its position limits
    joint_torques   one panel per joint with its effort limit
    contact_forces  normal and tangential force per foot [N]
    gait            contact timeline per foot (normal force > 1 N) over the reference stance
"""

from __future__ import annotations

import os

import numpy as np

CONTACT_THRESHOLD = 1.0  # [N]


def _pyplot():
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    return plt


def _robot(traj):
    from dynamics import load_robot

    return load_robot(traj.meta["robot"]) if traj.meta.get("robot") else None


def _joint_names(traj, model, n):
    if model is not None:
        names = [j for j in model.joint_names if j not in ("universe", "root_joint")]
        if len(names) == n:
            return names
    return [f"joint {i}" for i in range(n)]


def _foot_names(traj, n):
    names = list(traj.meta.get("foot_names") or [])
    return names if len(names) == n else [f"foot {i}" for i in range(n)]


def convergence_figure(traj):
    """Cost per term (and total) against the iteration, from `traj.history`."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 5))
    ax.set_title("convergence: cost per term")
    records = [r for r in traj.history if isinstance(r, dict) and "cost" in r]
    if records:
        it = [r.get("iteration", i + 1) for i, r in enumerate(records)]
        ax.semilogy(it, [max(r["cost"], 1e-12) for r in records], "k-o", lw=2, ms=3, label="total")
        terms = sorted({t for r in records for t in r.get("terms", {})})
        for term in terms:
            values = [max(r.get("terms", {}).get(term, np.nan), 1e-12) for r in records]
            ax.semilogy(it, values, "-", lw=1, label=term)
        ax.legend(fontsize=7, ncol=2, loc="upper right")
    else:
        ax.text(0.5, 0.5, "no solver iterations recorded", ha="center", transform=ax.transAxes)
    ax.set_xlabel("iteration")
    ax.set_ylabel("cost")
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    return fig


def base_figure(traj):
    """Base position and velocity against the reference (if the trajectory has one)."""
    from .scene import reference_configurations, trajectory_terrain

    plt = _pyplot()
    t = traj.time
    fig, axes = plt.subplots(2, 3, figsize=(12, 6), sharex=True)
    model = _robot(traj)
    reference = traj.meta.get("reference") or {}
    q_ref = None
    if model is not None:
        q_ref = reference_configurations(
            traj, np.asarray(model.q_standing), trajectory_terrain(traj)
        )
    v_ref = np.asarray(reference["base_velocity"]) if "base_velocity" in reference else None
    labels = ["x [m]", "y [m]", "z [m]"]
    for i, ax in enumerate(axes[0]):
        ax.plot(t, traj.q[:, i], label="trajectory")
        if q_ref is not None:
            ax.plot(t, q_ref[:, i], "--", label="reference")
        ax.set_title(f"base position {labels[i].split()[0]}")
        ax.set_ylabel(labels[i])
    velocity = [traj.v[:, 0], traj.v[:, 1], traj.v[:, 5]]
    labels = ["v_x [m/s]", "v_y [m/s]", "yaw rate [rad/s]"]
    for i, ax in enumerate(axes[1]):
        ax.plot(t, velocity[i], label="trajectory")
        if v_ref is not None and len(v_ref) == len(t):
            ax.plot(t, v_ref[:, i], "--", label="reference")
        ax.set_title(f"base velocity {labels[i].split(' [')[0]} (base frame)")
        ax.set_ylabel(labels[i])
        ax.set_xlabel("time [s]")
    axes[0, 0].legend(fontsize=8)
    for ax in axes.flat:
        ax.grid(True, alpha=0.3)
    fig.tight_layout()
    return fig


def _joint_grid(traj, values, t, title, unit, lower=None, upper=None):
    plt = _pyplot()
    model = _robot(traj)
    n = values.shape[1]
    cols = 3 if n % 3 == 0 else 4
    rows = int(np.ceil(n / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols, 2.2 * rows), sharex=True)
    names = _joint_names(traj, model, n)
    for i, ax in enumerate(np.atleast_1d(axes).flat):
        if i >= n:
            ax.set_visible(False)
            continue
        ax.plot(t, values[:, i], lw=1.2)
        for bound in (lower, upper):
            if bound is not None and np.isfinite(bound[i]) and abs(bound[i]) < 1e3:
                ax.axhline(bound[i], color="r", ls="--", lw=0.8)
        ax.set_title(f"{title}: {names[i]}", fontsize=9)
        ax.set_ylabel(unit, fontsize=8)
        ax.grid(True, alpha=0.3)
    fig.tight_layout()
    return fig


def joint_positions_figure(traj):
    """Joint positions [rad] with the model's position limits (red dashes)."""
    model = _robot(traj)
    lower = upper = None
    if model is not None:
        lower = np.asarray(model.lower_position_limit)[7:]
        upper = np.asarray(model.upper_position_limit)[7:]
    return _joint_grid(traj, traj.q[:, 7:], traj.time, "position", "rad", lower, upper)


def joint_torques_figure(traj):
    """Mean joint torque per knot [Nm] with the effort limits (red dashes)."""
    model = _robot(traj)
    tau = traj.tau if traj.tau is not None else np.full_like(traj.u, np.nan)
    limit = None if model is None else np.asarray(model.effort_limit)[6:]
    lower = None if limit is None else -limit
    return _joint_grid(traj, tau, traj.time[:-1], "torque", "Nm", lower, limit)


def contact_forces_figure(traj):
    """Normal and tangential contact force per foot [N] (world frame, z normal)."""
    plt = _pyplot()
    force = traj.force if traj.force is not None else np.zeros((traj.horizon, 4, 3))
    n = force.shape[1]
    fig, axes = plt.subplots(n, 1, figsize=(9, 1.8 * n + 0.6), sharex=True)
    t = traj.time[:-1]
    for ax, name, f in zip(np.atleast_1d(axes), _foot_names(traj, n), np.moveaxis(force, 1, 0)):
        ax.plot(t, f[:, 2], label="normal f_z")
        ax.plot(t, np.linalg.norm(f[:, :2], axis=1), label="tangential |f_xy|")
        ax.set_title(f"contact force {name}", fontsize=9)
        ax.set_ylabel("N")
        ax.grid(True, alpha=0.3)
    np.atleast_1d(axes)[0].legend(fontsize=8, loc="upper right")
    np.atleast_1d(axes)[-1].set_xlabel("time [s]")
    fig.tight_layout()
    return fig


def gait_figure(traj):
    """Contact timeline per foot: dark bars where the normal force exceeds 1 N, light bars
    where the reference asks for stance."""
    plt = _pyplot()
    force = traj.force if traj.force is not None else np.zeros((traj.horizon, 4, 3))
    n = force.shape[1]
    names = _foot_names(traj, n)
    fig, ax = plt.subplots(figsize=(10, 0.6 * n + 1.2))
    ax.set_title("gait diagram (dark: contact, light: reference stance)")
    stance = (traj.meta.get("reference") or {}).get("stance")
    for i in range(n):
        row = n - 1 - i
        if stance is not None and np.shape(stance)[1:] == (n,):
            spans = _spans(np.asarray(stance)[:-1, i] > 0.5, traj.dt)
            ax.broken_barh(spans, (row - 0.4, 0.8), color="tab:blue", alpha=0.25)
        spans = _spans(force[:, i, 2] > CONTACT_THRESHOLD, traj.dt)
        ax.broken_barh(spans, (row - 0.25, 0.5), color="k")
    ax.set_yticks(range(n), names[::-1])
    ax.set_xlim(0, traj.horizon * traj.dt)
    ax.set_xlabel("time [s]")
    fig.tight_layout()
    return fig


def _spans(mask, dt):
    """`[(start, width)]` [s] of the runs of True in `mask` (one entry per knot)."""
    edges = np.diff(np.r_[0, mask.astype(int), 0])
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    return [(s * dt, (e - s) * dt) for s, e in zip(starts, ends)]


FIGURES = {
    "convergence": convergence_figure,
    "base": base_figure,
    "joint_positions": joint_positions_figure,
    "joint_torques": joint_torques_figure,
    "contact_forces": contact_forces_figure,
    "gait": gait_figure,
}


def trajectory_figures(traj) -> dict:
    """`{name: matplotlib Figure}` for every figure of the module docstring."""
    return {name: make(traj) for name, make in FIGURES.items()}


def plot_trajectory(traj, out_dir: str, prefix: str | None = None, dpi: int = 100) -> list:
    """Save every figure as `<out_dir>/<prefix>_<name>.png`; returns the paths.

    `prefix` defaults to `<problem>_<robot>` from the trajectory's meta (the stem `Trajectory.
    save` uses in the examples), so the PNGs sit next to the saved result.
    """
    plt = _pyplot()
    if prefix is None:
        parts = [traj.meta.get("problem"), traj.meta.get("robot")]
        prefix = "_".join(p for p in parts if p) or "trajectory"
    os.makedirs(out_dir, exist_ok=True)
    paths = []
    for name, fig in trajectory_figures(traj).items():
        path = os.path.join(out_dir, f"{prefix}_{name}.png")
        fig.savefig(path, dpi=dpi)
        plt.close(fig)
        paths.append(path)
    return paths
