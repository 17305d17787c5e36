"""Export a trained `learning.policy.Policy` for deployment: NumPy weights, a standalone
NumPy runner, an ONNX graph, and the conventions they run with.

    paths = export_policy(policy, "results/policy_go2", robot="go2")
    numpy_policy = load_numpy_policy("results/policy_go2")      # NumPy alone
    onnx_policy = load_onnx_policy("results/policy_go2")        # onnxruntime
    policy = load_exported_policy("results/policy_go2")         # the equinox Policy again

(`learning.policy.save_policy`/`load_policy` are the training checkpoints, one
equinox file; this module writes what deployment reads.)

The folder then holds

    policy.npz       normaliser mean/var/count `(n_obs,)`, `layer{i}_weight (out, in)` and
                     `layer{i}_bias (out,)`, float64 (a float32 policy's values, exactly)
    policy.json      the conventions: obs size, nu, action scale and clip, obs clip, the
                     normaliser's epsilon, control period, activation, robot, joint names in
                     order (`JointMap.from_model`), q_default [rad], kp [N m/rad], kd [N m s/rad],
                     the observation layout, the gait clock ("gait_clock": null, or its period
                     [s], frequency [1/s], formula and index in the observation), the
                     `Measurement` fields it reads ("inputs"; `policy_inputs` derives them
                     from the layout for older exports), and the SHA-256 of policy.npz
    numpy_policy.py  `NumpyPolicy.load(folder)`: the runner (a copy of
                     `learning/numpy_policy_runner.py`, which imports only NumPy)
    policy.onnx      (optional) input "observation" `[batch, n_obs]` float32, output "action"
                     `[batch, nu]`: Sub, Div, Clip, then Gemm and Elu per layer; the
                     conventions are also in its metadata ("diffloco_policy"); with a gait
                     clock its last 3 inputs are the clock, computed by the caller
                     (`NumpyPolicy.clock`, `OnnxPolicy.clock`, `PolicyController`)

All files are built in memory first and each is written atomically (a temporary file in the
folder, then `os.replace`), policy.json last: an interrupted export leaves every file whole,
and the checksum in policy.json tells the runner when policy.npz is from another export.
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import json
import os
import tempfile

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

import dynamics
from hardware.interface import JointMap
from trajopt.gait_clock import CLOCK_SIZE, check_gait_period

from .numpy_policy_runner import (
    CONFIG_FILE,
    FORMAT,
    FORMAT_VERSION,
    ONNX_FILE,
    PARAMS_FILE,
    RUNNER_FILE,
    NumpyPolicy,
    PolicyFileError,
    check_observation,
    gait_clock,
    inputs_from_layout,
    policy_inputs,
)
from .policy import (
    ACTION_CLIP,
    ACTION_SCALE,
    CONTROL_DT,
    NORMALIZER_EPS,
    OBS_CLIP,
    Policy,
    observation_size,
)

__all__ = [
    "CLOCK_LAYOUT",
    "COMMAND_NAMES",
    "DEFAULT_COMMAND_RANGES",
    "OBSERVATION_LAYOUT",
    "NumpyPolicy",
    "PolicyFileError",
    "check_command_ranges",
    "command_ranges",
    "export_policy",
    "load_numpy_policy",
    "load_onnx_policy",
    "load_exported_policy",
    "observation_layout",
    "policy_arrays",
    "policy_inputs",
]

RUNNER_TEMPLATE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "numpy_policy_runner.py")
ONNX_OPSET = 17
ONNX_IR_VERSION = 8  # the IR of opset 17: runtimes older than the onnx package still load it
OBSERVATION_LAYOUT = (
    "base_linear_velocity (3) [m/s] base frame",
    "base_angular_velocity (3) [rad/s] base frame",
    "projected_gravity (3) R^T (0, 0, -1)",
    "velocity_command (3) vx [m/s], vy [m/s], yaw_rate [rad/s]",
    "joint_q - q_default (nu) [rad]",
    "joint_qd (nu) [rad/s]",
    "last_action (nu)",
)
# appended to OBSERVATION_LAYOUT when the policy observes the gait clock (the layout without it
# is a prefix); `trajopt.gait_clock.gait_clock`, `numpy_policy_runner.gait_clock`
CLOCK_LAYOUT = (
    "gait_clock (3) sin(2 pi phase), cos(2 pi phase), 1 / period [1/s]; "
    "phase = (t / period) mod 1, t [s] since the controller's reset"
)


# the velocity command's components, in the observation's order: vx [m/s], vy [m/s] (base
# frame, heading), yaw_rate [rad/s]
COMMAND_NAMES = ("vx", "vy", "yaw_rate")
# the command box of a policy whose policy.json records none: `learning.env.EnvConfig`'s
# default ranges, the box the shipped Go2 policies were trained on
DEFAULT_COMMAND_RANGES = {"vx": (-1.0, 1.0), "vy": (-0.5, 0.5), "yaw_rate": (-1.0, 1.0)}


def observation_layout(clock: bool = False, base_velocity: bool = True) -> tuple:
    """The observation's entries in order (`OBSERVATION_LAYOUT`, less its first entry without
    `base_velocity`, then `CLOCK_LAYOUT` if `clock`)."""
    layout = OBSERVATION_LAYOUT if base_velocity else OBSERVATION_LAYOUT[1:]
    return layout + ((CLOCK_LAYOUT,) if clock else ())


def check_command_ranges(ranges) -> dict:
    """`ranges` as `{name: (low, high)}` floats for each of `COMMAND_NAMES` (vx, vy [m/s],
    yaw_rate [rad/s]); a ValueError naming the entry that is missing, unknown, not finite or
    has low > high."""
    if not hasattr(ranges, "keys"):
        raise ValueError(f"command ranges must map {COMMAND_NAMES} to (low, high), got {ranges!r}")
    unknown = sorted(set(ranges) - set(COMMAND_NAMES))
    missing = [n for n in COMMAND_NAMES if n not in ranges]
    if unknown or missing:
        raise ValueError(
            f"command ranges need exactly {list(COMMAND_NAMES)}: missing {missing}, unknown "
            f"{unknown}"
        )
    out = {}
    for name in COMMAND_NAMES:
        try:
            low, high = (float(b) for b in ranges[name])
        except (TypeError, ValueError) as err:
            message = f"command range {name} must be (low, high), got {ranges[name]!r}"
            raise ValueError(message) from err
        if not (np.isfinite(low) and np.isfinite(high) and low <= high):
            raise ValueError(
                f"command range {name} must be finite with low <= high, got ({low}, {high})"
            )
        out[name] = (low, high)
    return out


def command_ranges(config: dict) -> dict:
    """The command box `{"vx": (low, high) [m/s], "vy": (low, high) [m/s], "yaw_rate": (low,
    high) [rad/s]}` a policy was trained on, from its policy.json's "command_ranges";
    `DEFAULT_COMMAND_RANGES` when it records none (null, or a folder exported before the key).
    Raises PolicyFileError for a malformed entry."""
    ranges = config.get("command_ranges")
    if ranges is None:
        return dict(DEFAULT_COMMAND_RANGES)
    try:
        return check_command_ranges(ranges)
    except ValueError as err:
        raise PolicyFileError(f'policy.json "command_ranges": {err}') from err


# --------------------------------------------------------------------------- checks, arrays
def _check_policy(policy, gait_period=None) -> None:
    """Raises TypeError/ValueError for anything the runners would not compute exactly, or a
    gait clock in the policy without `gait_period` (or the reverse)."""
    if not isinstance(policy, Policy):
        raise TypeError(f"export_policy takes a learning.policy.Policy, got {type(policy)}")
    mlp = policy.mlp
    if mlp.activation is not jax.nn.elu:
        raise ValueError(f"the runners implement ELU hidden activations, got {mlp.activation}")
    probe = jnp.linspace(-2.0, 2.0, 5)
    if not np.array_equal(np.asarray(mlp.final_activation(probe)), np.asarray(probe)):
        raise ValueError("the runners implement a linear last layer; this MLP has an activation")
    if any(layer.bias is None for layer in mlp.layers):
        raise ValueError("the runners need a bias in every layer (eqx.nn.MLP use_bias=True)")
    clock = gait_period is not None
    if clock:
        check_gait_period(gait_period, "gait_period")
    expected = observation_size(policy.nu, clock, policy.base_velocity)
    if mlp.in_size != expected:
        with_or_without = "with" if clock else "without"
        raise ValueError(
            f"the policy takes {mlp.in_size} inputs; the observation of nu = {policy.nu} joints "
            f"{with_or_without} a gait clock has {expected} "
            f"(learning.policy.observation_size); gait_period = {gait_period} "
            "(None: no clock)"
        )


def policy_arrays(policy: Policy) -> dict:
    """The policy's numbers as NumPy float64 arrays, by their `policy.npz` names:
    `normalizer_mean (n,)`, `normalizer_var (n,)`, `normalizer_count ()`,
    `layer{i}_weight (out, in)`, `layer{i}_bias (out,)`."""
    norm = policy.normalizer
    arrays = {
        "normalizer_mean": norm.mean,
        "normalizer_var": norm.var,
        "normalizer_count": norm.count,
    }
    for i, layer in enumerate(policy.mlp.layers):
        arrays[f"layer{i}_weight"] = layer.weight
        arrays[f"layer{i}_bias"] = layer.bias
    arrays = {name: np.asarray(a, dtype=np.float64) for name, a in arrays.items()}
    bad = [name for name, a in arrays.items() if not np.all(np.isfinite(a))]
    if bad:
        raise ValueError(f"the policy has non-finite numbers in {bad}; not exporting it")
    return arrays


def _numpy_policy(arrays: dict, config: dict) -> NumpyPolicy:
    n_layers = config["n_layers"]
    return NumpyPolicy(
        arrays["normalizer_mean"],
        arrays["normalizer_var"],
        [arrays[f"layer{i}_weight"] for i in range(n_layers)],
        [arrays[f"layer{i}_bias"] for i in range(n_layers)],
        config,
        count=arrays["normalizer_count"],
    )


def _clock_config(gait_period, nu: int, base_velocity: bool = True) -> dict | None:
    """policy.json's "gait_clock": None without a clock."""
    if gait_period is None:
        return None
    period = check_gait_period(gait_period, "gait_period")
    return {
        "period": period,
        "frequency": 1.0 / period,
        "index": observation_size(nu, False, base_velocity),
        "size": CLOCK_SIZE,
        "formula": CLOCK_LAYOUT,
    }


