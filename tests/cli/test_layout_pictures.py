"""``xlapy layout --svg/--png`` (xlapy.cli.layout_svg): the SVG parses, has one cell per drawn
element and the right number of padding cells, labels equal linear indices, tiles get
distinct colours, sub-tiles are outlined, captions say what is shown; PNG through a
converter or a clear error. Most tests call functions in process; some run the command."""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

import xlapy.cli.layout_svg as layout_svg_mod
from xlapy.cli import main
from xlapy.cli.layout_svg import find_png_converter, layout_svg, tile_block_sizes
from xlapy.shape import linear_index, multi_index, parse_shape, physical_size

SVG = "{http://www.w3.org/2000/svg}"
FIG1 = "f32[3,5]{1,0:T(2,2)}"
FIG2 = "f32[4,8]{1,0:T(2,4)(2,1)}"
WIDE = "f32[1,129]{1,0:T(8,128)}"


def parse(text: str) -> ET.Element:
    return ET.fromstring(text)


def svg_of(shape_text: str, **kw) -> ET.Element:
    return parse(layout_svg(parse_shape(shape_text), **kw))


def cells(root: ET.Element, view: str, kind: str) -> list[ET.Element]:
    return [r for r in root.iter(SVG + "rect")
            if r.get("class") == f"cell {kind}" and r.get("data-view") == view]


def labels(root: ET.Element, view: str) -> dict[int, str]:
    return {int(t.get("data-pos")): t.text for t in root.iter(SVG + "text")
            if t.get("class") == "label" and t.get("data-view") == view}


def all_text(root: ET.Element) -> str:
    return "\n".join(t.text or "" for t in root.iter(SVG + "text"))


def run_cli(*argv, env=None):
    env = dict(env or os.environ, PYTHONIOENCODING="utf-8")
    return subprocess.run([sys.executable, "-m", "xlapy", *argv], capture_output=True,
                          check=False, timeout=60, env=env)


# -- figure 1 ------------------------------------------------------------------------------


def test_figure1_cell_counts():
    root = svg_of(FIG1)
    assert len(cells(root, "logical", "elem")) == 15
    assert len(cells(root, "logical", "pad")) == 9  # 3x5 padded to 4x6
    assert len(cells(root, "memory", "elem")) == 15
    assert len(cells(root, "memory", "pad")) == 9
    # Every padding cell carries the hatch overlay.
    hatches = [r for r in root.iter(SVG + "rect") if r.get("class") == "hatch"]
    assert len(hatches) == 18


def test_figure1_labels_are_linear_indices():
    shape = parse_shape(FIG1)
    root = svg_of(FIG1)
    for rect in cells(root, "logical", "elem"):
        index = tuple(int(i) for i in rect.get("data-index").split(","))
        assert int(rect.get("data-pos")) == linear_index(shape, index)
    shown = labels(root, "logical")
    assert sorted(shown) == sorted(linear_index(shape, (r, c)) for r in range(3)
                                   for c in range(5))
    assert all(text == str(pos) for pos, text in shown.items())
    # The memory view holds the same numbers, at their positions, and each element
    # cell's logical index is the one stored there.
    assert labels(root, "memory") == shown
    for rect in cells(root, "memory", "elem"):
        pos = int(rect.get("data-pos"))
        assert tuple(int(i) for i in rect.get("data-index").split(",")) == multi_index(shape,
                                                                                       pos)
    # (2,3) sits in tile (1,1) at in-tile (0,1): position 17 (the page's example).
    assert 17 in shown


def test_figure1_memory_positions_in_order_and_padding_where_the_buffer_has_it():
    shape = parse_shape(FIG1)
    root = svg_of(FIG1)
    positions = sorted(int(r.get("data-pos")) for r in cells(root, "memory", "elem")
                       + cells(root, "memory", "pad"))
    assert positions == list(range(physical_size(shape)))
    element_positions = {int(r.get("data-pos")) for r in cells(root, "memory", "elem")}
    expected = {linear_index(shape, (r, c)) for r in range(3) for c in range(5)}
    assert element_positions == expected


def test_figure1_tiles_have_distinct_colours_and_boundaries():
    root = svg_of(FIG1)
    for view in ("logical", "memory"):
        colour_of_tile: dict[str, set[str]] = {}
        for rect in cells(root, view, "elem") + cells(root, view, "pad"):
            colour_of_tile.setdefault(rect.get("data-tile"), set()).add(rect.get("fill"))
        assert len(colour_of_tile) == 6  # 2x3 tiles of 2x2
        assert all(len(c) == 1 for c in colour_of_tile.values())  # one colour per tile
        colours = [next(iter(c)) for c in colour_of_tile.values()]
        assert len(set(colours)) == 6
    tiles = [e for e in root.iter() if e.get("class") == "tile"]
    assert len(tiles) == 12  # one outline per tile in each view
    assert not [e for e in root.iter() if e.get("class") == "subtile"]


