"""The contact-solve benchmark runs end to end (smallest settings): the full update is the peer,
and the relaxed solve reaches the tolerance on every contact problem of ANYmal C's trot start."""

from bench_helpers import load_benchmark


def test_bench_contact_solve_quick(tmp_path):
    bench = load_benchmark("bench_contact_solve")
    out = tmp_path / "BENCHMARKS.md"
    out.write_text("# Benchmarks\n\n## Other\n\nkept\n")
    rows = bench.main(["--problems", "1", "--iterates", "0", "--relaxations", "1", "0.8",
                       "--most", "1000", "--output", str(out)])  # fmt: skip
    assert [r["relaxation"] for r in rows] == [1.0, 0.8]
    relaxed = rows[1]
    assert relaxed["failed"] == 0 and 0 < relaxed["median"] <= relaxed["largest"] <= 1000
    text = out.read_text()
    assert bench.HEADING in text and "kept" in text and "| 0.8 | 0 of 56 |" in text
