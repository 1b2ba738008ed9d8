"""The layers of xlapy import one way: the layer table of docs/architecture.md (the one place
the order is written) against the import graph of xlapy/.

Every import counts: module level and inside functions, ``import a.b``, ``from a import b``
(``b`` a module or a name), relative imports, ``from xlapy import x``. An import is an edge
to the most specific module it names (``from xlapy.hlo import ir`` is an edge to
``xlapy.hlo.ir``; a package's ``__init__`` run on the way does not count). Each module
belongs to the layer whose listed package or module is its longest prefix; a layer may
import only its own and the layers listed before it in the table. The units of the table
(each package or module a row lists) must not import each other in a cycle either.

Run as a script for the graph: ``python tests/test_layers.py [-v]`` lists the edges between
units, the imports that break the order and the cycles (``-v``: which modules import).
"""

from __future__ import annotations

import ast
import re
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "xlapy"
ARCHITECTURE = ROOT / "docs" / "architecture.md"


def layer_table(text: str | None = None) -> list[tuple[str, list[str]]]:
    """The rows of the Layers table: (layer, its packages and modules as dotted names)."""
    text = ARCHITECTURE.read_text() if text is None else text
    section = text.split("## Layers", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 2 or not line.startswith("|") or cells[0] in ("layer", "---"):
            continue
        paths = re.findall(r"`(xlapy/[^`]*)`", cells[1])
        if not paths:
            continue
        names = [p.rstrip("/").removesuffix(".py").replace("/", ".") for p in paths]
        rows.append((cells[0], names))
    return rows


def modules() -> dict[str, Path]:
    """Every module of xlapy/ by dotted name (a package by its own name)."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def import_edges(mods: dict[str, Path]) -> dict[str, set[str]]:
    """module -> the xlapy modules it imports (anywhere in its body)."""

    def resolve(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    edges: dict[str, set[str]] = defaultdict(set)
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(anchor + ([base] if base else []))
                # ``from pkg import sub`` imports the module pkg.sub when there is one.
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base
                           for a in node.names]
            for target in targets:
                if target == "xlapy" or target.startswith("xlapy."):
                    dst = resolve(target)
                    if dst is not None and dst != name:
                        edges[name].add(dst)
    return edges


def unit_of(module: str, units: list[str]) -> str | None:
    """The longest listed package or module that ``module`` is or lies in."""
    best = None
    for u in units:
        if (module == u or module.startswith(u + ".")) and (best is None or len(u) > len(best)):
            best = u
    return best


def analyse(table=None):
    table = layer_table() if table is None else table
    rank = {u: i for i, (_, names) in enumerate(table) for u in names}
    layer = {u: table[i][0] for u, i in rank.items()}
    units = list(rank)
    mods = modules()
    edges = import_edges(mods)
    unit_edges: dict[tuple[str, str], list[str]] = defaultdict(list)
    unplaced = sorted(m for m in mods if m != "xlapy" and unit_of(m, units) is None)
    for src, dsts in edges.items():
        us = unit_of(src, units)
        for dst in dsts:
            ud = unit_of(dst, units)
            if us is not None and ud is not None and us != ud:
                unit_edges[(us, ud)].append(src)
    upward = sorted((a, b) for a, b in unit_edges if rank[b] > rank[a])
    cycles = cycles_of({a for a, _ in unit_edges} | {b for _, b in unit_edges}, unit_edges)
    return {"table": table, "layer": layer, "unit_edges": unit_edges, "upward": upward,
            "cycles": cycles, "unplaced": unplaced, "edges": edges}


def cycles_of(nodes, edges) -> list[list[str]]:
    """The strongly connected components with more than one node (Tarjan, iterative)."""
    succ = defaultdict(list)
    for a, b in edges:
        succ[a].append(b)
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for start in sorted(nodes):
        if start in index:
            continue
        work = [(start, iter(sorted(succ[start])))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(succ[w]))))
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == v:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))
    return sorted(out)


def test_every_module_has_a_layer():
    assert analyse()["unplaced"] == []


def test_imports_point_down_the_layer_table():
    result = analyse()
    bad = [f"{a} ({result['layer'][a]}) -> {b} ({result['layer'][b]}) in "
           + ", ".join(sorted(set(result["unit_edges"][(a, b)])))
           for a, b in result["upward"]]
    assert bad == []


def test_no_import_cycle_between_packages():
    assert analyse()["cycles"] == []


def test_every_package_directory_is_a_regular_package():
    # The wheel ships what setuptools' find_packages finds: a folder of modules without an
    # __init__.py is left out of it, and the installed xlapy then fails to import.
    folders = {p.parent for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts}
    missing = sorted(str(f.relative_to(ROOT)) for f in folders if not (f / "__init__.py").exists())
    assert missing == []


def test_the_reader_sees_every_kind_of_import(tmp_path):
    # Guards the graph itself: each import form counts.
    result = analyse()
    edges = result["edges"]
    assert "xlapy.hlo.ir" in edges["xlapy.interpreter.evaluator"]  # module level
    assert len(result["table"]) >= 10 and result["table"][0][0] == "errors"
    code = ("from xlapy import ops\nfrom .ir import Module\n"
            "def f():\n    import xlapy.shape.dtypes\n    from xlapy.hlo import ir\n")
    probe = tmp_path / "probe.py"
    probe.write_text(code)
    mods = modules()
    fake = {**mods, "xlapy.hlo.probe": probe}
    got = import_edges(fake)["xlapy.hlo.probe"]
    assert got == {"xlapy.ops", "xlapy.hlo.ir", "xlapy.shape.dtypes"}


if __name__ == "__main__":
    r = analyse()
    by_unit: dict[str, set[str]] = defaultdict(set)
    for a, b in r["unit_edges"]:
        by_unit[a].add(b)
    for name, names in r["table"]:
        for u in names:
            print(f"{name:12} {u} -> {', '.join(sorted(by_unit[u])) or '-'}")
    print("modules without a layer:", r["unplaced"] or "none")
    print("imports up the table:" if r["upward"] else "imports up the table: none")
    for a, b in r["upward"]:
        print(f"  {a} ({r['layer'][a]}) -> {b} ({r['layer'][b]})")
        if "-v" in sys.argv:
            for m in sorted(set(r["unit_edges"][(a, b)])):
                print(f"      {m}")
    print("cycles:", r["cycles"] or "none")
