"""The knot backend of a problem structure, chosen and cached.

`for_problem(problem)` returns the backend every shooting solver calls (the calls are listed in
`trajopt.engine.jax_knots`): `compiled_knots.CompiledKnots` for `derivatives="compiled"` (the
knots in generated C), else `jax_knots.JaxKnots`. Problems of one structure
(`shooting.structure_key`) share one backend; their data is an argument of every call.

What is kept: the backends of the last `cache_size()` structures, least recently used first
out. Why bounded: every structure compiles thousands of memory mappings of executable code,
and the kernel kills the process at `vm.max_map_count` (65,530 by default); dropping a backend
frees its jitted functions and with them their executables, so the LRU alone bounds the count
(`tests/trajopt/test_compile_cache.py` measures it). `clear()` also empties JAX's own caches
(`jax.clear_caches()`, which recompiles every other jitted function on its next call).
"""

from __future__ import annotations

import collections
import gc
import os

import jax

from .. import problem as P
from .compiled_knots import CompiledKnots
from .jax_knots import JaxKnots
from .knot_model import KnotModel
from .shooting import structure_key

DEFAULT_CACHE_SIZE = 4  # structures
CACHED: collections.OrderedDict = collections.OrderedDict()  # structure key -> backend
_CACHE_SIZE = [int(os.environ.get("DIFFLOCO_COMPILED_CACHE_SIZE", DEFAULT_CACHE_SIZE))]


def backend_class(problem: P.Problem) -> type:
    """The backend a problem's knots run on: its `derivatives` choose it."""
    return CompiledKnots if problem.derivatives == "compiled" else JaxKnots


def for_problem(problem: P.Problem) -> KnotModel:
    """The knot backend of `problem`'s structure, from the LRU cache (built on a miss; the
    least recently used structure is dropped when the cache holds more than `cache_size()`)."""
    return lru_lookup(
        CACHED, structure_key(problem), lambda: backend_class(problem)(problem), _CACHE_SIZE[0]
    )


def lru_lookup(cache: collections.OrderedDict, key, build, size: int):
    """`cache[key]`, built by `build()` on a miss, marked most recently used; the least recently
    used entries beyond `size` are dropped (the batched solves' cache uses it too)."""
    value = cache.get(key)
    if value is None:
        value = cache[key] = build()
        evict(cache, size)
    cache.move_to_end(key)
    return value


def evict(cache: collections.OrderedDict, size: int) -> None:
    """Drop the least recently used entries of `cache` beyond `size`, and free their
    executables now (a garbage collection), not at the next collection."""
    dropped = False
    while len(cache) > size:
        cache.popitem(last=False)
        dropped = True
    if dropped:
        gc.collect()


def cache_size() -> int:
    """How many problem structures stay compiled (default `DEFAULT_CACHE_SIZE`, or the
    environment variable `DIFFLOCO_COMPILED_CACHE_SIZE`)."""
    return _CACHE_SIZE[0]


def set_cache_size(size: int) -> None:
    """Keep at most `size` (>= 1) problem structures compiled; evicts at once if needed."""
    if int(size) < 1:
        raise ValueError(f"the compiled cache holds at least one structure, got {size}")
    _CACHE_SIZE[0] = int(size)
    evict(CACHED, _CACHE_SIZE[0])


def clear(jax_caches: bool = True) -> None:
    """Drop every cached backend and, with `jax_caches`, JAX's own compilation and tracing
    caches (`jax.clear_caches()`: every other jitted function recompiles on its next call).
    The persistent on-disk cache is not touched."""
    CACHED.clear()
    gc.collect()
    if jax_caches:
        jax.clear_caches()
