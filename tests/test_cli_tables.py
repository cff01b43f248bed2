"""CLI tables never cut a number or a header; long text is elided in the middle, both ends readable."""
from __future__ import annotations

from tb_gpuinsight.commands.text import render_table


def test_numbers_and_headers_widen_their_column_text_is_elided_in_the_middle():
    columns = [("kernel", "display_name", 12), ("ms", "total_us", 6), ("completion", "count", 4)]
    rows = [{"display_name": "MT256x192x64 MI16x16x1 TN #a30c, a long name", "total_us": 243_056_100.0,
             "count": 123456.0}]
    head, rule, line = render_table(rows, columns)
    assert "completion" in head and "243,056.100" in line and "123,456" in line
    name = line.split("  ")[0]
    assert len(name) == 12 and name.startswith("MT25") and name.endswith("name") and "~" in name
    assert len(head) == len(rule) == len(line)
