"""The packages are layers: `dynamics` -> `contact` -> `trajopt` -> `controllers`, each importing
only the layers before it (`viz` draws any of them, and nothing below imports it). Within
`controllers`, the hardware room imports neither the MPC nor learning nor `trajopt`.

One subprocess makes every package above the current layer unimportable (a meta-path finder
that raises `ImportError` for it), then imports every module of the layer
(`pkgutil.walk_packages`), lower layers first; an upward import, even a lazy one at module
level, fails the import and the test. Imports inside functions are not executed and so not
checked: the rule is about what a module needs to load.
"""

import subprocess
import sys
from pathlib import Path

from import_blocker import blocking_script

ROOT = Path(__file__).resolve().parents[1]

LAYERS = ("dynamics", "contact", "trajopt")
ABOVE = ("controllers", "viz")  # never imported by any of LAYERS

SCRIPT = """
import importlib, json, pkgutil

for name in sorted(BLOCKED):  # the finder must work, else the test below proves nothing
    try:
        importlib.import_module(name)
    except ImportError:
        pass
    else:
        raise SystemExit(f"{name} was importable while blocked")

imported = {}
for layer in LAYERS:
    BLOCKED.discard(layer)
    package = importlib.import_module(layer)
    names = [layer]
    for info in pkgutil.walk_packages(package.__path__, layer + "."):
        importlib.import_module(info.name)
        names.append(info.name)
    imported[layer] = names
leaked = sorted(m for m in sys.modules if m.split(".")[0] in ABOVE)
print(json.dumps({"imported": imported, "leaked": leaked}))
"""


def test_lower_layers_import_without_controllers():
    import json

    header = f"LAYERS = {LAYERS!r}\nABOVE = {ABOVE!r}\n"
    code = blocking_script(LAYERS + ABOVE, header + SCRIPT)
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["leaked"] == []
    # every layer was walked, including modules the rule is about
    assert "trajopt.problem" in report["imported"]["trajopt"]
    assert "trajopt.gaits" in report["imported"]["trajopt"]
    assert "dynamics.actuator" in report["imported"]["dynamics"]
    assert "contact.step" in report["imported"]["contact"]


HARDWARE_SCRIPT = """
import importlib, json, pkgutil
import hardware as hardware

OURS = ("controllers", "dynamics", "contact", "trajopt", "viz")
names = [info.name for info in pkgutil.walk_packages(hardware.__path__, "hardware.")]
loaded = []
for name in names:
    try:
        importlib.import_module(name)
    except ModuleNotFoundError as error:
        # an optional extra that is not installed (cyclonedds without the go2 extra) is not a
        # layering question; a blocked or missing module of ours is
        if error.name is None or error.name.split(".")[0] in OURS:
            raise
        continue
    loaded.append(name)
print(json.dumps(loaded))
"""


def test_the_hardware_room_imports_no_planner_or_learning():
    """`hardware` (interface, safety, loop, backends, robot server) loads with the
    MPC, its adapters, `learning`, `trajopt` and `viz` unimportable: a robot
    computer needs none of them."""
    import json

    blocked = ("learning", "controllers.mpc", "controllers.closed_loop",
               "controllers.state_feedback", "trajopt", "viz")  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-c", blocking_script(blocked, HARDWARE_SCRIPT)],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    names = json.loads(done.stdout.strip().splitlines()[-1])
    assert {"hardware.robot_server", "hardware.backends.jax_sim",
            "hardware.safety"} <= set(names)  # fmt: skip