def _config(policy: Policy, joint_map: JointMap, robot: str, params_sha256: str,
            gait_period=None, ranges=None) -> dict:  # fmt: skip
    mlp = policy.mlp
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "robot": robot,
        "obs_size": int(mlp.in_size),
        "nu": int(policy.nu),
        "n_layers": len(mlp.layers),
        "hidden": [int(layer.weight.shape[0]) for layer in mlp.layers[:-1]],
        "activation": "elu",
        "final_activation": "identity",
        "dtype": str(policy.normalizer.mean.dtype),
        "obs_clip": OBS_CLIP,
        "normalizer_eps": NORMALIZER_EPS,
        "action_scale": ACTION_SCALE,
        "action_clip": ACTION_CLIP,
        "control_dt": CONTROL_DT,
        "joint_names": list(joint_map.names),
        "q_default": joint_map.q_default.tolist(),
        "kp": joint_map.kp_default.tolist(),
        "kd": joint_map.kd_default.tolist(),
        "observation_layout": list(
            observation_layout(gait_period is not None, policy.base_velocity)
        ),
        "gait_clock": _clock_config(gait_period, int(policy.nu), policy.base_velocity),
        # the Measurement fields the observation is computed from (`policy_inputs`)
        "inputs": list(
            inputs_from_layout(observation_layout(gait_period is not None, policy.base_velocity))
        ),
        # the command box it was trained on (`command_ranges`; null: not recorded)
        "command_ranges": None if ranges is None else {k: list(v) for k, v in ranges.items()},
        "action": "q* = q_default + action_scale * clip(action, +-action_clip), qd* = 0, "
        "tau_ff = 0, with kp, kd in the drivers' PD",
        "params_file": PARAMS_FILE,
        "params_sha256": params_sha256,
    }