def test_figure1_caption():
    text = all_text(svg_of(FIG1))
    assert FIG1 in text
    assert "15 elements" in text and "physical size 24 (9 padding)" in text
    assert "96 bytes for 60 bytes of data (1.6x)" in text
    assert "padding overhead 60.0%" in text


# -- figure 2 ------------------------------------------------------------------------------


def test_figure2():
    shape = parse_shape(FIG2)
    root = svg_of(FIG2)
    elems = cells(root, "logical", "elem")
    assert len(elems) == 32 and not cells(root, "logical", "pad")
    assert len(cells(root, "memory", "elem")) == 32 and not cells(root, "memory", "pad")
    for rect in elems:
        index = tuple(int(i) for i in rect.get("data-index").split(","))
        assert int(rect.get("data-pos")) == linear_index(shape, index)
    assert labels(root, "logical") == {p: str(p) for p in range(32)}
    # Four 2x4 tiles, four colours.
    fills = {}
    for rect in elems:
        fills.setdefault(rect.get("data-tile"), set()).add(rect.get("fill"))
    assert len(fills) == 4 and all(len(f) == 1 for f in fills.values())
    assert len({next(iter(f)) for f in fills.values()}) == 4
    # Each 2x1 sub-tile outlined in red: 16 per view; in the logical view a 1-wide,
    # 2-high box around a column pair of rows (2k, 2k+1).
    subtiles = [e for e in root.iter() if e.get("class") == "subtile"]
    assert len(subtiles) == 32
    assert {e.get("stroke") for e in subtiles} == {"#d62728"}
    logical_box = [e for e in root.find(f"{SVG}g[@id='logical']") if e.get("class") == "subtile"]
    cell = float(elems[0].get("width"))
    assert all(float(e.get("height")) > float(e.get("width")) for e in logical_box)
    assert all(float(e.get("height")) < 2 * cell for e in logical_box)


def test_block_sizes():
    assert tile_block_sizes(parse_shape(FIG1)) == (4, 0)
    assert tile_block_sizes(parse_shape(FIG2)) == (8, 2)
    assert tile_block_sizes(parse_shape("f32[3,5]")) == (0, 0)
    assert tile_block_sizes(parse_shape("f32[2,7,8,11,10]{4,3,2,1,0:T(*,*,2,*,3)}")) == (6, 0)


# -- the 16x case, caps, rank > 2 ----------------------------------------------------------


def test_wide_row_takes_16x_its_bytes():
    root = svg_of(WIDE)
    text = all_text(root)
    assert "129 elements" in text and "physical size 2048 (1919 padding)" in text
    assert "8192 bytes for 516 bytes of data (15.9x)" in text
    # Logical view: capped at 64 columns; the 7 padding rows of the 8-row tile show.
    assert len(cells(root, "logical", "elem")) == 64
    assert len(cells(root, "logical", "pad")) == 7 * 64
    assert "columns 0..63 of 129" in text
    # Memory view: the whole buffer, 64 rows of 32 positions.
    assert len(cells(root, "memory", "elem")) == 129
    assert len(cells(root, "memory", "pad")) == 2048 - 129
    assert "Memory view shows" not in text


def test_rank4_slice_caption_and_caps():
    shape_text = "bf16[8,1,1280,16384]{3,2,0,1:T(8,128)(2,1)}"
    root = svg_of(shape_text, at=(3, 0))
    text = all_text(root)
    assert "the slice [3,0,:,:] of the two most minor dimensions" in text
    assert "rows 0..63 of 1280 and columns 0..63 of 16384" in text
    assert "Memory view shows positions 0..2047 of" in text
    shape = parse_shape(shape_text)
    elems = cells(root, "logical", "elem")
    assert len(elems) == 64 * 64 and not cells(root, "logical", "pad")
    for rect in elems[:200]:
        index = tuple(int(i) for i in rect.get("data-index").split(","))
        assert index[:2] == (3, 0)
        assert int(rect.get("data-pos")) == linear_index(shape, index)
    assert len(cells(root, "memory", "elem")) == 2048


def test_column_major_and_tail_padding_and_scalar():
    shape = parse_shape("f32[3,5]{0,1:T(2,2)}")
    root = svg_of("f32[3,5]{0,1:T(2,2)}")
    assert len(cells(root, "logical", "pad")) == 9  # 3 rows padded to 4, 5 cols to 6
    for rect in cells(root, "logical", "elem"):
        index = tuple(int(i) for i in rect.get("data-index").split(","))
        assert int(rect.get("data-pos")) == linear_index(shape, index)
    root = svg_of("f32[5]{0:T(4)L(16)}")
    assert len(cells(root, "logical", "elem")) == 5
    assert len(cells(root, "logical", "pad")) == 3  # tile padding only
    assert len(cells(root, "memory", "pad")) == 11  # + 8 of tail padding
    root = svg_of("f32[]")
    assert len(cells(root, "logical", "elem")) == 1 and labels(root, "logical") == {0: "0"}


