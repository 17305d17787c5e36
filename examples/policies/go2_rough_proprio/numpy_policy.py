"""Run an exported locomotion policy with NumPy alone (no JAX, no equinox, no ONNX runtime).

`learning.policy_export.export_policy` copies this file, as `numpy_policy.py`, next
to the weights (`policy.npz`) and the conventions (`policy.json`), so the folder is all a robot
computer needs:

    from numpy_policy import NumpyPolicy          # or load this file by path (importlib)
    policy = NumpyPolicy.load("results/policy_go2")
    action = policy(observation)                  # (n_obs,) -> (nu,);  (B, n_obs) -> (B, nu)
    q_target = policy.joint_targets(action)       # (nu,) [rad], for the drivers' PD

It computes what `learning.policy.Policy` computes, in float64:

    z   = clip((obs - mean) / sqrt(var + eps), -obs_clip, obs_clip)       normalisation
    h_0 = z,   h_{i+1} = elu(W_i h_i + b_i)   (hidden layers)                ELU MLP
    action = W_L h_L + b_L                     (last layer, no activation)
    elu(x) = x for x > 0, exp(x) - 1 otherwise

with `W_i (out, in)`, `b_i (out,)` as in `equinox.nn.Linear`. The observation layout (see
`policy.json`, "observation_layout") is `learning.policy`'s: base linear velocity (3)
[m/s], base angular velocity (3) [rad/s], both in the base frame, projected gravity (3),
velocity command (3), joint_q - q_default (nu) [rad], joint_qd (nu) [rad/s], last action
(nu), with the joints in "joint_names" order, and for a policy exported with a gait clock
("gait_clock" in `policy.json` not null) three more at the end:

    gait_clock(t, period) = [sin(2 pi phi), cos(2 pi phi), 1 / period],  phi = (t / period) mod 1

with `t` [s] the time since the controller's reset (the policy's first observation is at
phase 0) and the period from `policy.json`; `policy.clock(t)` computes them,
`policy.with_clock(obs, t)` appends them to the other `12 + 3 nu` entries.

The robot's measurements a policy reads are `policy.inputs` (`policy_inputs`): the
`hardware.interface.Measurement` fields behind its observation entries, from "inputs" in
`policy.json`, or for an export from before that key, derived from "observation_layout".

This module imports only numpy and the standard library's hashlib, json and os: a test runs it
in a process where JAX cannot be imported.
"""

import hashlib
import json
import os

import numpy as np

FORMAT = "diffloco-policy"
FORMAT_VERSION = 1
PARAMS_FILE = "policy.npz"
CONFIG_FILE = "policy.json"
ONNX_FILE = "policy.onnx"
RUNNER_FILE = "numpy_policy.py"


class PolicyFileError(ValueError):
    """An exported policy file that cannot be read or does not fit the others."""


# an observation entry's first word -> the `hardware.interface.Measurement` field it is
# computed from; None: not a measurement (the operator's command, the policy's own last
# action, the clock of its reset)
LAYOUT_INPUTS = {
    "base_linear_velocity": "base_linear_velocity",
    "base_angular_velocity": "base_angular_velocity",
    "projected_gravity": "projected_gravity",
    "velocity_command": None,
    "joint_q": "joint_q",
    "joint_qd": "joint_qd",
    "last_action": None,
    "gait_clock": None,
}


def inputs_from_layout(layout):
    """The Measurement fields `(name, ...)` an observation layout (policy.json's
    "observation_layout": entries such as "joint_q - q_default (nu) [rad]") is computed from,
    in layout order. Raises PolicyFileError for an entry it does not know."""
    inputs = []
    for entry in layout:
        word = str(entry).split(" ", 1)[0]
        if word not in LAYOUT_INPUTS:
            raise PolicyFileError(
                f"observation entry {entry!r} is not one this runner knows "
                f"({sorted(LAYOUT_INPUTS)}): cannot tell which measurement it needs"
            )
        field = LAYOUT_INPUTS[word]
        if field is not None and field not in inputs:
            inputs.append(field)
    return tuple(inputs)


def policy_inputs(config):
    """The Measurement fields an exported policy reads: its policy.json's "inputs", or, when
    the key is absent (exports from before it), `inputs_from_layout` of "observation_layout".
    Raises PolicyFileError when neither is usable."""
    if "inputs" in config:
        inputs = config["inputs"]
        if not isinstance(inputs, list) or not all(isinstance(n, str) for n in inputs):
            raise PolicyFileError(f'"inputs" must be a list of field names, got {inputs!r}')
        return tuple(inputs)
    if "observation_layout" not in config:
        raise PolicyFileError('policy.json has neither "inputs" nor "observation_layout"')
    return inputs_from_layout(config["observation_layout"])


