"""The packages are layers: `dynamics` -> `contact` -> `trajopt` -> `controllers`, each importing
only the layers before it (`viz` draws any of them, and nothing below imports it).

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
