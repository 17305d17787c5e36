"""Traced programs saved on disk, so that the next process with the same problem skips tracing.

JAX's persistent compilation cache (`trajopt.engine.compile_cache`) saves XLA executables, but it is
looked up by the lowered program: every process still traces and lowers each function first.
For the FDDP functions of the README's Go2 trot that is about 10 s of Python per process
(`jacfwd` through the contact step, the line search's trials), most of a second run's solve.
Here each such function is exported once (`jax.export`: the lowered StableHLO module and its
calling convention), saved as a file, and a later process deserialises it and calls it: no
tracing, and the compile step then finds its executable in the persistent cache.

    f = DiskCachedFunction("rollout", jax.jit(g), context="<what else g's program depends on>")
    f(*args)                 # exports or loads the program for these argument shapes, calls it

Where: `<compile_cache.cache_dir()>/programs/<key>.jaxprog` (`DIFFLOCO_CACHE_DIR`; "off" turns
this cache off with the compilation cache). The key is a SHA-256 of
- the function's name and the caller's `context` (for FDDP: the problem's structure key, i.e.
  the robot's content hash, the static fields and the data's tree structure and shapes),
- the source files of `dynamics/`, `contact/` and `trajopt/` (every traced function lives
  there: any edit makes new keys),
- the versions of jax and jaxlib, `jax_enable_x64` and the backend,
- the arguments' tree structure, shapes, dtypes and weak types.

So a program is reused only by a process that would trace the same one. What the key cannot
see: a process that monkeypatches traced code (tests do) must use its own folder or turn the
cache off (the test suite runs with `DIFFLOCO_CACHE_DIR=off`). Like the compilation cache, the
folder is trusted code (the output structure is stored with `pickle`): do not point it at a
folder others can write.

Nothing is lost on failure: a program that cannot be exported, saved or loaded (a corrupt or
truncated file, a version JAX no longer reads) gives one warning and the function is traced as
usual; files are written to a temporary name and renamed. Called with tracers (inside `jit`,
`vmap`, `grad`), the function is used as it is.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import tempfile
import warnings
from pathlib import Path

import jax
import jaxlib
import numpy as np
from jax import export

from . import compile_cache

FORMAT_VERSION = 1
SUFFIX = ".jaxprog"
_SOURCE_PACKAGES = ("dynamics", "contact", "trajopt")
_SOURCE_HASH: list = []


def program_dir() -> Path | None:
    """`<DIFFLOCO_CACHE_DIR>/programs`, or None if the cache is off."""
    root = compile_cache.cache_dir()
    return None if root is None else root / "programs"


def source_hash() -> str:
    """SHA-256 of every `.py` file under `dynamics/`, `contact/` and `trajopt/` (paths and
    contents, in sorted order), computed once per process."""
    if not _SOURCE_HASH:
        root = Path(__file__).resolve().parents[2]
        h = hashlib.sha256()
        for package in _SOURCE_PACKAGES:
            for path in sorted((root / package).rglob("*.py")):
                h.update(str(path.relative_to(root)).encode())
                h.update(path.read_bytes())
        _SOURCE_HASH.append(h.hexdigest())
    return _SOURCE_HASH[0]


def _signature(leaves) -> tuple:
    """`(shape, dtype, weak_type)` of each argument leaf (arrays read directly: `jax.typeof`
    and `dtype.name` cost microseconds a leaf, too much for the MPC's calls)."""
    out = []
    for leaf in leaves:
        if isinstance(leaf, jax.Array):
            out.append((leaf.shape, leaf.dtype, leaf.weak_type))
        elif isinstance(leaf, np.ndarray):
            out.append((leaf.shape, leaf.dtype, False))
        else:  # Python and NumPy scalars
            aval = jax.typeof(leaf)
            out.append((tuple(aval.shape), np.dtype(aval.dtype), bool(aval.weak_type)))
    return tuple(out)


def program_key(name: str, context: str, treedef, signature: tuple) -> str:
    """The file key of one program (see the module docstring for what it covers)."""
    h = hashlib.sha256()
    for part in (
        f"format {FORMAT_VERSION}",
        name,
        context,
        source_hash(),
        f"jax {jax.__version__} jaxlib {jaxlib.__version__}",
        f"x64 {jax.config.jax_enable_x64} backend {jax.default_backend()}",
        repr(treedef),
        repr(signature),
    ):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


class DiskCachedFunction:
    """`fun` (a function of arrays and pytrees of arrays), its traced program saved on disk per
    argument signature (see the module docstring).

    Args:
        name: what the function is (part of the key and of warnings).
        fun: the function, usually jitted; called as it is when the cache is off or fails.
        context: a string naming everything else `fun`'s program depends on (its closed-over
            constants and static settings); two functions with equal name and context must trace
            to the same program for the same arguments.
    """

    def __init__(self, name: str, fun, context: str):
        self.name = name
        self.fun = fun
        self.context = context
        self._programs: dict = {}  # (treedef, signature) -> (jitted call, out treedef) | None
        self.loaded = 0  # programs read from disk (for tests and reports)
        self.exported = 0  # programs traced here (and saved, unless a warning said otherwise)

    def __call__(self, *args):
        leaves, treedef = jax.tree_util.tree_flatten(args)
        if any(isinstance(leaf, jax.core.Tracer) for leaf in leaves):
            return self.fun(*args)
        signature = _signature(leaves)
        slot = (treedef, signature)
        if slot not in self._programs:
            self._programs[slot] = self._program(leaves, treedef, signature)
        program = self._programs[slot]
        if program is None:
            return self.fun(*args)
        call, out_treedef = program
        return jax.tree_util.tree_unflatten(out_treedef, call(*leaves))

    def forget(self) -> None:
        """Drop the programs held in memory: the next call of each signature reads the disk
        again, as a new process would."""
        self._programs.clear()

    # ------------------------------------------------------------------ load or export
    def _program(self, leaves, treedef, signature):
        folder = program_dir()
        if folder is None:
            return None
        path = folder / (program_key(self.name, self.context, treedef, signature) + SUFFIX)
        if path.exists():
            try:
                program = _load(path)
                self.loaded += 1
                return program
            except Exception as error:  # corrupt, truncated or unreadable: export again
                _warn(f"could not load the saved program of {self.name} ({path}: {error}); "
                      "tracing it again")  # fmt: skip
        try:
            exported, out_treedef = self._export(leaves, treedef)
        except Exception as error:
            _warn(f"{self.name} cannot be exported ({type(error).__name__}: {error}); it is "
                  "traced in every process")  # fmt: skip
            return None
        try:
            _save(path, exported, out_treedef)
        except Exception as error:
            _warn(f"could not save the program of {self.name} ({path}: {error})")
        self.exported += 1
        return _jitted_call(exported), out_treedef

    def _export(self, leaves, treedef):
        box = []

        def flat(*flat_args):
            out = self.fun(*jax.tree_util.tree_unflatten(treedef, flat_args))
            out_leaves, out_treedef = jax.tree_util.tree_flatten(out)
            box.append(out_treedef)
            return out_leaves

        exported = export.export(jax.jit(flat))(*leaves)
        return exported, box[0]


def _save(path: Path, exported, out_treedef) -> None:
    """Write `{format, program bytes, pickled output tree}` to `path` atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = pickle.dumps(
        {"format": FORMAT_VERSION, "program": exported.serialize(), "out_treedef": out_treedef}
    )
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(payload)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _load(path: Path):
    """`(jitted call of the deserialised program, output tree)` from a file `_save` wrote."""
    with open(path, "rb") as f:
        payload = pickle.load(f)
    if not isinstance(payload, dict) or payload.get("format") != FORMAT_VERSION:
        raise ValueError(f"not a format-{FORMAT_VERSION} program file")
    exported = export.deserialize(bytearray(payload["program"]))
    return _jitted_call(exported), payload["out_treedef"]


def _jitted_call(exported):
    """`exported.call`, jitted with every argument placed on the default device: NumPy inputs
    (uncommitted) and the outputs of earlier calls (committed) then share one executable instead
    of compiling it twice (seen: the second FDDP iteration compiled the knot Jacobians again)."""
    device = jax.sharding.SingleDeviceSharding(jax.devices()[0])
    return jax.jit(exported.call, in_shardings=device)


def _warn(message: str) -> None:
    warnings.warn(f"program cache: {message}", RuntimeWarning, stacklevel=3)
