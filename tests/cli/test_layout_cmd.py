"""``xlapy layout``: the worked examples of the Tiled layout page, bytes and padding, stdin,
errors (exit code 2, caret excerpt, no traceback), help. Most tests call ``main`` in
process; a few run the real command in a subprocess."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
from pathlib import Path
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xlapy.cli import main
from xlapy.shape import linear_indices, multi_index, parse_shape, physical_size

FIG1 = "f32[3,5]{1,0:T(2,2)}"
FIG2 = "f32[4,8]{1,0:T(2,4)(2,1)}"


def run_inproc(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def run_cli(*argv, stdin=None):
    env = dict(os.environ, PYTHONIOENCODING="utf-8")
    return subprocess.run([sys.executable, "-m", "xlapy", *argv], input=stdin, check=False,
                          capture_output=True, text=True, timeout=60, env=env)


def section(out: str, title_start: str) -> list[str]:
    """Lines of the section whose title starts with ``title_start``, up to a blank line."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(title_start))
    end = next((i for i in range(start, len(lines)) if not lines[i].strip()), len(lines))
    return lines[start:end]


def grid(out: str, title_start: str) -> list[list[str]]:
    """The cells of each table row (``label | cells``) of a picture."""
    return [line.split(" | ", 1)[1].split() for line in section(out, title_start) if " | " in line]


def offsets(out: str) -> list[list[int]]:
    return [[int(c) for c in row] for row in grid(out, "Linear offset")]


# -- figure 1: F32[3,5] with 2x2 tiles ---------------------------------------------------------


def test_figure1_facts(capsys):
    code, out, err = run_inproc(capsys, "layout", FIG1)
    assert code == 0 and err == ""
    assert "[3,5]: 15 elements" in out
    assert "24 elements in the buffer (15 data + 9 padding)" in out
    assert "bytes            96 " in out
    assert "overhead 60.0%" in out
    assert "37.5% of the buffer is padding" in out
    assert "S(0): device memory (HBM)" in out
    assert "covers d0, d1 of [3,5]" in out
    assert "d1: 5 -> 3 tiles of 2 (+1 padding)" in out
    assert "-> [2,3,2,2] = [d0/2, d1/2, d0%2, d1%2]" in out


def test_figure1_offset_grid(capsys):
    _, out, _ = run_inproc(capsys, "layout", FIG1)
    assert offsets(out) == [[0, 1, 4, 5, 8], [2, 3, 6, 7, 10], [12, 13, 16, 17, 20]]
    # Element (2,3) has tile index (1,1), index (0,1) in its tile: offset 17 (the page's example).
    assert offsets(out)[2][3] == 17


def test_figure1_memory_grid(capsys):
    _, out, _ = run_inproc(capsys, "layout", FIG1)
    assert "buffer positions 0..23 in rows of 4 (one 2x2 tile per row)" in out
    assert grid(out, "Memory order") == [
        ["(0,0)", "(0,1)", "(1,0)", "(1,1)"],
        ["(0,2)", "(0,3)", "(1,2)", "(1,3)"],
        ["(0,4)", ".", "(1,4)", "."],
        ["(2,0)", "(2,1)", ".", "."],
        ["(2,2)", "(2,3)", ".", "."],
        ["(2,4)", ".", ".", "."],
    ]


# -- figure 2: repeated tiling (2,4)(2,1) ------------------------------------------------------


def test_figure2_offset_grid(capsys):
    code, out, _ = run_inproc(capsys, "layout", FIG2)
    assert code == 0
    assert offsets(out) == [
        [0, 2, 4, 6, 8, 10, 12, 14],
        [1, 3, 5, 7, 9, 11, 13, 15],
        [16, 18, 20, 22, 24, 26, 28, 30],
        [17, 19, 21, 23, 25, 27, 29, 31],
    ]


def test_figure2_facts_and_memory_order(capsys):
    _, out, _ = run_inproc(capsys, "layout", FIG2)
    assert "32 elements in the buffer (32 data + 0 padding)" in out
    assert "bytes            128 " in out
    assert "none: the buffer holds exactly the elements" in out
    assert "(inside each T(2,4) tile: it only reorders that tile's elements)" in out
    rows = grid(out, "Memory order")
    assert rows[0] == ["(0,0)", "(1,0)", "(0,1)", "(1,1)", "(0,2)", "(1,2)", "(0,3)", "(1,3)"]
    assert rows[2][:2] == ["(2,0)", "(3,0)"]


# -- bytes, padding, memory space, element size ------------------------------------------------


def test_f32_1x129_takes_8192_bytes(capsys):
    code, out, _ = run_inproc(capsys, "layout", "f32[1,129]{1,0:T(8,128)}")
    assert code == 0
    assert "bytes            8192 (8.0 KiB)" in out
    assert "the 129 elements alone take 516 bytes: the buffer is 15.9x its data" in out
    assert "2048 elements in the buffer (129 data + 1919 padding)" in out
    # The memory order folds the all-padding rows.
    assert "... 128..1023: padding" in out