def elu(x):
    """`x` where `x > 0`, `exp(x) - 1` elsewhere (`jax.nn.elu` with alpha 1), elementwise."""
    return np.where(x > 0, x, np.expm1(np.minimum(x, 0.0)))


def gait_clock(t, period):
    """`[sin(2 pi phi), cos(2 pi phi), 1 / period]` `(..., 3)` for `t (...)` [s] since the
    controller's reset, `phi = (t / period) mod 1`, `period` [s] > 0: the NumPy copy of
    `trajopt.gait_clock.gait_clock` (this file imports nothing of the project; a test holds the two
    equal)."""
    try:
        value = float(period)
    except (TypeError, ValueError):
        value = float("nan")
    if not (np.isfinite(value) and value > 0.0):
        raise ValueError(f"period must be a finite number of seconds > 0, got {period!r}")
    period = value
    angle = 2.0 * np.pi * np.mod(np.asarray(t) / period, 1.0)
    return np.stack([np.sin(angle), np.cos(angle), np.full_like(angle, 1.0 / period)], axis=-1)


def check_observation(obs, size: int, dtype):
    """`obs` as an array of `dtype`; raises ValueError unless its shape is `(size,)` or
    `(B, size)`."""
    obs = np.asarray(obs, dtype=dtype)
    if obs.ndim not in (1, 2) or obs.shape[-1] != size:
        raise ValueError(f"observation must have shape ({size},) or (B, {size}), got {obs.shape}")
    return obs


def _read_config(path):
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: no such file (the conventions of an exported policy)")
    try:
        with open(path, encoding="utf-8") as f:
            config = json.load(f)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise PolicyFileError(f"{path}: cannot read the policy conventions ({err})") from err
    if not isinstance(config, dict) or config.get("format") != FORMAT:
        raise PolicyFileError(f'{path}: not an exported policy (no "format": "{FORMAT}")')
    if config.get("format_version") != FORMAT_VERSION:
        raise PolicyFileError(
            f"{path}: format version {config.get('format_version')!r}, this runner reads "
            f"{FORMAT_VERSION}; export the policy again"
        )
    return config


