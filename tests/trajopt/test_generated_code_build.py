"""`trajopt.engine.c_library.build_library`: translation units compiled in parallel and linked
into one library, found again by the hash of their code, every build recorded."""

import ctypes

import pytest

from native import c_library

pytestmark = pytest.mark.skipif(
    not c_library.compiler_available(),
    reason=f"no C compiler ({c_library.compiler()!r})",
)


def _units(folder, constant: int):
    a = folder / "first.c"
    b = folder / "second.c"
    a.write_text("double twice(double x) { return 2.0 * x; }\n")
    b.write_text(f"double plus_constant(double x) {{ return x + {constant}.0; }}\n")
    return [a, b]


def test_units_link_into_one_library_found_again_by_their_code(tmp_path, monkeypatch):
    monkeypatch.setenv("DIFFLOCO_CACHE_DIR", str(tmp_path / "cache"))
    units = _units(tmp_path, 3)
    before = len(c_library.builds())
    library = c_library.build_library(units, "pair", ("-O1", "-shared", "-fPIC"))
    lib = ctypes.CDLL(str(library))
    for name in ("twice", "plus_constant"):  # both units' symbols, in one library
        getattr(lib, name).restype = ctypes.c_double
        getattr(lib, name).argtypes = [ctypes.c_double]
    assert lib.twice(1.5) == 3.0 and lib.plus_constant(1.5) == 4.5
    first = c_library.builds()[before]
    assert (first.library, first.cached, first.units) == (library, False, 2)
    assert first.seconds > 0.0

    again = c_library.build_library(units, "pair", ("-O1", "-shared", "-fPIC"))
    assert again == library and c_library.builds()[-1].cached  # found, not rebuilt

    changed = c_library.build_library(_units(tmp_path, 4), "pair", ("-O1", "-shared", "-fPIC"))
    assert changed != library and not c_library.builds()[-1].cached
    other_flags = c_library.build_library(units, "pair", ("-O0", "-shared", "-fPIC"))
    assert other_flags not in (library, changed)


def test_a_unit_that_does_not_compile_leaves_no_library(tmp_path, monkeypatch):
    import subprocess

    monkeypatch.setenv("DIFFLOCO_CACHE_DIR", str(tmp_path / "cache"))
    good, bad = _units(tmp_path, 1)
    bad.write_text("double broken(double x) { return x +; }\n")
    with pytest.raises(subprocess.CalledProcessError):
        c_library.build_library([good, bad], "broken", ("-O0", "-shared", "-fPIC"))
    assert not list((tmp_path / "cache" / "casadi").glob("broken-*.so"))


def test_the_builds_since_a_count_are_reported_as_rows(tmp_path, monkeypatch):
    monkeypatch.setenv("DIFFLOCO_CACHE_DIR", str(tmp_path / "cache"))
    before = len(c_library.builds())
    units = _units(tmp_path, 5)
    library = c_library.build_library(units, "pair", ("-O0", "-shared", "-fPIC"))
    c_library.build_library(units, "pair", ("-O0", "-shared", "-fPIC"))
    rows = c_library.build_rows(before)
    assert [(r["library"], r["cached"], r["units"]) for r in rows] == [
        (library.name, False, 2), (library.name, True, 2)]  # fmt: skip
