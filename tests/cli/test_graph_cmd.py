"""``xlapy graph``: DOT structure (one node per drawn instruction, one solid edge per operand
use, dashed edges to called computations) on examples/mlp.hlo and a jax module with fusions
and a while loop; --computation, --instruction/--radius, --expand-fusions; escaping; SVG,
PNG and HTML from both engines: xlapy's own layout (always; PNG through resvg-py, a test
dependency) and Graphviz when ``dot`` is installed (else the clear "install graphviz" error;
each test checks whichever holds on this machine, and one test hides ``dot`` from PATH to
check that pictures still work without it)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import xlapy
from xlapy.cli import main
from xlapy.tools.graph import dot_escape, html_escape, module_to_dot, neighborhood_to_dot

ROOT = Path(__file__).resolve().parents[2]
MLP = ROOT / "examples" / "mlp.hlo"
FORI = ROOT / "tests" / "fixtures" / "jax" / "fori_loop.post.hlo"

NODE = re.compile(r"^\s*(n\d+) \[label=<(.*)>, (.*)\];$", re.MULTILINE)
EDGE = re.compile(r"^\s*(n\d+) -> (n\d+)(?: \[(.*)\])?;$", re.MULTILINE)


def nodes(dot: str) -> dict[str, tuple[str, str]]:
    return {m.group(1): (m.group(2), m.group(3)) for m in NODE.finditer(dot)}


def edges(dot: str) -> list[tuple[str, str, str]]:
    return [(m.group(1), m.group(2), m.group(3) or "") for m in EDGE.finditer(dot)]


def solid(dot: str):
    return [e for e in edges(dot) if "dashed" not in e[2]]


def dashed(dot: str):
    return [e for e in edges(dot) if "dashed" in e[2]]


def node_named(dot: str, name: str) -> tuple[str, str, str]:
    """(id, label, attributes) of the node whose label names instruction ``name``."""
    for node, (label, attrs) in nodes(dot).items():
        if f'<font point-size="9">{name}</font>' in label or f"%{name} = " in attrs:
            return node, label, attrs
    raise AssertionError(f"no node for {name}")


def load(path: Path):
    return xlapy.parse_hlo_module(path.read_text())


def run_inproc(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def run_cli(*argv, stdin=None, env=None):
    env = dict(os.environ if env is None else env, PYTHONIOENCODING="utf-8")
    return subprocess.run([sys.executable, "-m", "xlapy", *map(str, argv)], input=stdin,
                          check=False, capture_output=True, text=True, timeout=120, env=env,
                          cwd=ROOT)


def expected_counts(module, comp, expand_fusions: bool) -> tuple[int, int, int]:
    """(nodes, operand edges, call edges) the rules in xlapy.tools.graph promise, counted
    from the IR independently of the writer."""
    def trivial(c):
        others = [i for i in c.instructions if i.opcode != "parameter"]
        return (others == [c.root] and all(o.opcode == "parameter" for o in c.root.operands)
                and not c.root.called_computations())

    n_nodes = n_edges = n_calls = 0
    todo, seen = [comp], {id(comp)}
    while todo:
        c = todo.pop()
        for instr in c.instructions:
            n_edges += len(instr.operands)
            if instr.opcode == "fusion" and expand_fusions:
                todo.append(instr.attrs["calls"])
                continue
            n_nodes += 1
            for callee in instr.called_computations():
                if instr.opcode == "fusion" or trivial(callee):
                    continue
                n_calls += 1
                if id(callee) not in seen:
                    seen.add(id(callee))
                    todo.append(callee)
    return n_nodes, n_edges, n_calls


# -- DOT text ------------------------------------------------------------------------------


def test_mlp_dot_structure(capsys):
    code, out, err = run_inproc(capsys, "graph", MLP)
    assert code == 0 and err == ""
    m = load(MLP)
    entry, relu = m.entry, m.computation("relu.1")
    assert out.startswith("digraph G {") and out.rstrip().endswith("}")
    # The entry plus relu.1 as a cluster; region_0.2/region_1.3 are one op (named inline).
    assert len(nodes(out)) == len(entry.instructions) + len(relu.instructions) == 40
    assert len(solid(out)) == sum(len(i.operands) for c in (entry, relu)
                                  for i in c.instructions) == 40
    assert (len(nodes(out)), len(solid(out)), len(dashed(out))) == expected_counts(
        m, entry, False)
    assert out.count("subgraph cluster_") == 1 and 'label="relu.1"' in out
    # The call edge: from relu.1's root to the call, labelled with the role.
    (src, dst, attrs), = dashed(out)
    assert src == node_named(out, "max.1")[0] and dst == node_named(out, "jit_relu_.1")[0]
    assert 'label="to_apply"' in attrs
    assert "to_apply: maximum (region_0.2)" in node_named(out, "reduce_max.7")[1]
    assert "to_apply=relu.1" in node_named(out, "jit_relu_.1")[1]


def test_mlp_node_styles_and_labels(capsys):
    _, out, _ = run_inproc(capsys, "graph", MLP)
    _, label, attrs = node_named(out, "x.1")
    assert "<b>Parameter 0</b>" in label and "f32[2,4]{1,0}" in label
    assert 'fillcolor="#ffe0b2"' in attrs
    _, label, attrs = node_named(out, "constant.7")
    assert "-inf" in label and 'fillcolor="#bbdefb"' in attrs
    _, label, attrs = node_named(out, "div.7")
    assert "<b>ROOT divide</b>" in label and "bold" in attrs and "penwidth=3" in attrs
    assert "bold" not in node_named(out, "exp.1")[2]
    _, label, attrs = node_named(out, "dot_general.2")
    assert "lhs_contracting_dims={1}" in label and "rhs_contracting_dims={0}" in label
    assert 'fillcolor="#1565c0"' in attrs and 'fontcolor="white"' in attrs
    assert "dimensions={1}" in node_named(out, "reduce_max.7")[1]
    # Operand indices label edges only into instructions with several operands.
    into_div = [e for e in solid(out) if e[1] == node_named(out, "div.7")[0]]
    assert sorted(e[2] for e in into_div) == ['label="0"', 'label="1"']
    into_exp = [e for e in solid(out) if e[1] == node_named(out, "exp.1")[0]]
    assert [e[2] for e in into_exp] == [""]
    # Every node carries its instruction text as a tooltip.
    assert 'tooltip="%div.7 = f32[2,3]{1,0} divide(%exp.1, %div.6)"' in node_named(
        out, "div.7")[2]


def test_fusions_and_while_collapsed():
    m = load(FORI)
    dot = module_to_dot(m)
    assert (len(nodes(dot)), len(solid(dot)), len(dashed(dot))) == (30, 33, 3)
    assert (30, 33, 3) == expected_counts(m, m.entry, False)
    roles = sorted(re.search(r'label="([^"]+)"', e[2]).group(1) for e in dashed(dot))
    assert roles == ["body", "condition", "to_apply"]
    _, label, attrs = node_named(dot, "broadcast_add_fusion")
    assert "<b>fusion kLoop</b>" in label and "6 fused ops" in label
    assert "calls" not in label and 'fillcolor="#cfd8dc"' in attrs
    _, label, attrs = node_named(dot, "while.0")
    assert "shape=ellipse" in attrs and "body=region_0.2" in label
    assert "condition=region_2.3" in label and "ROOT while" in label
    # get-tuple-element and tuple are compact: index / operand count only.
    assert node_named(dot, "while.9")[1] == '<font point-size="10">#2</font>'
    assert "<b>tuple</b> (4)" in node_named(dot, "tuple")[1]
    assert "1 fused op: compare" in node_named(dot, "wrapped_compare")[1]
    for name in ("region_0.2", "region_2.3", "while.6_computation"):
        assert f'label="{name}"' in dot
    assert "fused_computation" not in "".join(lbl for lbl, _ in nodes(dot).values()
                                              if "fusion" not in lbl)


def test_fusions_expanded():
    m = load(FORI)
    dot = module_to_dot(m, expand_fusions=True)
    # 4 fusion nodes replaced by their 19 fused instructions; every operand use still an edge.
    assert (len(nodes(dot)), len(solid(dot)), len(dashed(dot))) == (45, 48, 3)
    assert (45, 48, 3) == expected_counts(m, m.entry, True)
    assert "reduce_add_fusion: fusion (kLoop), fused_computation" in dot
    assert "direction=LT" in node_named(dot, "lt.0")[1]
    # The fusion's operands feed the fused parameters; its user reads the fused root.
    fused = m.computation("fused_computation.1")
    p0 = node_named(dot, fused.parameter(0).name)[0]
    p1 = node_named(dot, fused.parameter(1).name)[0]
    copy3, copy4 = node_named(dot, "copy.3")[0], node_named(dot, "copy.4")[0]
    assert (copy3, p0, 'label="0"') in solid(dot) and (copy4, p1, 'label="1"') in solid(dot)
    root, tup = node_named(dot, "add.1")[0], node_named(dot, "tuple.4")[0]
    assert (root, tup, 'label="1"') in solid(dot)


@pytest.mark.parametrize("fixture", ["argsort", "cond", "scan_rnn", "conv2d_grad"])
@pytest.mark.parametrize("expand", [False, True])
def test_counts_on_jax_fixtures(fixture, expand):
    m = load(ROOT / "tests" / "fixtures" / "jax" / f"{fixture}.post.hlo")
    dot = module_to_dot(m, expand_fusions=expand)
    assert (len(nodes(dot)), len(solid(dot)), len(dashed(dot))) == expected_counts(
        m, m.entry, expand)


def test_one_computation(capsys):
    code, out, _ = run_inproc(capsys, "graph", FORI, "--computation", "%region_2.3")
    assert code == 0
    assert 'label="jit_fori_loop: region_2.3"' in out
    assert (len(nodes(out)), len(solid(out)), len(dashed(out))) == (4, 4, 0)
    code, out, _ = run_inproc(capsys, "graph", FORI, "-c", "main.4", "--no-calls")
    assert code == 0 and "ENTRY main.4" in out and "subgraph" not in out
    assert (len(nodes(out)), len(solid(out)), len(dashed(out))) == (12, 12, 0)


def test_neighbourhood(capsys):
    code, out, _ = run_inproc(capsys, "graph", MLP, "--instruction", "add.15", "--radius", "1")
    assert code == 0
    names = sorted(re.findall(r'<font point-size="9">([^<]+)</font>', out))
    assert names == ["add.14", "add.15", "dot_general.3", "reduce_max.7", "sub.7"]
    assert len(solid(out)) == 4 and not dashed(out)
    assert 'color="#d32f2f"' in node_named(out, "add.15")[2]
    assert "+ 1 operand and 1 user not shown" in node_named(out, "sub.7")[1]
    m = load(MLP)
    assert len(nodes(neighborhood_to_dot(m, "add.15", 0))) == 1
    # Radius 2 reaches operands of operands and users of users, in both directions.
    dot2 = neighborhood_to_dot(m, m.entry.instruction("add.15"), 2)
    names2 = set(re.findall(r'<font point-size="9">([^<]+)</font>', dot2))
    assert {"jit_relu_.1", "w2.1", "add.13", "max.3", "exp.1", "sub.6", "constant.7"} <= names2
    assert len(names2) == 12
    assert len(nodes(neighborhood_to_dot(m, "add.15", 1000))) == len(m.entry.instructions)


def test_neighbourhood_in_called_computation_and_fusion():
    m = load(FORI)
    dot = neighborhood_to_dot(m, "%copy.4", 1, expand_fusions=True)
    # copy.4's operand (a GTE) and its two fusion users, expanded: each fused computation.
    assert "get-tuple-element.9 =" in dot and "broadcast_add_fusion: fusion" in dot
    assert len(nodes(dot)) == 2 + 5 + 8
    assert len(solid(dot)) == 1 + 2 + (4 + 7)


def test_bad_names_exit_2(capsys):
    code, out, err = run_inproc(capsys, "graph", MLP, "--instruction", "add.155")
    assert code == 2 and out == ""
    assert err.startswith("xlapy graph: error: module jit_mlp has no instruction %add.155")
    assert "did you mean %add.15" in err and "Traceback" not in err
    code, _, err = run_inproc(capsys, "graph", MLP, "--computation", "nope")
    assert code == 2 and "has no computation %nope; it has %relu.1" in err
    code, _, err = run_inproc(capsys, "graph", MLP, "--radius", "3")
    assert code == 2 and "--radius applies to --instruction NAME only" in err
    code, _, err = run_inproc(capsys, "graph", MLP, "-i", "add.15", "--radius", "-1")
    assert code == 2 and "expected an integer >= 0" in err
    code, _, err = run_inproc(capsys, "graph", "/nonexistent/m.hlo")
    assert code == 2 and "cannot read /nonexistent/m.hlo" in err


ODD = r'''HloModule odd

ENTRY e {
  p = f32[2]{0} parameter(0)
  ROOT c = f32[2]{0} custom-call(p), custom_call_target="a<b>&\"q\"\\x"
}
'''


def test_escaping():
    assert dot_escape('a"b\\c\nd') == 'a\\"b\\\\c\\nd'
    assert html_escape("<a & 'b' \"c\">") == "&lt;a &amp; &#39;b&#39; &quot;c&quot;&gt;"
    m = xlapy.parse_hlo_module(ODD)
    dot = module_to_dot(m)
    _, label, attrs = node_named(dot, "c")
    # HTML-like label: entities; tooltip: a DOT string with \" and \\.
    assert 'custom_call_target=&quot;a&lt;b&gt;&amp;\\&quot;q\\&quot;\\\\x&quot;' in label
    assert 'tooltip="%c = f32[2]{0} custom-call(%p), custom_call_target=\\"a<b>&\\\\\\"q' \
        in attrs
    assert "<b>ROOT custom-call</b>" in label and 'fillcolor="#2e7d32"' in attrs


# -- SVG, PNG, HTML: Graphviz when installed, the install hint when not ---------------------


def assert_needs_graphviz(code, err):
    assert code == 2
    assert "needs Graphviz's 'dot' program" in err and "apt-get install graphviz" in err
    assert "Traceback" not in err


def check_svg(svg_text: str, dot_text: str):
    root = ET.fromstring(svg_text)
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    groups = [g.get("class") for g in root.iter("{http://www.w3.org/2000/svg}g")]
    assert groups.count("node") == len(nodes(dot_text))
    assert groups.count("edge") == len(edges(dot_text))
    assert groups.count("cluster") == dot_text.count("subgraph cluster_")


HAVE_DOT = shutil.which("dot") is not None
ENGINES = ["xlapy", "graphviz"]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("path,extra", [(MLP, []), (FORI, ["--expand-fusions"]),
                                        (FORI, ["-i", "copy.4", "-r", "2"])])
def test_svg(capsys, tmp_path, path, extra, engine):
    _, dot_text, _ = run_inproc(capsys, "graph", path, *extra)
    target = tmp_path / "g.svg"
    code, out, err = run_inproc(capsys, "graph", path, *extra, "--format", "svg", "-o", target,
                                "--engine", engine)
    if engine == "graphviz" and not HAVE_DOT:
        assert_needs_graphviz(code, err)
        assert not target.exists()
        return
    assert code == 0 and out == "" and f"wrote {target}" in err
    check_svg(target.read_text(encoding="utf-8"), dot_text)


@pytest.mark.parametrize("engine", ENGINES)
def test_svg_to_stdout_and_odd_names(engine):
    m = xlapy.parse_hlo_module(ODD)
    dot_text = module_to_dot(m)
    proc = run_cli("graph", "-", "--format", "svg", "--engine", engine, stdin=ODD)
    if engine == "graphviz" and not HAVE_DOT:
        assert_needs_graphviz(proc.returncode, proc.stderr)
        return
    assert proc.returncode == 0, proc.stderr
    check_svg(proc.stdout, dot_text)
    assert "a&lt;b&gt;&amp;" in proc.stdout  # the label survived the layout and XML


@pytest.mark.parametrize("engine", ENGINES)
def test_png(capsys, tmp_path, engine):
    target = tmp_path / "g.png"
    code, _, err = run_inproc(capsys, "graph", MLP, "-f", "png", "-o", target,
                              "--engine", engine)
    if engine == "graphviz" and not HAVE_DOT:
        assert_needs_graphviz(code, err)
        return
    assert code == 0, err
    data = target.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000


@pytest.mark.parametrize("engine", ENGINES)
def test_html(capsys, tmp_path, engine):
    target = tmp_path / "g.html"
    code, _, err = run_inproc(capsys, "graph", FORI, "--expand-fusions", "-f", "html",
                              "-o", target, "--engine", engine)
    if engine == "graphviz" and not HAVE_DOT:
        assert_needs_graphviz(code, err)
        return
    assert code == 0
    page = target.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and "<title>jit_fori_loop: ENTRY main.4</title>" \
        in page
    for network in ("<script", "<link", "src=", "@import", "url("):
        assert network not in page
    svg = page[page.index("<svg"): page.index("</svg>") + len("</svg>")]
    check_svg(svg, module_to_dot(load(FORI), expand_fusions=True))


def test_xlapy_layout_geometry():
    """xlapy's layout: every operand above its user, no two nodes of the picture overlap,
    and every node of a cluster inside its cluster's box."""
    from xlapy.tools import graph_svg

    dot_text = module_to_dot(load(FORI), expand_fusions=True)
    root = ET.fromstring(graph_svg.dot_to_svg(dot_text))
    ns = "{http://www.w3.org/2000/svg}"
    boxes = {}
    for g in root.iter(f"{ns}g"):
        if g.get("class") == "node":
            shape = next(e for e in g if e.tag != f"{ns}title")
            if shape.tag == f"{ns}ellipse":
                cx, cy = float(shape.get("cx")), float(shape.get("cy"))
                rx, ry = float(shape.get("rx")), float(shape.get("ry"))
                boxes[g.get("id")] = (cx - rx, cy - ry, cx + rx, cy + ry)
            elif shape.tag == f"{ns}rect":
                x, y = float(shape.get("x")), float(shape.get("y"))
                boxes[g.get("id")] = (x, y, x + float(shape.get("width")),
                                      y + float(shape.get("height")))
            else:  # polygon
                pts = [tuple(map(float, p.split(","))) for p in shape.get("points").split()]
                xs, ys = [p[0] for p in pts], [p[1] for p in pts]
                boxes[g.get("id")] = (min(xs), min(ys), max(xs), max(ys))
    assert len(boxes) == len(nodes(dot_text))
    ids = sorted(boxes)
    for i, a in enumerate(ids):
        for b in ids[i + 1:]:
            A, B = boxes[a], boxes[b]
            assert A[2] <= B[0] or B[2] <= A[0] or A[3] <= B[1] or B[3] <= A[1], (a, b)
    for src, dst, attrs in edges(dot_text):
        if "dashed" not in (attrs or ""):
            assert boxes[src][3] <= boxes[dst][1], (src, dst)  # operand above its user


