"""`benchmarks.markdown_report.replace_section`: a benchmark's section is replaced in place, the
others kept, and a blank line stays before the next heading."""

from benchmarks.markdown_report import replace_section


def test_a_section_is_replaced_in_place_and_the_next_heading_keeps_its_blank_line(tmp_path):
    path = tmp_path / "BENCHMARKS.md"
    path.write_text("# Benchmarks\n\n## A\n\nold a\n\n## B\n\nb stays\n")
    replace_section(path, "## A", "## A\n\nnew a")
    assert path.read_text() == "# Benchmarks\n\n## A\n\nnew a\n\n## B\n\nb stays\n"
    replace_section(path, "## C", "## C\n\nc")  # a new one goes at the end
    assert path.read_text().endswith("## B\n\nb stays\n\n## C\n\nc\n")
