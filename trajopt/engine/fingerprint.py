"""Content hashes of robot models: what makes two models trace to the same program."""

from __future__ import annotations

import dataclasses
import hashlib
import weakref

import numpy as np

_MODEL_FINGERPRINTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def model_fingerprint(model) -> str:
    """Content hash of a robot model: its static fields and every array (dtype, shape, bytes).

    Two models with equal fingerprints trace to the same program, so they may share compiled
    functions (the arrays are compile-time constants of them); object identity is not used."""
    cached = _MODEL_FINGERPRINTS.get(model)
    if cached is not None:
        return cached
    h = hashlib.sha256()
    for f in dataclasses.fields(model):
        value = getattr(model, f.name)
        h.update(f.name.encode())
        if f.metadata.get("static") or value is None:
            h.update(repr(value).encode())
        else:
            a = np.asarray(value)
            h.update(f"{a.dtype}{a.shape}".encode())
            h.update(np.ascontiguousarray(a).tobytes())
    fingerprint = h.hexdigest()
    _MODEL_FINGERPRINTS[model] = fingerprint
    return fingerprint