def test_json_facts(capsys):
    code, out, _ = run_inproc(capsys, "layout", "--json", FIG1)
    assert code == 0
    doc = json.loads(out)
    assert doc["elements"] == 15
    assert doc["physical_elements"] == 24
    assert doc["byte_size"] == 96
    assert doc["padding_overhead_percent"] == 60.0
    assert doc["tiles"][0]["covers"] == ["d0", "d1"]
    assert doc["tiles"][0]["shape_after"] == [2, 3, 2, 2]
    _, out, _ = run_inproc(capsys, "layout", "--json", "f32[1,129]{1,0:T(8,128)}")
    doc = json.loads(out)
    assert (doc["byte_size"], doc["data_bytes"]) == (8192, 516)


def test_memory_space_and_tpu_example(capsys):
    shape = "bf16[8,1,1280,16384]{3,2,0,1:T(8,128)(2,1)S(1)}"
    code, out, _ = run_inproc(capsys, "layout", shape)
    assert code == 0
    assert "S(1): VMEM (on-chip)" in out
    assert "major to minor: d1, d0, d2, d3" in out
    assert "bytes            335544320 (320.0 MiB)" in out
    assert "in the slice [0,0,:,:] (leading indices 0)" in out
    assert "rows 32..1279 not shown" in out
    # The (2,1) tile interleaves pairs of rows inside each 8x128 tile.
    assert offsets(out)[0][:4] == [0, 2, 4, 6] and offsets(out)[1][:4] == [1, 3, 5, 7]
    _, out, _ = run_inproc(capsys, "layout", "f32[2]{0:S(5)}")
    assert "S(5): host memory" in out
    _, out, _ = run_inproc(capsys, "layout", "f32[2]{0:S(3)}")
    assert "S(3): a device-specific memory space" in out


def test_at_selects_the_slice(capsys):
    shape = "f32[2,3,4]{2,1,0:T(2,2)}"
    code, out, _ = run_inproc(capsys, "layout", "--at", "1", shape)
    assert code == 0
    assert "in the slice [1,:,:] (from --at)" in out
    expected = linear_indices(parse_shape(shape))[1]
    assert offsets(out) == expected.tolist()
    code, _, err = run_inproc(capsys, "layout", "--at", "1,0", shape)
    assert code == 2 and "--at needs 1 indices" in err
    code, _, err = run_inproc(capsys, "layout", "--at", "2", shape)
    assert code == 2 and "out of range" in err


def test_combined_dimensions(capsys):
    # The Tiled layout page: F32[2,7,8,11,10] combined into F32[112,110], then tiled (2,3).
    _, out, _ = run_inproc(capsys, "layout", "f32[2,7,8,11,10]{4,3,2,1,0:T(*,*,2,*,3)}")
    assert "-> (d0,d1,d2) of size 112" in out
    assert "-> (d3,d4) of size 110" in out
    assert "(d3,d4): 110 -> 37 tiles of 3 (+1 padding)" in out


def test_tail_padding_and_element_size(capsys):
    _, out, _ = run_inproc(capsys, "layout", "f32[3,5]{1,0:T(2,2)L(7)}")
    assert "L(7): 24 elements rounded up to a multiple of 7 -> 28 (+4 padding at the end)" in out
    assert grid(out, "Memory order")[-1] == [".", ".", ".", "."]
    _, out, _ = run_inproc(capsys, "layout", "s4[4,6]{1,0:E(4)}")
    assert "E(4): each element takes 4 bits" in out
    assert "(2 elements per byte)" in out
    assert "bytes            12 " in out


def test_tuple_explains_each_element(capsys):
    code, out, _ = run_inproc(capsys, "layout", "(f32[2], s32[3]{0:T(2)}, token[])")
    assert code == 0
    assert "a tuple of 3 elements" in out
    assert "== element {1}: s32[3]{0:T(2)} ==" in out
    assert "token[]: holds no data (0 bytes)" in out


def test_truncation_note(capsys):
    _, out, _ = run_inproc(capsys, "layout", "--width", "400", "f32[40,40]")
    assert "rows 32..39 not shown (40 rows in all)" in out
    assert "columns 32..39 not shown (40 columns in all)" in out
    assert len(offsets(out)) == 32 and len(offsets(out)[0]) == 32
    # By default the pictures keep to 120 columns.
    _, out, _ = run_inproc(capsys, "layout", "f32[40,40]")
    assert re.search(r"columns \d+\.\.39 not shown", out)
    picture = out[out.index("Linear offset"):]
    assert max(len(line) for line in picture.splitlines()) <= 120


def test_output_is_deterministic(capsys):
    _, first, _ = run_inproc(capsys, "layout", FIG2)
    _, second, _ = run_inproc(capsys, "layout", FIG2)
    assert first == second


