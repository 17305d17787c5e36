"""Trajectory optimisation: problems, shooting solvers, the gait library and trajectories.

The front door:

    import trajopt
    problem = trajopt.make_problem("go2", "trot", 0.5, duration=1.0)   # a gait-library problem
    trajectory = trajopt.solve(problem)                                  # FDDP by default
    trajectory.save("results/trot_go2")                                  # .npz + .json
    trajectory = trajopt.Trajectory.load("results/trot_go2")

`trajopt.Problem` / `trajopt.ProblemData` build problems of your own, `trajopt.available_gaits()`
lists the gaits, `trajopt.initial_guess` gives a solver's start, `trajopt.Term` adds a residual
of your own (`problem.with_terms(...)`, `trajopt.terms`; ready-made ones in
`trajopt.residual_library`). The names are loaded on first use, so `import trajopt` stays
light.

`trajopt.clear_compiled()` drops every compiled problem structure, single
(`trajopt.engine.knot_backends`: at most `trajopt.cache_size()` stay compiled, least recently used
out first) and batched (`trajopt.batched`), and JAX's own caches.
"""

import sys

_LAZY = {"set_cache_size", "cache_size"}

# name -> the module that defines it (loaded on first use)
_FRONT_DOOR = {
    "Problem": "problem",
    "ProblemData": "problem",
    "KnotState": "problem",
    "Reference": "problem",
    "Trajectory": "trajectory",
    "make_problem": "gaits",
    "available_gaits": "gaits",
    "solve": "solver",
    "initial_guess": "solver",
    "Term": "terms",
    "KnotContext": "terms",
}

__all__ = sorted(_FRONT_DOOR) + ["cache_size", "clear_compiled", "set_cache_size"]


def clear_compiled(jax_caches: bool = True) -> None:
    """Drop every compiled problem structure (single and batched solves) and, with
    `jax_caches`, JAX's compilation and tracing caches (see
    `trajopt.engine.knot_backends.clear`)."""
    from .engine import knot_backends

    batched = sys.modules.get(__name__ + ".batched")  # only if it was used
    if batched is not None:
        batched.clear_compiled()
    knot_backends.clear(jax_caches)


def __getattr__(name):
    # lazy: `import trajopt` stays light and free of import cycles
    if name in _FRONT_DOOR:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{_FRONT_DOOR[name]}"), name)
    if name in _LAZY:
        from .engine import knot_backends

        return getattr(knot_backends, name)
    raise AttributeError(f"module 'trajopt' has no attribute {name!r}")
