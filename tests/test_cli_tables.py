"""CLI tables never cut a number or a header; long text is elided in the middle, both ends readable."""
from __future__ import annotations

from types import SimpleNamespace

from tb_gpuinsight.commands.overview import render as overview_render
from tb_gpuinsight.commands.text import elide, render_table


def test_numbers_and_headers_widen_their_column_text_is_elided_in_the_middle():
    columns = [("kernel", "display_name", 12), ("ms", "total_us", 6), ("completion", "count", 4)]
    rows = [{"display_name": "MT256x192x64 MI16x16x1 TN #a30c, a long name", "total_us": 243_056_100.0,
             "count": 123456.0}]
    head, rule, line = render_table(rows, columns)
    assert "completion" in head and "243,056.100" in line and "123,456" in line
    name = line.split("  ")[0]
    assert len(name) == 12 and name.startswith("MT25") and name.endswith("name") and "~" in name
    assert len(head) == len(rule) == len(line)


def test_overview_step_columns_show_whole_titles_and_elide_long_ones_in_the_middle():
    steps = [{"step": "ProfilerStep#1234567", "wall_us": 1000.0, "comm_overlapped_us": 0.0, "cpu_ops_us": 1000.0},
             {"step": "decode_step_with_a_very_long_serving_annotation_name_42", "wall_us": 2.5e8,
              "comm_overlapped_us": 0.0, "cpu_ops_us": 2.5e8}]
    result = SimpleNamespace(headline={"steps": 2, "step_time_us": {"mean": 1.0, "median": 1.0, "p90": 1.0,
                                                                     "spread": 0.0}},
                             steps=steps, categories=["cpu_ops"], source="ProfilerStep", recommendations=[])
    lines = overview_render(result)
    head = next(line for line in lines if line.startswith("ms per step"))
    assert "ProfilerStep#1234567" in head  # whole, not its last 12 characters
    long_title = head.split()[-1]
    assert "~" in long_title and long_title.startswith("decode") and long_title.endswith("42")
    wall = next(line for line in lines if line.startswith("= wall time"))
    assert "250,000.000" in wall and len(wall) == len(head)  # a number never cut, columns aligned
    # the CLI's other tables: the critical path's names and steps go through the same middle cut
    assert elide("x" * 10 + "MIDDLE" + "y" * 10, 11) == "xxxxx~yyyyy"