# --------------------------------------------------------------------------- ONNX
def onnx_model(arrays: dict, config: dict):
    """The ONNX graph of the policy (`onnx.ModelProto`, checked with `onnx.checker`):
    observation `[batch, n]` float32 -> Sub mean -> Div std -> Clip +-obs_clip ->
    (Gemm, Elu) per hidden layer -> Gemm -> action `[batch, nu]`."""
    # onnx is the optional 'export' extra: imported only when a graph is built
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    def constant(name, value):
        return numpy_helper.from_array(np.asarray(value, dtype=np.float32), name=name)

    std = np.sqrt(arrays["normalizer_var"] + config["normalizer_eps"])
    initializers = [
        constant("normalizer_mean", arrays["normalizer_mean"]),
        constant("normalizer_std", std),
        constant("obs_clip_low", -config["obs_clip"]),
        constant("obs_clip_high", config["obs_clip"]),
    ]
    nodes = [
        helper.make_node("Sub", ["observation", "normalizer_mean"], ["centred"]),
        helper.make_node("Div", ["centred", "normalizer_std"], ["standardised"]),
        helper.make_node("Clip", ["standardised", "obs_clip_low", "obs_clip_high"], ["h0"]),
    ]
    h, last = "h0", config["n_layers"] - 1
    for i in range(config["n_layers"]):
        weight, bias = f"layer{i}_weight", f"layer{i}_bias"
        initializers += [constant(weight, arrays[weight]), constant(bias, arrays[bias])]
        out = "action" if i == last else f"layer{i}_linear"
        # Gemm: out = h W^T + b, with W (out, in) as equinox stores it
        nodes.append(helper.make_node("Gemm", [h, weight, bias], [out], transB=1))
        if i != last:
            h = f"h{i + 1}"
            nodes.append(helper.make_node("Elu", [out], [h], alpha=1.0))
    observation = helper.make_tensor_value_info(
        "observation", TensorProto.FLOAT, ["batch", config["obs_size"]]
    )
    action = helper.make_tensor_value_info("action", TensorProto.FLOAT, ["batch", config["nu"]])
    graph = helper.make_graph(
        nodes, "diffloco_policy", [observation], [action], initializer=initializers
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", ONNX_OPSET)],
        ir_version=ONNX_IR_VERSION,
        producer_name="diffloco.learning.policy_export",
        doc_string="observation (12 + 3 nu, + 3 with a gait clock) -> action (nu); "
        "conventions in metadata",
    )
    helper.set_model_props(model, {"diffloco_policy": json.dumps(config)})
    onnx.checker.check_model(model, full_check=True)
    return model


