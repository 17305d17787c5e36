"""Data parallelism on JAX's own runtime: a one-axis device `Mesh`, a batch (of environments
in training, of problems in `trajopt.batched`) split across it with `NamedSharding`, everything
else replicated, and `jax.distributed` for several processes (hosts). Here, in the lowest layer
that uses it, so that both `trajopt` and `learning` can.

    sharding.initialize_distributed()                  # multi-host only (arguments or env vars)
    mesh = sharding.make_mesh(devices=4)               # None: every device of every process
    state = sharding.put(host_tree, sharding.batch_sharding(mesh))   # split along axis 0
    host = sharding.to_host(state)                     # NumPy leaves, gathered from all devices

The compiled training iterations are ordinary `jit` programs on these global arrays (GSPMD):
the rollout of each device's share of environments runs on that device, a mean over the
environment batch (the actor loss, the normaliser's statistics) becomes a per-device partial
sum plus an all-reduce, so the gradient of the replicated parameters is the average of the
devices' gradients, and the optimiser step runs identically on every device. The program is the
one-device program: the result differs from it only by the order of the floating-point
reductions (measured, see `tests/learning/test_sharded_training.py`). No home-made communication.

Multi-host: every process runs the same script; `initialize_distributed` (before any other JAX
call) connects it to the coordinator; `jax.devices()` then lists every process's devices and
the mesh spans them. Host-side data (a fresh state, a checkpoint) is identical in every
process and becomes a global array with `jax.make_array_from_callback`; `to_host` gathers it
back (`multihost_utils.process_allgather`). Only process 0 writes files (`is_main_process`).
"""

from __future__ import annotations

import os

import equinox as eqx
import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

AXIS = "data"  # the mesh's one axis: the batch

ENV_COORDINATOR = "DIFFLOCO_COORDINATOR"  # host:port of process 0
ENV_NUM_PROCESSES = "DIFFLOCO_NUM_PROCESSES"
ENV_PROCESS_ID = "DIFFLOCO_PROCESS_ID"


def initialize_distributed(coordinator: str | None = None, num_processes: int | None = None,
                           process_id: int | None = None) -> bool:  # fmt: skip
    """`jax.distributed.initialize` from the arguments, else from the environment variables
    `DIFFLOCO_COORDINATOR` (host:port of process 0), `DIFFLOCO_NUM_PROCESSES`,
    `DIFFLOCO_PROCESS_ID`. Returns False (and does nothing) if neither gives a coordinator:
    a single-process run. Must come before any other JAX computation in the process."""
    coordinator = coordinator or os.environ.get(ENV_COORDINATOR)
    if not coordinator:
        return False
    if num_processes is None:
        num_processes = int(os.environ[ENV_NUM_PROCESSES])
    if process_id is None:
        process_id = int(os.environ[ENV_PROCESS_ID])
    if not 0 <= process_id < num_processes:
        raise ValueError(f"process id {process_id} not in [0, {num_processes})")
    jax.distributed.initialize(coordinator_address=coordinator, num_processes=num_processes,
                               process_id=process_id)  # fmt: skip
    return True


def is_main_process() -> bool:
    return jax.process_index() == 0


def make_mesh(devices: int | None = None) -> Mesh:
    """A one-axis mesh (`AXIS`) over `devices` devices in total (None: all of them), the same
    number from each process (its first local devices), ordered by process."""
    every = jax.devices()
    count = len(every) if devices is None else int(devices)
    processes = jax.process_count()
    if count < 1 or count > len(every):
        raise ValueError(f"devices must be in [1, {len(every)}] (the devices JAX sees), "
                         f"got {count}")  # fmt: skip
    if count % processes:
        raise ValueError(f"{count} devices do not split evenly over {processes} processes")
    per_process = count // processes
    chosen = []
    for p in range(processes):
        mine = sorted((d for d in every if d.process_index == p), key=lambda d: d.id)
        chosen += mine[:per_process]
    return Mesh(np.array(chosen), (AXIS,))


def default_mesh(devices: int | None) -> Mesh | None:
    """The trainers' `devices` argument: None uses every device JAX sees, or no mesh at all
    (the plain one-device path) when it sees one; an int, a mesh of that many devices."""
    if devices is None and jax.device_count() == 1:
        return None
    return make_mesh(devices)


def per_device_batch(global_batch: int, mesh: Mesh) -> int:
    """`global_batch / devices`; raises unless it divides evenly."""
    n = mesh.devices.size
    if global_batch % n:
        raise ValueError(f"the global batch {global_batch} does not split evenly over {n} "
                         f"devices; use a multiple of {n}")  # fmt: skip
    return global_batch // n


def batch_sharding(mesh: Mesh) -> NamedSharding:
    """Leading axis split over the mesh (the environment batch)."""
    return NamedSharding(mesh, PartitionSpec(AXIS))


def replicated(mesh: Mesh) -> NamedSharding:
    return NamedSharding(mesh, PartitionSpec())


def _put_leaf(x, sharding: NamedSharding):
    if not eqx.is_array(x):
        return x
    if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):  # typed keys: via their raw data
        impl = jax.random.key_impl(x)
        return jax.random.wrap_key_data(_put_leaf(jax.random.key_data(x), sharding), impl=impl)
    host = _host_leaf(x)
    if host.ndim == 0 and sharding.spec != PartitionSpec():
        sharding = replicated(sharding.mesh)
    return jax.make_array_from_callback(host.shape, sharding, lambda index: host[index])


def put(tree, sharding: NamedSharding):
    """Every array leaf of `tree` as a global array with `sharding` (the same host values in
    every process; scalars are replicated). Non-array leaves pass through."""
    return jax.tree.map(lambda x: _put_leaf(x, sharding), tree)


def _host_leaf(x) -> np.ndarray:
    if isinstance(x, jax.Array) and not x.is_fully_addressable:
        if x.is_fully_replicated:
            return np.asarray(x.addressable_data(0))
        from jax.experimental import multihost_utils

        return np.asarray(multihost_utils.process_allgather(x, tiled=True))
    return np.asarray(x)


def to_host(tree):
    """Every array leaf of `tree` as a NumPy array of its global value (gathered from every
    device and process; every process gets it). Typed PRNG keys stay keys (host-local)."""

    def leaf(x):
        if not eqx.is_array(x):
            return x
        if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key):
            impl = jax.random.key_impl(x)
            return jax.random.wrap_key_data(_host_leaf(jax.random.key_data(x)), impl=impl)
        return _host_leaf(x)

    return jax.tree.map(leaf, tree)


def to_local(tree):
    """`to_host`, then back to ordinary arrays on this process's default device."""
    return jax.tree.map(lambda x: jax.numpy.asarray(x) if isinstance(x, np.ndarray) else x,
                        to_host(tree))  # fmt: skip


def time_major_batch_sharding(mesh: Mesh) -> NamedSharding:
    """Axis 1 split over the mesh: `(T, N, ...)` trajectories of the environment batch."""
    return NamedSharding(mesh, PartitionSpec(None, AXIS))


def constrain(tree, sharding: NamedSharding | None):
    """`lax.with_sharding_constraint` on every array leaf (inside `jit`; None: unchanged;
    scalars are replicated). Pins where the batch lives inside loops and which sharding a
    compiled call returns (so the next call reuses the same executable)."""
    if sharding is None:
        return tree
    rep = replicated(sharding.mesh)

    def leaf(x):
        if not eqx.is_array(x):
            return x
        return jax.lax.with_sharding_constraint(x, rep if x.ndim == 0 else sharding)

    return jax.tree.map(leaf, tree)
