"""The shared table layout (tracecli/render/layout.py): values whole at any width, headers
broken between words only, names wrapped by the stated rule, columns moved in the stated
order; and prose that never breaks between a number and its unit."""

from __future__ import annotations

import io

from hypothesis import given, settings, strategies as st
from rich.console import Console
from rich.text import Text

from tracecli.render.layout import NAME, VALUE, WORD, Column, Fitted, Prose, table_width, \
    wrap_name, wrap_plain
from tracecli.render.tables import new_table


def render(renderable, width: int) -> str:
    out = Console(file=io.StringIO(), width=width, color_system=None, highlight=False,
                  soft_wrap=False)
    out.print(renderable)
    return out.file.getvalue()


def test_table_width_is_what_rich_prints():
    console = Console(width=500)
    for widths in ([3], [1, 7, 12], [5] * 11):
        table = new_table("")
        for w in widths:
            table.add_column("h", no_wrap=True)
        table.add_row(*("x" * w for w in widths))
        assert console.measure(table).maximum == table_width(widths)


number = st.one_of(st.integers(0, 10**12).map(lambda n: f"{n:,}"),
                   st.floats(0, 1e6).map(lambda x: f"{x:.3f}"),
                   st.sampled_from(["16.0 MiB", "-56% to +40%", "424 B", "+1,234,218.4"]))
name = st.text(st.sampled_from("abc/._-0123 "), min_size=1, max_size=60).map(str.strip) \
    .filter(bool)


@st.composite
def tables(draw):
    n_values = draw(st.integers(1, 11))
    with_name = draw(st.booleans())
    cols = [Column("#", key=True)]
    if with_name:
        cols.append(Column("gradients", NAME, min_width=20))
    headers = ["bytes", "predicted us", "pred busbw GB/s", "error band", "ms", "measured us",
               "algorithm", "x", "longest step ms", "vs run (model)", "offset us"]
    for k in range(n_values):
        kind = WORD if headers[k] == "algorithm" else VALUE
        cols.append(Column(headers[k], kind, rank=draw(st.integers(0, 5))))
    rows = []
    for r in range(draw(st.integers(1, 6))):
        row = [str(r)] + ([draw(name)] if with_name else [])
        row += [draw(number) for _ in range(n_values)]
        rows.append(row)
    return cols, rows


@settings(max_examples=150, deadline=None)
@given(tables(), st.integers(60, 160))
def test_every_value_is_whole_and_every_line_fits(table, width):
    cols, rows = table
    text = render(Fitted("A title", cols, rows), width)
    lines = text.splitlines()
    for row in rows:
        for c, cell in zip(cols, row):
            if c.kind != NAME:
                assert any(cell in line for line in lines), (cell, text)
            else:  # a name's lines, joined, are the name (but the spaces it broke at)
                assert "".join(wrap_name(cell, 12)).replace(" ", "") == cell.replace(" ", "")
    assert all(len(line) <= width for line in lines), text


def test_a_header_wraps_between_words_only():
    cols = [Column("#", key=True), Column("predicted us"), Column("pred busbw GB/s")]
    rows = [["0", "1.5", "2.25"]]
    fitted = Fitted("", cols, rows)
    shown, widths, headers = fitted.parts(table_width([1, 9, 5]))[0]
    assert headers == ["#", "predicted\nus", "pred\nbusbw\nGB/s"]
    assert widths == [1, 9, 5]


def test_columns_move_in_the_stated_order_with_the_key_repeated():
    cols = [Column("size", key=True), Column("a", rank=0), Column("b", rank=2),
            Column("c", rank=1)]
    rows = [["1.0 MiB", "x" * 30, "y" * 30, "z" * 30]]
    parts = Fitted("t", cols, rows).parts(80)
    assert [[cols[i].header for i in shown] for shown, _, _ in parts] == \
        [["size", "a", "c"], ["size", "b"]]
    text = render(Fitted("t", cols, rows), 80)
    assert "continued below, to fit: b" in text and "y" * 30 in text


def test_a_table_without_keys_numbers_its_rows_only_when_split():
    cols = [Column("kind", WORD), Column("bytes")]
    assert "row" not in render(Fitted("t", cols, [["allreduce", "7.8 MiB"]]), 80)
    wide = [Column(h) for h in "abcdefgh"]
    text = render(Fitted("t", wide, [["1234567890"] * 8, ["2"] * 8]), 80)
    assert text.count("row") == 2 and "continued" in text


def test_names_wrap_at_the_stated_places():
    assert wrap_name("/predictor/conv4_3/b .. /predictor/conv1_1/b", 24) == \
        ["/predictor/conv4_3/b ..", "/predictor/conv1_1/b"]
    assert wrap_name("conv5_block3_3_bn/gamma:0", 23) == ["conv5_block3_3_bn/", "gamma:0"]
    assert wrap_name("grad17[64,32,3,3]", 12) == ["grad17[64,", "32,3,3]"]
    assert wrap_name("abcdefghijklmnopq", 12) == ["abcdefghijkl", "mnopq"]
    assert wrap_name("layer.0", 6) == ["layer.", "0"]  # no better place: still whole


def test_prose_never_breaks_a_number_from_its_unit():
    text = "compute: 989 BF16/FP16 tensor (dense), 3.35 TB/s HBM3)"
    for width in range(20, 60):
        for line in wrap_plain(text, width):
            assert not line.endswith("3.35") and not line.startswith("TB/s")
        out = render(Prose(Text(text)), width)
        assert "3.35 TB/s" in out.replace("\n", " ") and "3.35\nTB/s" not in out
    assert render(Prose(Text("plain words that fit")), 80) == render(Text("plain words that fit"), 80)