# --------------------------------------------------------------------------- files
def _prepare_folder(folder) -> str:
    folder = os.fspath(folder)
    if os.path.exists(folder) and not os.path.isdir(folder):
        raise NotADirectoryError(f"{folder} exists and is not a folder; export into a folder")
    os.makedirs(folder, exist_ok=True)
    return folder


def _write_atomic(path: str, data: bytes) -> None:
    """Write `data` to a temporary file in `path`'s folder, flush it to disk, then rename it
    over `path` (`os.replace` is atomic): readers see the old file or the new one, whole."""
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=f".{os.path.basename(path)}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp's 0o600 would hide the policy from other users
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def export_policy(
    policy: Policy,
    folder,
    *,
    robot: str,
    onnx: bool = True,
    gait_period: float | None = None,
    command_ranges: dict | None = None,
) -> dict:
    """Write `policy` into `folder` (created if needed; see the module docstring).

    Args:
        policy: a `learning.policy.Policy` (ELU MLP, linear last layer).
        folder: the output folder; existing export files in it are replaced (and an earlier
            policy.onnx removed when onnx=False).
        robot: the robot it controls (`dynamics.load_robot` name or URDF path): joint names,
            q_default and the standing gains (`JointMap.from_model`) go into policy.json.
        onnx: also write policy.onnx (needs the `onnx` package, the 'export' extra).
        gait_period: [s] the period of the gait clock the policy observes (the training
            environment's `EnvConfig.gait_period`); None: a policy without the clock.
        command_ranges: the command box it was trained on, `{"vx": (low, high) [m/s], "vy":
            (low, high) [m/s], "yaw_rate": (low, high) [rad/s]}` (the training environment's
            `EnvConfig.vx_range`, `vy_range`, `yaw_rate_range`); None: not recorded (readers
            then assume `DEFAULT_COMMAND_RANGES`).

    Returns: {"params", "config", "runner"[, "onnx"]: path written}.

    Raises TypeError (not a Policy), ValueError (a policy the runners would not reproduce,
    non-finite numbers, a robot with another number of joints, a clock in the policy and no
    finite positive gait_period or the reverse, malformed command_ranges), NotADirectoryError
    (folder is a file), ImportError (onnx=True without the onnx package)."""
    _check_policy(policy, gait_period)
    ranges = None if command_ranges is None else check_command_ranges(command_ranges)
    joint_map = JointMap.from_model(dynamics.load_robot(robot))
    if joint_map.nu != policy.nu:
        raise ValueError(f"the policy has {policy.nu} actions, {robot} {joint_map.nu} joints")
    if onnx:
        try:  # the optional 'export' extra: checked before anything is written
            import onnx as _onnx  # noqa: F401
        except ImportError as err:
            raise ImportError(
                "onnx=True needs the onnx package: pip install 'diffloco[export]', or pass "
                "onnx=False"
            ) from err
    arrays = policy_arrays(policy)

    # every file's bytes first: a failure here writes nothing
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    params_bytes = buffer.getvalue()
    config = _config(policy, joint_map, str(robot), hashlib.sha256(params_bytes).hexdigest(),
                     gait_period, ranges)  # fmt: skip
    _numpy_policy(arrays, config)  # the shapes the runner checks on loading
    with open(RUNNER_TEMPLATE, "rb") as f:
        runner_bytes = f.read()
    files = {"params": (PARAMS_FILE, params_bytes), "runner": (RUNNER_FILE, runner_bytes)}
    if onnx:
        files["onnx"] = (ONNX_FILE, onnx_model(arrays, config).SerializeToString())
    # policy.json last: it names the weights it belongs to by their checksum
    files["config"] = (CONFIG_FILE, (json.dumps(config, indent=2) + "\n").encode())

    folder = _prepare_folder(folder)
    stale_onnx = os.path.join(folder, ONNX_FILE)
    if not onnx and os.path.exists(stale_onnx):
        os.remove(stale_onnx)  # an earlier export's graph would not match the new weights
    written = {}
    for key, (name, data) in files.items():
        written[key] = os.path.join(folder, name)
        _write_atomic(written[key], data)
    return written


