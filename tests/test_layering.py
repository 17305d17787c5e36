"""The packages are layers: `native -> dynamics -> contact -> {hardware, trajopt} -> controllers
-> learning`, each importing only the layers before it; `viz` draws any of them and nothing imports
it (`import_graph.ALLOWED`).

Read from the sources (`tests/import_graph.py`, AST): every import anywhere in a module, inside
functions included, counts. The modules' import graph has no circle, and no module (library,
examples, benchmarks or tests) uses another module's private `_names`.

Then, by execution: one subprocess makes every package above a layer unimportable (a meta-path
finder that raises `ImportError` for it) and imports every module of the layer
(`pkgutil.walk_packages`), lower layers first, so an import made at run time by name (not
visible to the AST) cannot reach upward either.
"""

import subprocess
import sys
from pathlib import Path

import import_graph
from import_blocker import blocking_script

ROOT = Path(__file__).resolve().parents[1]

LAYERS = ("native", "dynamics", "contact", "trajopt")
ABOVE = ("hardware", "controllers", "learning", "viz")  # never imported by any of LAYERS


def test_every_import_follows_the_layers():
    modules = import_graph.read_project(ROOT)
    assert {"trajopt.engine.fddp", "hardware.safety", "learning.policy"} <= set(modules)
    assert import_graph.package_violations(modules) == []


def test_the_import_graph_has_no_circle():
    edges = import_graph.module_edges(import_graph.read_project(ROOT))
    assert "trajopt.problem" in edges["trajopt.solver"] or any(
        "trajopt.problem" in e for e in edges.values()
    )
    assert import_graph.circles(edges) == []


def test_no_module_uses_another_modules_private_names():
    library = import_graph.read_project(ROOT)
    known = set(library)
    others = [
        import_graph.read_module(ROOT, path, known)
        for path in import_graph.python_files(ROOT, ("examples", "benchmarks", "tests"))
    ]
    modules = {**library, **{m.name: m for m in others}}
    assert import_graph.private_uses(modules) == []


def test_the_graph_reader_sees_what_it_must(tmp_path):
    """The reader finds an upward import inside a function, a circle through a function-level
    import, and a private use by attribute and by name: each rule can fail."""
    (tmp_path / "dynamics").mkdir()
    (tmp_path / "trajopt").mkdir()
    (tmp_path / "dynamics" / "__init__.py").write_text("")
    (tmp_path / "dynamics" / "a.py").write_text("def f():\n    from trajopt import b\n")
    (tmp_path / "trajopt" / "__init__.py").write_text("")
    (tmp_path / "trajopt" / "b.py").write_text(
        "from . import c\nfrom .c import _hidden\n\ndef g():\n    return c._private\n"
    )
    (tmp_path / "trajopt" / "c.py").write_text("def h():\n    from . import b\n")
    modules = import_graph.read_project(tmp_path)
    assert any("dynamics -> trajopt" in v for v in import_graph.package_violations(modules))
    assert import_graph.circles(import_graph.module_edges(modules)) == [["trajopt.b", "trajopt.c"]]
    uses = import_graph.private_uses(modules)
    assert any("trajopt.c._private" in u for u in uses) and any("_hidden" in u for u in uses)

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


def test_lower_layers_import_without_the_layers_above():
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

OURS = ("controllers", "native", "dynamics", "contact", "hardware", "learning", "trajopt", "viz")
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
    """`hardware` (interface, safety, loop, backends, robot server) loads with `controllers`,
    `learning`, `trajopt` and `viz` unimportable: a robot computer needs none of them."""
    import json

    blocked = ("learning", "controllers", "trajopt", "viz")
    done = subprocess.run(
        [sys.executable, "-c", blocking_script(blocked, HARDWARE_SCRIPT)],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    names = json.loads(done.stdout.strip().splitlines()[-1])
    assert {"hardware.robot_server", "hardware.backends.jax_sim",
            "hardware.safety"} <= set(names)  # fmt: skip
