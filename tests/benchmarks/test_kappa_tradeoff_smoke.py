"""The kappa trade-off benchmark runs end to end with tiny settings (numbers not asserted
beyond sanity). Four compiled box rollouts (two with gradients) take 30-70 s to compile on the
shared 2-core machine, above the 20 s budget of the normal run, hence `slow`."""

import math

import pytest
from bench_helpers import load_benchmark


@pytest.mark.slow
def test_kappa_tradeoff_quick(tmp_path):
    bench = load_benchmark("kappa_tradeoff")
    out = tmp_path / "BENCHMARKS.md"
    out.write_text("# Benchmarks\n\n## Other section\n\nkept\n")
    rows = bench.main(["--quick", "--output", str(out)])
    assert len(rows) == 3  # two kappas and hard
    for r in rows:
        assert math.isfinite(r.stop_mm) and math.isfinite(r.rest_mm) and math.isfinite(r.fd_err)
    assert 0.0 <= rows[-1].informative <= 1.0
    text = out.read_text()
    assert bench.SECTION in text and "## Other section" in text and "kept" in text
    bench.write_section(out, bench.render(rows, bench.parse_args(["--quick"])))
    assert out.read_text().count(bench.SECTION) == 1