def _sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _read_params(path, config, config_path):
    """The arrays of `policy.npz`, checked against the checksum in `policy.json`."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: no such file (the weights of an exported policy)")
    if _sha256(path) != config.get("params_sha256"):
        raise PolicyFileError(
            f"{path} does not match {config_path} (checksum differs: a corrupt file, or an "
            "interrupted export); export the policy again"
        )
    try:
        with np.load(path, allow_pickle=False) as data:
            return {name: np.array(data[name], dtype=np.float64) for name in data.files}
    except Exception as err:  # a damaged zip raises zipfile, OS or value errors
        raise PolicyFileError(f"{path}: cannot read the policy weights ({err})") from err


class NumpyPolicy:
    """`observation (n_obs,) -> action (nu,)`, or `(B, n_obs) -> (B, nu)`, in NumPy float64.

    mean, var: `(n_obs,)` normaliser statistics; weights: `[W_0 (h, n_obs), ..., W_L (nu, h)]`;
    biases: `[b_0 (h,), ..., b_L (nu,)]`; config: the conventions (`policy.json`'s content);
    count: samples the normaliser has seen (kept for the record, unused here).
    """

    def __init__(self, mean, var, weights, biases, config, count=0.0):
        self.mean = np.asarray(mean, dtype=np.float64)
        self.var = np.asarray(var, dtype=np.float64)
        self.count = float(count)
        self.weights = [np.asarray(w, dtype=np.float64) for w in weights]
        self.biases = [np.asarray(b, dtype=np.float64) for b in biases]
        self.config = dict(config)
        self.std = np.sqrt(self.var + float(self.config["normalizer_eps"]))
        self.obs_clip = float(self.config["obs_clip"])
        self._check_shapes()
        self.inputs = policy_inputs(self.config)  # the Measurement fields it reads
        clock = self.config.get("gait_clock")  # absent in exports from before the clock
        self.gait_period = None if clock is None else float(clock["period"])
        if self.gait_period is not None and not (np.isfinite(self.gait_period)
                                                 and self.gait_period > 0):  # fmt: skip
            raise ValueError(f"gait_clock period must be > 0 s, got {self.gait_period}")

    def _check_shapes(self):
        n_obs, nu = int(self.config["obs_size"]), int(self.config["nu"])
        if self.mean.shape != (n_obs,) or self.var.shape != (n_obs,):
            raise ValueError(
                f"normaliser mean {self.mean.shape} and var {self.var.shape} must be ({n_obs},)"
            )
        if len(self.weights) == 0 or len(self.weights) != len(self.biases):
            raise ValueError(f"{len(self.weights)} weights and {len(self.biases)} biases")
        size = n_obs
        for i, (w, b) in enumerate(zip(self.weights, self.biases)):
            if w.ndim != 2 or w.shape[1] != size or b.shape != (w.shape[0],):
                raise ValueError(
                    f"layer {i}: weight {w.shape} and bias {b.shape} do not take {size} inputs"
                )
            size = w.shape[0]
        if size != nu:
            raise ValueError(f"the last layer has {size} outputs, the conventions say nu = {nu}")

    @classmethod
    def load(cls, folder):
        """The policy exported into `folder` (`policy.json` + `policy.npz`).

        Raises FileNotFoundError naming a missing file, PolicyFileError (a ValueError) naming
        an unreadable, corrupt or mismatched one."""
        config_path = os.path.join(folder, CONFIG_FILE)
        params_path = os.path.join(folder, PARAMS_FILE)
        config = _read_config(config_path)
        params = _read_params(params_path, config, config_path)
        n_layers = int(config["n_layers"])
        names = ["normalizer_mean", "normalizer_var"]
        for i in range(n_layers):
            names += [f"layer{i}_weight", f"layer{i}_bias"]
        missing = [n for n in names if n not in params]
        if missing:
            raise PolicyFileError(f"{params_path}: missing arrays {missing}")
        try:
            return cls(
                params["normalizer_mean"],
                params["normalizer_var"],
                [params[f"layer{i}_weight"] for i in range(n_layers)],
                [params[f"layer{i}_bias"] for i in range(n_layers)],
                config,
                count=params.get("normalizer_count", 0.0),
            )
        except (KeyError, ValueError) as err:
            raise PolicyFileError(f"{folder}: inconsistent exported policy ({err})") from err

    @property
    def obs_size(self):
        return int(self.config["obs_size"])

    @property
    def nu(self):
        return int(self.config["nu"])

    @property
    def joint_names(self):
        return tuple(self.config["joint_names"])

    @property
    def q_default(self):
        """`(nu,)` [rad] the standing pose the actions are offsets from."""
        return np.asarray(self.config["q_default"], dtype=np.float64)

    def clock(self, t):
        """The gait clock `(3,)` (or `(..., 3)`) at `t` [s] since the controller's reset
        (`gait_clock` with the exported period); ValueError if the policy has no clock."""
        if self.gait_period is None:
            raise ValueError("this policy was exported without a gait clock")
        return gait_clock(t, self.gait_period)

    def with_clock(self, obs, t):
        """`obs (n_obs - 3,)` (the entries before the clock) with the clock at `t` [s]
        appended: the full observation `(n_obs,)`."""
        obs = check_observation(obs, self.obs_size - 3, np.float64)
        return np.concatenate([obs, np.broadcast_to(self.clock(t), obs.shape[:-1] + (3,))], -1)

    def normalize(self, obs):
        """`clip((obs - mean) / std, +-obs_clip)` for `obs (..., n_obs)`."""
        return np.clip((obs - self.mean) / self.std, -self.obs_clip, self.obs_clip)

    def __call__(self, obs):
        """`obs (n_obs,) -> action (nu,)`, or a batch `(B, n_obs) -> (B, nu)`."""
        obs = check_observation(obs, self.obs_size, np.float64)
        h = self.normalize(obs)
        last = len(self.weights) - 1
        for i, (w, b) in enumerate(zip(self.weights, self.biases)):
            h = h @ w.T + b
            if i < last:
                h = elu(h)
        return h

    def joint_targets(self, action):
        """PD targets `q* (nu,) = q_default + action_scale * clip(action, +-action_clip)` [rad]."""
        clip = float(self.config["action_clip"])
        scale = float(self.config["action_scale"])
        return self.q_default + scale * np.clip(np.asarray(action, dtype=np.float64), -clip, clip)
