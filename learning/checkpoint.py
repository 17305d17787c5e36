"""Atomic training checkpoints: a JSON header line, then the equinox leaves of a pytree.

    path = save(folder, iteration, tree, header={"config": ..., "metrics": [...]})
    tree, header = load_latest(folder, template)        # None if there is no valid one

File `ckpt_{iteration:08d}.eqx`: line 1 is the JSON header (`format`, `iteration`, and what
the caller adds), the rest `eqx.tree_serialise_leaves` of the tree (every array leaf, exact
bytes: a resumed run continues bit for bit). Written to a temporary file in the same folder,
flushed and fsync'ed, then `os.replace`d over the final name (atomic on POSIX), and the folder
fsync'ed: a kill at any moment leaves either the previous checkpoints or the new complete one.
`load_latest` tries the newest first and falls back to older ones if a file does not parse
against the template (e.g. a truncated file from a crash of a non-POSIX filesystem).
"""

from __future__ import annotations

import json
import os
import re

import equinox as eqx

FORMAT = "diffloco-checkpoint-1"
_NAME = re.compile(r"^ckpt_(\d{8})\.eqx$")


def checkpoint_path(folder: str, iteration: int) -> str:
    return os.path.join(folder, f"ckpt_{iteration:08d}.eqx")


def list_checkpoints(folder: str) -> list[tuple[int, str]]:
    """`(iteration, path)` of the checkpoint files in `folder`, newest first."""
    if not os.path.isdir(folder):
        return []
    found = [(int(m.group(1)), os.path.join(folder, n))
             for n in os.listdir(folder) if (m := _NAME.match(n))]  # fmt: skip
    return sorted(found, reverse=True)


def _fsync_folder(folder: str) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_tree(path: str, tree, header: dict) -> None:
    """`header` as one JSON line, then `eqx.tree_serialise_leaves(tree)`, atomically: a
    temporary file in the same folder, flushed and fsync'ed, `os.replace`d over `path`, and
    the folder fsync'ed (the file format of checkpoints and of `learning.policy`)."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            f.write((json.dumps(header) + "\n").encode())
            eqx.tree_serialise_leaves(f, tree)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    _fsync_folder(folder)


def save(folder: str, iteration: int, tree, header: dict | None = None, keep: int = 3) -> str:
    """Write `tree` (any equinox-serialisable pytree) as checkpoint `iteration`, atomically,
    then delete all but the newest `keep` checkpoints. Returns the path."""
    path = checkpoint_path(folder, iteration)
    head = {"format": FORMAT, "iteration": int(iteration), **(header or {})}
    write_tree(path, tree, head)
    for _, old in list_checkpoints(folder)[max(keep, 1) :]:
        os.remove(old)
    return path


def load(path: str, template):
    """`(tree, header)` from a checkpoint file; `template` has the tree's structure, shapes and
    dtypes. Raises ValueError naming the file if it is not a valid checkpoint for it."""
    with open(path, "rb") as f:
        try:
            header = json.loads(f.readline().decode())
            if header.get("format") != FORMAT:
                raise ValueError(f"format {header.get('format')!r}, expected {FORMAT!r}")
            tree = eqx.tree_deserialise_leaves(f, template)
            if f.read(1):
                raise ValueError("trailing bytes after the leaves")
        except (ValueError, KeyError, UnicodeDecodeError, RuntimeError, EOFError) as err:
            raise ValueError(f"{path} is not a valid checkpoint for this run: {err}") from err
    return tree, header


def load_latest(folder: str, template):
    """The newest valid checkpoint in `folder` as `(tree, header)`, or None if there is none."""
    for _, path in list_checkpoints(folder):
        try:
            return load(path, template)
        except ValueError:
            continue
    return None