def test_png_without_resvg(capsys, tmp_path, monkeypatch):
    """--engine xlapy --format png without the resvg-py wheel: what to install, exit 2."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "resvg_py" else real(name, *a))
    code, _, err = run_inproc(capsys, "graph", MLP, "-f", "png", "-o", tmp_path / "g.png",
                              "--engine", "xlapy")
    assert code == 2 and "pip install 'xlapy[pictures]'" in err
    assert not (tmp_path / "g.png").exists()


def test_png_and_html_need_a_file(capsys):
    for fmt in ("png", "html"):
        code, _, err = run_inproc(capsys, "graph", MLP, "-f", fmt)
        assert code == 2 and f"--format {fmt} writes a file: give -o FILE" in err


def test_without_graphviz_on_path(tmp_path):
    """Hide ``dot`` (PATH holds only an empty directory): every picture format is drawn by
    xlapy's own layout (pip packages only); --engine graphviz is a clear error, exit 2."""
    env = dict(os.environ, PATH=str(tmp_path))
    for fmt in ("svg", "png", "html"):
        target = tmp_path / f"g.{fmt}"
        proc = run_cli("graph", MLP, "-f", fmt, "-o", target, env=env)
        assert proc.returncode == 0, proc.stderr
        assert target.stat().st_size > 10_000
        proc = run_cli("graph", MLP, "-f", fmt, "-o", tmp_path / f"h.{fmt}", "--engine",
                       "graphviz", env=env)
        assert_needs_graphviz(proc.returncode, proc.stderr)
        assert proc.stderr.count("\n") == 1  # one line
        assert not (tmp_path / f"h.{fmt}").exists()
    proc = run_cli("graph", MLP, env=env)
    assert proc.returncode == 0 and len(nodes(proc.stdout)) == 40


# -- the real command ----------------------------------------------------------------------


def test_subprocess_stdin_and_output_file(tmp_path):
    proc = run_cli("graph", "-", "--computation", "relu.1", stdin=MLP.read_text())
    assert proc.returncode == 0, proc.stderr
    assert len(nodes(proc.stdout)) == 4 and len(solid(proc.stdout)) == 3
    target = tmp_path / "m.dot"
    proc = run_cli("graph", MLP, "-o", target)
    assert proc.returncode == 0 and proc.stdout == ""
    assert target.read_text() == module_to_dot(load(MLP))
    proc = run_cli("graph", "-", stdin="")
    assert proc.returncode == 2 and "the module text is empty" in proc.stderr


def test_help_lists_examples():
    proc = run_cli("graph", "--help")
    assert proc.returncode == 0
    assert "xlapy graph examples/mlp.hlo --format svg -o mlp.svg" in proc.stdout
    assert "--expand-fusions" in proc.stdout and "pip install 'xlapy[pictures]'" in proc.stdout
    proc = run_cli("--help")
    assert "graph" in proc.stdout