@settings(max_examples=40, deadline=None)
@given(
    rows=st.integers(1, 9), cols=st.integers(1, 9),
    tile=st.sampled_from(
        ["", ":T(2,2)", ":T(2,4)(2,1)", ":T(3)", ":T(4,2)(2)", ":T(2,2)L(5)", ":T(*,2)"]),
    order=st.sampled_from(["1,0", "0,1"]),
)
def test_pictures_agree_with_the_shape_layer(rows, cols, tile, order):
    shape_text = f"f32[{rows},{cols}]{{{order}{tile}}}"
    shape = parse_shape(shape_text)
    out_buf = io.StringIO()
    saved = sys.stdout
    sys.stdout = out_buf
    try:
        assert main(["layout", "--max-rows", "1000", shape_text]) == 0
    finally:
        sys.stdout = saved
    out = out_buf.getvalue()
    assert offsets(out) == linear_indices(shape).tolist()
    cells = [c for row in grid(out, "Memory order") for c in row]
    assert len(cells) == physical_size(shape)
    for pos, cell in enumerate(cells):
        if cell != ".":
            assert cell == "(" + ",".join(map(str, multi_index(shape, pos))) + ")"
    assert sum(c != "." for c in cells) == rows * cols


# -- stdin, errors, help -----------------------------------------------------------------------


def test_stdin_dash_inproc(capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO(FIG2 + "\n"))
    code, out, _ = run_inproc(capsys, "layout", "-")
    assert code == 0
    assert offsets(out)[1] == [1, 3, 5, 7, 9, 11, 13, 15]


def test_stdin_dash_subprocess():
    result = run_cli("layout", "-", stdin="f32[1,129]{1,0:T(8,128)}\n")
    assert result.returncode == 0, result.stderr
    assert "bytes            8192" in result.stdout


def test_empty_stdin_is_bad_input(capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO("  \n"))
    code, out, err = run_inproc(capsys, "layout", "-")
    assert code == 2 and out == ""
    assert err == "xlapy layout: error: expected shape text on stdin, got nothing\n"


def test_parse_error_subprocess():
    result = run_cli("layout", "f32[3,5}")
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr == (
        "xlapy layout: error: shape:1:8: expected ',' or ']' in dimension list, found '}'\n"
        "  f32[3,5}\n"
        "         ^\n"
    )
    assert "Traceback" not in result.stderr


def test_parse_error_inproc(capsys):
    code, out, err = run_inproc(capsys, "layout", "f32[3,5]{1,0:T(0,2)}")
    assert code == 2 and out == ""
    first, excerpt, caret = err.rstrip("\n").split("\n")
    assert first.startswith("xlapy layout: error: shape:1:16: tile dimension size must be positive")
    assert excerpt == "  f32[3,5]{1,0:T(0,2)}"
    assert caret.index("^") == excerpt.index("0,2)")
    assert "Traceback" not in err


@pytest.mark.parametrize("text, message", [
    ("f32[?,5]", "unbounded dynamic dimension"),
    ("token[]", "token[] has no layout"),
    ("f32[3,5]{1,1}", "duplicate values"),
    ("", "got an empty argument"),
])
def test_bad_input_exit_2(capsys, text, message):
    code, out, err = run_inproc(capsys, "layout", text)
    assert code == 2 and out == ""
    assert err.startswith("xlapy layout: error: ") and message in err
    assert "Traceback" not in err


def test_debug_shows_traceback():
    result = run_cli("--debug", "layout", "f32[3,5}")
    assert result.returncode == 2
    assert "Traceback" in result.stderr
    assert "xlapy layout: error: shape:1:8:" in result.stderr
    assert run_cli("layout", "--debug", "f32[3,5}").stderr.count("Traceback") == 1


def test_usage_errors_exit_2(capsys):
    assert run_inproc(capsys, "layout")[0] == 2
    assert run_inproc(capsys, "layout", "--max-rows", "0", FIG1)[0] == 2
    assert run_inproc(capsys, "no-such-command")[0] == 2
    code, _, err = run_inproc(capsys)
    assert code == 2 and "layout" in err


def test_help(capsys):
    code, out, _ = run_inproc(capsys, "--help")
    assert code == 0 and "layout" in out and "examples:" in out
    code, out, _ = run_inproc(capsys, "layout", "--help")
    assert code == 0
    assert "examples:" in out and 'xlapy layout "f32[4,8]{1,0:T(2,4)(2,1)}"' in out
    assert "padding overhead  (physical size - elements) / elements" in out


def test_help_subprocess():
    result = run_cli("layout", "--help")
    assert result.returncode == 0
    assert "usage: xlapy layout" in result.stdout


def test_figure2_subprocess():
    result = run_cli("layout", FIG2)
    assert result.returncode == 0 and result.stderr == ""
    assert offsets(result.stdout)[2] == [16, 18, 20, 22, 24, 26, 28, 30]


def test_console_script():
    # The README's commands install xlapy, so its console script must be on PATH (next to
    # this Python when installed in a virtual environment).
    script = shutil.which("xlapy") or shutil.which("xlapy", path=str(Path(sys.executable).parent))
    assert script is not None, "the xlapy console script is not installed"
    result = subprocess.run([script, "layout", "--json", FIG1], check=False, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0
    assert json.loads(result.stdout)["byte_size"] == 96


def test_offsets_match_linear_indices_for_rank_3(capsys):
    shape = "bf16[3,5,7]{0,2,1:T(2,4)}"
    _, out, _ = run_inproc(capsys, "layout", shape)
    assert np.array_equal(np.array(offsets(out)), linear_indices(parse_shape(shape))[0])