# -- the command ---------------------------------------------------------------------------


def test_command_writes_svg_in_subprocess(tmp_path):
    out = tmp_path / "fig1.svg"
    done = run_cli("layout", "--svg", str(out), FIG1)
    assert done.returncode == 0, done.stderr
    assert b"60.0%" in done.stdout  # the text explanation is still printed
    root = parse(out.read_text())
    assert len(cells(root, "memory", "pad")) == 9
    assert out.read_text() == layout_svg(parse_shape(FIG1))


def test_command_svg_to_stdout_and_from_stdin(tmp_path):
    env = dict(os.environ, PYTHONIOENCODING="utf-8")
    done = subprocess.run([sys.executable, "-m", "xlapy", "layout", "--svg", "-", "-"],
                          input=FIG2.encode(), capture_output=True, check=False, timeout=60,
                          env=env)
    assert done.returncode == 0, done.stderr
    root = parse(done.stdout.decode())  # only the SVG on stdout
    assert len(cells(root, "logical", "elem")) == 32


def test_docs_figures_are_what_the_command_draws():
    here = os.path.dirname(__file__)
    for name, text in (("layout_figure1.svg", FIG1), ("layout_figure2.svg", FIG2)):
        with open(os.path.join(here, "..", "..", "docs", name), encoding="utf-8") as f:
            assert f.read() == layout_svg(parse_shape(text)), name


def test_command_errors(tmp_path, capsys):
    assert main(["layout", "--svg", str(tmp_path / "x.svg"), "(f32[2], f32[3])"]) == 2
    assert "draw one array shape" in capsys.readouterr().err
    assert main(["layout", "--svg", str(tmp_path / "no" / "x.svg"), FIG1]) == 2
    assert "cannot write" in capsys.readouterr().err
    assert main(["layout", "--svg", str(tmp_path / "x.svg"), "--at", "9,0",
                 "f32[2,1,3,4]"]) == 2
    assert "--at index 9 is out of range" in capsys.readouterr().err
    assert main(["layout", "--help"]) == 0
    assert "--svg" in capsys.readouterr().out


def test_png_when_a_converter_is_available_or_not(tmp_path):
    """Whatever this machine has: a PNG file, or exit 2 naming what to install."""
    out = tmp_path / "fig2.png"
    done = run_cli("layout", "--png", str(out), FIG2)
    if find_png_converter() is not None:
        assert done.returncode == 0, done.stderr
        assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    else:
        assert done.returncode == 2
        assert b"xlapy[pictures]" in done.stderr and b"librsvg2-bin" in done.stderr
        assert b"Traceback" not in done.stderr
        assert not out.exists()


def test_png_without_a_converter_is_a_clear_error(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(layout_svg_mod, "find_png_converter", lambda: None)
    svg = tmp_path / "x.svg"
    code = main(["layout", "--png", str(tmp_path / "x.png"), "--svg", str(svg), FIG1])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and "error: --png needs an SVG converter" in err
    assert "pip install 'xlapy[pictures]'" in err and "apt-get install librsvg2-bin" in err
    assert not (tmp_path / "x.png").exists()


def test_png_from_pip_packages_alone(tmp_path):
    """The pictures extra's resvg-py (a test dependency) draws the PNG with no system tool:
    PATH holds only an empty directory."""
    pytest.importorskip("resvg_py", reason="the pictures extra (resvg-py) is not installed")
    out = tmp_path / "fig2.png"
    done = run_cli("layout", "--png", str(out), FIG2, env=dict(os.environ, PATH=str(tmp_path)))
    assert done.returncode == 0, done.stderr
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5_000


def test_find_png_converter_prefers_rsvg_convert(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "resvg_py" else real(name, *a))
    monkeypatch.setattr(layout_svg_mod.shutil, "which",
                        lambda name: "/usr/bin/rsvg-convert" if name == "rsvg-convert" else None)
    assert find_png_converter() == "rsvg-convert"
    monkeypatch.setattr(layout_svg_mod.shutil, "which", lambda name: None)
    monkeypatch.setitem(sys.modules, "cairosvg", None)  # import fails
    assert find_png_converter() is None


@pytest.mark.parametrize("text", ["f32[7]{0:T(4)}", "s4[4,6]{1,0:E(4)}",
                                  "f32[2,7,8,11,10]{4,3,2,1,0:T(*,*,2,*,3)}",
                                  "f32[0,3]", "pred[3,5]{0,1}"])
def test_other_shapes_parse_and_labels_match(text):
    shape = parse_shape(text)
    root = svg_of(text)
    for rect in cells(root, "logical", "elem"):
        index = tuple(int(i) for i in rect.get("data-index").split(","))
        assert int(rect.get("data-pos")) == linear_index(shape, index)
    for rect in cells(root, "memory", "elem"):
        pos = int(rect.get("data-pos"))
        assert tuple(int(i) for i in rect.get("data-index").split(",")) == multi_index(shape,
                                                                                       pos)