# --------------------------------------------------------------------------- loading
def load_numpy_policy(folder):
    """The folder's own `numpy_policy.py`, loaded by path (as a robot computer would, without
    JAX), and its `NumpyPolicy.load(folder)`."""
    path = os.path.join(os.fspath(folder), RUNNER_FILE)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: no such file (the NumPy runner of an exported policy)")
    spec = importlib.util.spec_from_file_location("exported_numpy_policy", path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as err:
        raise PolicyFileError(f"{path}: cannot load the NumPy runner ({err})") from err
    try:
        return module.NumpyPolicy.load(os.fspath(folder))
    except module.PolicyFileError as err:  # the copy's own class: give callers this module's
        raise PolicyFileError(str(err)) from err


class OnnxPolicy:
    """`observation (n,) -> action (nu,)` (or `(B, n) -> (B, nu)`) with onnxruntime, float32.

    `gait_period` [s] (None without a clock) and `clock(t)` from the graph's metadata, as in
    `NumpyPolicy`."""

    def __init__(self, path: str):
        # onnxruntime is the optional 'export' extra: imported only when an ONNX policy loads
        import onnxruntime

        if not os.path.isfile(path):
            raise FileNotFoundError(f"{path}: no such file (the ONNX graph of a policy)")
        try:
            self.session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
        except Exception as err:  # onnxruntime raises its own error types
            raise PolicyFileError(f"{path}: cannot load the ONNX policy ({err})") from err
        self.obs_size = self.session.get_inputs()[0].shape[1]
        meta = self.session.get_modelmeta().custom_metadata_map.get("diffloco_policy")
        clock = None if meta is None else json.loads(meta).get("gait_clock")
        self.gait_period = None if clock is None else float(clock["period"])

    def clock(self, t):
        """The gait clock `(3,)` at `t` [s] since the controller's reset (`gait_clock`)."""
        if self.gait_period is None:
            raise ValueError("this policy was exported without a gait clock")
        return gait_clock(t, self.gait_period)

    def __call__(self, obs):
        obs = check_observation(obs, self.obs_size, np.float32)
        (action,) = self.session.run(["action"], {"observation": np.atleast_2d(obs)})
        return action[0] if obs.ndim == 1 else action


def load_onnx_policy(folder) -> OnnxPolicy:
    """`OnnxPolicy` of the folder's `policy.onnx` (needs onnxruntime)."""
    return OnnxPolicy(os.path.join(os.fspath(folder), ONNX_FILE))


def load_exported_policy(folder, dtype=jnp.float32) -> Policy:
    """The exported policy as a `learning.policy.Policy` of `dtype` (read through
    `NumpyPolicy.load`, so with the same checks)."""
    exported = NumpyPolicy.load(os.fspath(folder))
    config = exported.config
    template = Policy.create(
        jax.random.key(0), config["nu"], hidden=tuple(config["hidden"]), dtype=dtype,
        clock=exported.gait_period is not None,
        base_velocity="base_linear_velocity" in policy_inputs(config),
    )  # fmt: skip
    n_layers = len(exported.weights)
    leaves = [jnp.asarray(exported.mean, dtype), jnp.asarray(exported.var, dtype),
              jnp.asarray(exported.count, dtype)]  # fmt: skip
    for w, b in zip(exported.weights, exported.biases):
        leaves += [jnp.asarray(w, dtype), jnp.asarray(b, dtype)]
    return eqx.tree_at(
        lambda p: (
            [p.normalizer.mean, p.normalizer.var, p.normalizer.count]
            + [x for i in range(n_layers) for x in (p.mlp.layers[i].weight, p.mlp.layers[i].bias)]
        ),
        template,
        leaves,
    )
