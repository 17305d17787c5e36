"""Trajectory optimisation (shooting solvers, costs, gait library).

`trajopt.clear_compiled()` drops every compiled problem structure (see `trajopt.fddp`: at most
`trajopt.fddp.cache_size()` structures stay compiled, least recently used out first).
"""

_LAZY = {"clear_compiled", "set_cache_size", "cache_size"}


def __getattr__(name):
    # lazy: `import trajopt` stays light and free of import cycles
    if name in _LAZY:
        from . import fddp

        return getattr(fddp, name)
    raise AttributeError(f"module 'trajopt' has no attribute {name!r}")
