"""Trajectory optimisation (shooting solvers, costs, gait library).

`trajopt.clear_compiled()` drops every compiled problem structure, single (`trajopt.fddp`: at
most `trajopt.fddp.cache_size()` stay compiled, least recently used out first) and batched
(`trajopt.batched`), and JAX's own caches.
"""

import sys

_LAZY = {"set_cache_size", "cache_size"}


def clear_compiled(jax_caches: bool = True) -> None:
    """Drop every compiled problem structure (single and batched solves) and, with
    `jax_caches`, JAX's compilation and tracing caches (see `trajopt.fddp.clear_compiled`)."""
    from . import fddp

    batched = sys.modules.get(__name__ + ".batched")  # only if it was used
    if batched is not None:
        batched.clear_compiled()
    fddp.clear_compiled(jax_caches)


def __getattr__(name):
    # lazy: `import trajopt` stays light and free of import cycles
    if name in _LAZY:
        from . import fddp

        return getattr(fddp, name)
    raise AttributeError(f"module 'trajopt' has no attribute {name!r}")
