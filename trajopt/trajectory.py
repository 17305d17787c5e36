"""`Trajectory`: a solved (or initial) trajectory, with save/load and shifting for warm starts.

Saved as `<path>.npz` (arrays) + `<path>.json` (metadata: robot, problem, solver, costs,
status, versions), both written atomically (temporary file, then rename).
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
from dataclasses import dataclass, field

import jax
import numpy as np

from contact import terrain_to_dict

from .engine.solve_result import ContactReport, SolveResult

STATUSES = (
    "converged",
    "max_iterations",
    "time_budget",
    "line_search_failed",
    "diverged",
    "initial",
    "closed_loop",  # a recorded closed-loop run (MPC, policy), not a solve
)


@dataclass
class Trajectory:
    """Knot states and controls of a trajectory (NumPy arrays).

    q (T+1, nq), v (T+1, nv): knot states; u (T, nu): controls (PD targets or torques);
    tau (T, nu): mean joint torques per knot; force (T, nfeet, 3): mean contact forces [N];
    dt: knot duration [s]; cost: total cost; term_costs: {term: cost}; status: one of STATUSES;
    iterations: solver iterations; history: per-iteration records; meta: free-form metadata;
    feedback (T, nu, nx): FDDP's Riccati gains `K_t` of the last accepted step (None if none),
    the local control law `u = u_t + K_t (x (-) x_t)` around the knots, `x = (q, v, u_prev)` in
    tangent coordinates (`trajopt.problem.local`).
    """

    q: np.ndarray
    v: np.ndarray
    u: np.ndarray
    dt: float
    tau: np.ndarray | None = None
    force: np.ndarray | None = None
    u_prev0: np.ndarray | None = None
    cost: float = float("nan")
    term_costs: dict = field(default_factory=dict)
    status: str = "initial"
    iterations: int = 0
    history: list = field(default_factory=list)
    meta: dict = field(default_factory=dict)
    feedback: np.ndarray | None = None

    @classmethod
    def from_solution(cls, problem, result: SolveResult, solver: str) -> Trajectory:
        """The trajectory of a solve of `problem` (`trajopt.Problem`) from the solver's
        `result` (`trajopt.engine.solve_result.SolveResult`) and the solver's name; `meta`
        keeps the problem's description (`problem_description`), the contact report, and, where
        the solver gives them, why it stopped and where its time went."""
        xs = jax.tree_util.tree_map(np.asarray, result.xs)
        contact = result.contact or ContactReport()
        meta = {
            "robot": problem.model.name,
            "problem": problem.name,
            "solver": solver,
            "horizon": problem.horizon,
            "substeps": problem.substeps,
            "contact": problem.contact,
            "control": problem.control,
            "num_sweeps": problem.num_sweeps,
            "derivatives": problem.derivatives,
            "wall_time_s": result.wall_time,
            "defects": result.defects,
            "contact_residual": contact.residual,
            "unconverged_linearizations": (
                None if result.contact is None else contact.unconverged_linearizations),
            "contact_tolerance": problem.contact_tolerance,
            "knot_contact_residuals": contact.knot_residuals,
            "unconverged_knots": None if result.contact is None else contact.unconverged_knots,
            **problem_description(problem),
        }  # fmt: skip
        if result.reason:
            meta.update(reason=result.reason)
        if result.timing:
            meta.update(timing=result.timing, exact_derivatives_from=result.exact_derivatives_from)
        if result.linearize_parts:  # one-call iterations: the linearisation's generated code
            meta.update(linearize_parts=result.linearize_parts)
        if result.terms_in_jax:  # derivatives="compiled": what ran beside the C, and its cost
            meta.update(terms_in_jax=result.terms_in_jax,
                        terms_in_jax_seconds=result.terms_in_jax_seconds)  # fmt: skip
        return cls(
            q=xs.q,
            v=xs.v,
            u=np.asarray(result.us),
            dt=problem.dt_knot,
            tau=result.taus,
            force=result.forces,
            u_prev0=np.asarray(problem.data.x0.u_prev),
            feedback=result.feedback,
            cost=result.cost,
            term_costs=result.term_costs,
            status=result.status,
            iterations=result.iterations,
            history=result.history,
            meta=meta,
        )

    @property
    def horizon(self) -> int:
        return self.u.shape[0]

    @property
    def time(self) -> np.ndarray:
        """Knot times `(T+1,)` [s]."""
        return self.dt * np.arange(self.horizon + 1)

    def shifted(self, knots: int = 1) -> Trajectory:
        """The trajectory advanced by `knots` (receding horizon): the first knots are dropped and
        the last state and control are repeated to keep the horizon."""
        if knots < 0:
            raise ValueError(f"knots must be >= 0, got {knots}")
        k = min(knots, self.horizon)

        def shift(a, n):
            if a is None:
                return None
            return np.concatenate([a[k:], np.repeat(a[-1:], k, axis=0)])[:n]

        return dataclasses.replace(
            self,
            q=shift(self.q, self.horizon + 1),
            v=shift(self.v, self.horizon + 1),
            u=shift(self.u, self.horizon),
            tau=shift(self.tau, self.horizon),
            force=shift(self.force, self.horizon),
            feedback=shift(self.feedback, self.horizon),
            u_prev0=self.u[k - 1] if k > 0 else self.u_prev0,
            status="initial",
            history=[],
        )

    # ------------------------------------------------------------------ persistence
    def save(self, path: str) -> tuple[str, str]:
        """Write `path.npz` and `path.json` atomically; returns both paths."""
        stem = path[:-4] if path.endswith(".npz") else path
        folder = os.path.dirname(os.path.abspath(stem))
        os.makedirs(folder, exist_ok=True)
        names = ("q", "v", "u", "tau", "force", "u_prev0", "feedback")
        arrays = {k: getattr(self, k) for k in names}
        arrays = {k: np.asarray(a) for k, a in arrays.items() if a is not None}
        meta = {
            "dt": self.dt,
            "cost": self.cost,
            "term_costs": {k: float(c) for k, c in self.term_costs.items()},
            "status": self.status,
            "iterations": self.iterations,
            "history": self.history,
            "meta": self.meta,
            "versions": _versions(),
        }
        npz_path, json_path = stem + ".npz", stem + ".json"
        _atomic_write(npz_path, lambda f: np.savez(f, **arrays), binary=True)
        _atomic_write(json_path, lambda f: json.dump(meta, f, indent=2, default=_jsonable))
        return npz_path, json_path

    @classmethod
    def load(cls, path: str) -> Trajectory:
        """Read a trajectory written by `save` (`path` with or without `.npz`)."""
        stem = path[:-4] if path.endswith(".npz") else path
        if not os.path.isfile(stem + ".npz"):
            raise FileNotFoundError(f"no saved trajectory at {stem}.npz")
        with np.load(stem + ".npz") as data:
            arrays = {k: data[k] for k in data.files}
        meta = {}
        if os.path.isfile(stem + ".json"):
            with open(stem + ".json") as f:
                meta = json.load(f)
        return cls(
            q=arrays["q"],
            v=arrays["v"],
            u=arrays["u"],
            tau=arrays.get("tau"),
            force=arrays.get("force"),
            u_prev0=arrays.get("u_prev0"),
            feedback=arrays.get("feedback"),
            dt=float(meta.get("dt", float("nan"))),
            cost=float(meta.get("cost", float("nan"))),
            term_costs=meta.get("term_costs", {}),
            status=meta.get("status", "initial"),
            iterations=int(meta.get("iterations", 0)),
            history=meta.get("history", []),
            meta=meta.get("meta", {}),
        )


def _jsonable(x):
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, np.ndarray):
        return x.tolist()
    return str(x)


def _atomic_write(path: str, write, binary: bool = False):
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp_", suffix=os.path.splitext(path)[1])
    try:
        with os.fdopen(fd, "wb" if binary else "w") as f:
            write(f)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _versions() -> dict:
    from importlib import metadata

    out = {}
    for name in ("diffloco", "jax", "pin", "casadi", "numpy"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def problem_description(problem) -> dict:
    """JSON-able terrain and references of a problem, kept with a solved trajectory so viewers
    and plots can show the ground and the commanded motion: `terrain` (see
    `contact.terrain_to_dict`), `reference` {base_velocity (T+1, 3) `[v_x, v_y, yaw_rate]` in
    the base frame, base_height (T+1,), stance (T+1, nfeet)}, `foot_names`, `foot_radius`."""
    ref = problem.data.reference
    return {
        "terrain": terrain_to_dict(problem.data.params.terrain),
        "reference": {
            "base_velocity": np.asarray(ref.base_velocity).tolist(),
            "base_height": np.asarray(ref.base_height).tolist(),
            "stance": np.asarray(ref.stance).tolist(),
        },
        "foot_names": list(problem.model.foot_names),
        "foot_radius": float(np.asarray(problem.model.foot_radius).max()),
    }
