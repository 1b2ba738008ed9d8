"""HLO graphs as SVG without Graphviz: a layered layout and an SVG writer for the DOT text
xlapy.tools.graph writes, so ``xlapy graph --format svg/png/html`` works on a machine with
pip alone (PNG through the ``resvg-py`` wheel of the ``pictures`` extra; see png_bytes).

Owns: ``dot_to_svg(dot_text)`` and ``png_bytes(svg_text)``. Reads only the DOT that
graph._DotWriter writes (nodes with HTML-like labels, ``subgraph cluster_N`` blocks, solid
operand edges with an index label, dashed call edges); it is no general DOT reader.

The layout (a simplified Sugiyama layering, as Graphviz's ``dot`` does it in full): each node
goes on the layer after the deepest of its predecessors (operands above users, rankdir=TB);
within a layer, nodes are ordered by the mean position of their predecessors (a few
down/up sweeps of the barycenter heuristic), kept together by cluster (a called or fused
computation stays one block); layers are centred. Edges are cubic curves from the bottom
of the operand to the top of the user; long edges may pass behind nodes (no dummy nodes),
which Graphviz would route around. Text sizes are estimated from character counts
(Helvetica's average advance), not measured.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field

__all__ = ["PicturesMissingError", "dot_to_svg", "png_bytes"]

#: Graphviz's Helvetica first; then the free look-alikes a Linux machine has (resvg takes the
#: first family it finds; its own sans-serif default is Arial).
_FONT = "Helvetica, Arial, 'Liberation Sans', 'DejaVu Sans', sans-serif"
_CHAR_WIDTH = 0.58  # of the font size: Helvetica's average advance, digits and lower case
_PAD_X, _PAD_Y = 10.0, 6.0
_LAYER_GAP, _NODE_GAP, _MARGIN = 42.0, 18.0, 20.0


class PicturesMissingError(Exception):
    """No PNG rasteriser is installed (the message says which extra to install)."""


@dataclass
class _Line:
    text: str
    size: float = 11.0
    bold: bool = False
    italic: bool = False


@dataclass
class _Node:
    id: str
    lines: list[_Line]
    attrs: dict
    clusters: tuple[int, ...]
    width: float = 0.0
    height: float = 0.0
    layer: int = 0
    x: float = 0.0
    y: float = 0.0


@dataclass
class _Edge:
    src: str
    dst: str
    label: str = ""
    dashed: bool = False


@dataclass
class _Graph:
    title: str = ""
    nodes: dict[str, _Node] = field(default_factory=dict)
    edges: list[_Edge] = field(default_factory=list)
    cluster_labels: dict[int, str] = field(default_factory=dict)
    cluster_dashed: dict[int, bool] = field(default_factory=dict)


_ATTR = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|[^,\]\s]+)')
_NODE = re.compile(r"^(n\d+) \[label=<(.*)>, (.*)\];$")
_EDGE = re.compile(r"^(n\d+) -> (n\d+)(?: \[(.*)\])?;$")


def _unquote(value: str) -> str:
    if value.startswith('"') and value.endswith('"'):
        return value[1:-1].replace('\\"', '"').replace("\\\\", "\\")
    return value


def _label_lines(label: str) -> list[_Line]:
    """The lines of an HTML-like label: ``<br/>`` breaks, ``<b>``, ``<i>``, point-size."""
    out = []
    for part in label.split("<br/>"):
        size = re.search(r'point-size="([\d.]+)"', part)
        text = html.unescape(re.sub(r"<[^>]*>", "", part))
        out.append(_Line(text, float(size.group(1)) if size else 11.0, "<b>" in part,
                         "<i>" in part))
    return out


def _parse(dot_text: str) -> _Graph:
    g = _Graph()
    stack: list[int] = []
    for raw in dot_text.splitlines():
        line = raw.strip()
        m = re.match(r"^subgraph cluster_(\d+) \{$", line)
        if m:
            stack.append(int(m.group(1)))
            continue
        if line == "}":
            if stack:
                stack.pop()
            continue
        if line.startswith("label=") and line.endswith(";"):
            text = _unquote(line[len("label="):-1])
            if stack:
                g.cluster_labels[stack[-1]] = text
            else:
                g.title = text
            continue
        if line.startswith("style=") and stack:
            g.cluster_dashed[stack[-1]] = "dashed" in line
            continue
        m = _NODE.match(line)
        if m:
            attrs = {k: _unquote(v) for k, v in _ATTR.findall(m.group(3))}
            g.nodes[m.group(1)] = _Node(m.group(1), _label_lines(m.group(2)), attrs,
                                        tuple(stack))
            continue
        m = _EDGE.match(line)
        if m:
            attrs = {k: _unquote(v) for k, v in _ATTR.findall(m.group(3) or "")}
            g.edges.append(_Edge(m.group(1), m.group(2), attrs.get("label", ""),
                                 attrs.get("style") == "dashed"))
    return g


def _size(node: _Node) -> None:
    width = max(len(ln.text) * ln.size * _CHAR_WIDTH * (1.08 if ln.bold else 1.0)
                for ln in node.lines)
    height = sum(ln.size * 1.3 for ln in node.lines)
    shape = node.attrs.get("shape", "box")
    if shape == "ellipse":
        width, height = width * 1.3 + 8, height * 1.25 + 4
    elif shape == "invtrapezium":
        width += 16
    node.width = max(width + 2 * _PAD_X, 28.0)
    node.height = height + 2 * _PAD_Y


@dataclass
class _Item:
    """One box of a layout: a node, or a whole cluster laid out on its own (a block)."""
    key: object  # a node id, or a cluster path (tuple)
    width: float
    height: float
    layer: int = 0
    x: float = 0.0  # centre, relative to the enclosing block
    y: float = 0.0


def _layering(items: list[_Item], edges: set[tuple[int, int]]) -> list[list[_Item]]:
    """Longest-path layers (iterative, in the items' order; an edge closing a cycle, which
    the DOT writer never emits, is ignored), then barycenter ordering."""
    n = len(items)
    preds: list[list[int]] = [[] for _ in range(n)]
    succs: list[list[int]] = [[] for _ in range(n)]
    for a, b in edges:
        preds[b].append(a)
        succs[a].append(b)
    indegree = [len(p) for p in preds]
    ready = [i for i in range(n) if indegree[i] == 0]
    order = []
    while ready:
        i = ready.pop(0)
        order.append(i)
        for j in succs[i]:
            indegree[j] -= 1
            if indegree[j] == 0:
                ready.append(j)
    order += [i for i in range(n) if indegree[i] > 0]
    placed = set()
    for i in order:
        items[i].layer = max((items[p].layer + 1 for p in preds[i] if p in placed), default=0)
        placed.add(i)
    layers: list[list[int]] = [[] for _ in range(max((it.layer for it in items), default=-1) + 1)]
    for i, it in enumerate(items):
        layers[it.layer].append(i)
    position = {i: float(k) for layer in layers for k, i in enumerate(layer)}
    for sweep in range(8):  # barycenter sweeps, down then up
        down = sweep % 2 == 0
        near = preds if down else succs
        for layer in (layers if down else layers[::-1]):
            def bary(i, near=near):
                ps = [position[p] for p in near[i]]
                return sum(ps) / len(ps) if ps else position[i]

            layer.sort(key=bary)
            for k, i in enumerate(layer):
                position[i] = float(k)
    return [[items[i] for i in layer] for layer in layers]


def _place(layers: list[list[_Item]]) -> tuple[float, float]:
    """Centre each layer; returns the width and height used (items' x, y set, from 0)."""
    widths = [sum(it.width for it in layer) + _NODE_GAP * max(len(layer) - 1, 0)
              for layer in layers]
    total = max(widths, default=0.0)
    y = 0.0
    for layer, width in zip(layers, widths):
        x = (total - width) / 2
        tallest = max((it.height for it in layer), default=0.0)
        for it in layer:
            it.x, it.y = x + it.width / 2, y + tallest / 2
            x += it.width + _NODE_GAP
        y += tallest + _LAYER_GAP
    return total, max(y - _LAYER_GAP, 0.0)


_CLUSTER_PAD, _CLUSTER_LABEL = 10.0, 16.0


def _block(g: _Graph, path: tuple, children: dict, direct: dict) -> tuple[_Item, list]:
    """The layout of cluster ``path`` (``()``: the whole graph) as an item whose size holds
    everything inside, plus the (item, sub-layout) tree to place later."""
    items: list[_Item] = []
    subtrees = []
    for node_id in direct.get(path, []):
        node = g.nodes[node_id]
        items.append(_Item(node_id, node.width, node.height))
        subtrees.append(None)
    for child in children.get(path, []):
        item, tree = _block(g, child, children, direct)
        items.append(item)
        subtrees.append(tree)
    index = {}
    for k, it in enumerate(items):
        index[it.key] = k
    depth = len(path)

    def owner(node_id):
        clusters = g.nodes[node_id].clusters
        if clusters[:depth] != path:
            return None
        key = node_id if len(clusters) == depth else clusters[:depth + 1]
        return index.get(key)

    edges = set()
    for e in g.edges:
        if e.src in g.nodes and e.dst in g.nodes:
            a, b = owner(e.src), owner(e.dst)
            if a is not None and b is not None and a != b:
                edges.add((a, b))
    layers = _layering(items, edges)
    width, height = _place(layers)
    if path:
        pad = _CLUSTER_PAD
        label = len(g.cluster_labels.get(path[-1], "")) * 11 * _CHAR_WIDTH
        outer = max(width, label) + 2 * pad  # the label fits inside the box
        block = _Item(path, outer, height + 2 * pad + _CLUSTER_LABEL)
        offset = ((outer - width) / 2, pad + _CLUSTER_LABEL)
    else:
        block = _Item(path, width, height)
        offset = (0.0, 0.0)
    return block, (items, subtrees, offset)


def _emit(g: _Graph, tree, left: float, top: float, boxes: list) -> None:
    """Give every node its absolute centre; collect cluster boxes (path, x, y, w, h)."""
    items, subtrees, (dx, dy) = tree
    for it, sub in zip(items, subtrees):
        x, y = left + dx + it.x, top + dy + it.y
        if sub is None:
            g.nodes[it.key].x, g.nodes[it.key].y = x, y
        else:
            boxes.append((it.key, x - it.width / 2, y - it.height / 2, it.width, it.height))
            _emit(g, sub, x - it.width / 2, y - it.height / 2, boxes)


def _esc(text: str) -> str:
    return html.escape(text, quote=True)


def _node_svg(n: _Node) -> list[str]:
    a = n.attrs
    fill, stroke, color = a.get("fillcolor", "white"), a.get("color", "black"), \
        a.get("fontcolor", "black")
    pen = a.get("penwidth", "1")
    left, top = n.x - n.width / 2, n.y - n.height / 2
    out = [f'<g class="node" id="{n.id}"><title>{_esc(a.get("tooltip", ""))}</title>']
    shape = a.get("shape", "box")
    common = f'fill="{_esc(fill)}" stroke="{_esc(stroke)}" stroke-width="{_esc(pen)}"'
    if shape == "ellipse":
        out.append(f'<ellipse cx="{n.x:.1f}" cy="{n.y:.1f}" rx="{n.width / 2:.1f}" '
                   f'ry="{n.height / 2:.1f}" {common}/>')
    elif shape == "invtrapezium":
        inset = 8.0
        pts = [(left, top), (left + n.width, top), (left + n.width - inset, top + n.height),
               (left + inset, top + n.height)]
        out.append(f'<polygon points="{" ".join(f"{x:.1f},{y:.1f}" for x, y in pts)}" '
                   f'{common}/>')
    else:
        radius = 6 if "rounded" in a.get("style", "") else 0
        out.append(f'<rect x="{left:.1f}" y="{top:.1f}" width="{n.width:.1f}" '
                   f'height="{n.height:.1f}" rx="{radius}" {common}/>')
    y = top + _PAD_Y
    for ln in n.lines:
        y += ln.size * 1.3
        style = (' font-weight="bold"' if ln.bold else "") + \
            (' font-style="italic"' if ln.italic else "")
        out.append(f'<text x="{n.x:.1f}" y="{y - ln.size * 0.35:.1f}" text-anchor="middle" '
                   f'font-size="{ln.size:g}" fill="{_esc(color)}"{style}>{_esc(ln.text)}</text>')
    out.append("</g>")
    return out


def _edge_svg(e: _Edge, nodes: dict[str, _Node]) -> list[str]:
    a, b = nodes.get(e.src), nodes.get(e.dst)
    if a is None or b is None:
        return []
    x1, y1 = a.x, a.y + a.height / 2
    x2, y2 = b.x, b.y - b.height / 2 - 2
    if y2 <= y1:  # same layer or upwards (a call edge into an earlier layer): go round
        y1, y2 = a.y - a.height / 2, b.y + b.height / 2 + 2
    bend = max(abs(y2 - y1) / 2, 20.0) * (1 if y2 > y1 else -1)
    color = "#757575" if e.dashed else "#616161"
    dash = ' stroke-dasharray="5,3"' if e.dashed else ""
    # the arrowhead: a triangle along the curve's last tangent (vertical at the end), drawn
    # as a polygon rather than an SVG marker so the page holds no url() reference at all
    tip = 1 if y2 > y1 else -1
    head = (f"{x2:.1f},{y2:.1f} {x2 - 3.5:.1f},{y2 - 8 * tip:.1f} "
            f"{x2 + 3.5:.1f},{y2 - 8 * tip:.1f}")
    out = [(f'<g class="edge"><path d="M{x1:.1f},{y1:.1f} C{x1:.1f},{y1 + bend:.1f} '
           f'{x2:.1f},{y2 - bend:.1f} {x2:.1f},{y2 - 7 * tip:.1f}" fill="none" '
           f'stroke="{color}"{dash}/><polygon points="{head}" fill="{color}"/>')]
    if e.label:
        out.append(f'<text x="{(x1 + x2) / 2 + 4:.1f}" y="{(y1 + y2) / 2:.1f}" font-size="9" '
                   f'fill="{color}">{_esc(e.label)}</text>')
    out.append("</g>")
    return out


def dot_to_svg(dot_text: str) -> str:
    """An SVG picture of a graph from ``graph.module_to_dot``/``neighborhood_to_dot``."""
    g = _parse(dot_text)
    direct: dict[tuple, list[str]] = {}
    children: dict[tuple, list[tuple]] = {}
    for node in g.nodes.values():
        _size(node)
        direct.setdefault(node.clusters, []).append(node.id)
        for depth in range(len(node.clusters)):
            parent, child = node.clusters[:depth], node.clusters[:depth + 1]
            if child not in children.setdefault(parent, []):
                children[parent].append(child)
    whole, tree = _block(g, (), children, direct)
    title_height = 34.0
    boxes: list = []
    _emit(g, tree, _MARGIN, _MARGIN + title_height, boxes)
    width = max(whole.width + 2 * _MARGIN, len(g.title) * 16 * _CHAR_WIDTH + 2 * _MARGIN)
    height = whole.height + 2 * _MARGIN + title_height
    shift = (width - whole.width - 2 * _MARGIN) / 2  # a wide title: centre the drawing
    for node in g.nodes.values():
        node.x += shift
    body: list[str] = []
    for path, x, y, w, h in boxes:  # outer clusters first: inner ones draw on top
        cid = path[-1]
        dashed = g.cluster_dashed.get(cid, False)
        fill = "none" if dashed else "#f5f5f5"
        dash = ' stroke-dasharray="6,3"' if dashed else ""
        body.append(f'<g class="cluster"><rect x="{x + shift:.1f}" y="{y:.1f}" '
                    f'width="{w:.1f}" height="{h:.1f}" rx="8" fill="{fill}" '
                    f'stroke="#9e9e9e"{dash}/><text x="{x + shift + w / 2:.1f}" '
                    f'y="{y + 13:.1f}" text-anchor="middle" font-size="11">'
                    f'{_esc(g.cluster_labels.get(cid, ""))}</text></g>')
    for e in g.edges:
        body += _edge_svg(e, g.nodes)
    for node in g.nodes.values():
        body += _node_svg(node)
    head = [(f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" '
            f'height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}" '
            f'font-family="{_esc(_FONT)}">'),
            '<rect width="100%" height="100%" fill="white"/>',
            (f'<text x="{width / 2:.1f}" y="{_MARGIN + 12:.1f}" text-anchor="middle" '
            f'font-size="16">{_esc(g.title)}</text>')]
    return "\n".join(head + body + ["</svg>"]) + "\n"


def png_bytes(svg_text: str) -> bytes:
    """``svg_text`` rasterised to PNG by resvg (the ``resvg-py`` wheel: no system library;
    ``pip install 'xlapy[pictures]'``), at twice the SVG's size for legible text."""
    try:
        import resvg_py
    except ImportError:
        raise PicturesMissingError(
            "PNG output needs the resvg-py package (a wheel with no system dependency): pip "
            "install 'xlapy[pictures]' (or pip install resvg-py)") from None
    try:
        return bytes(resvg_py.svg_to_bytes(svg_string=svg_text, zoom=2.0,
                                           background="#ffffff",
                                           sans_serif_family="DejaVu Sans"))
    except (ValueError, TypeError) as e:
        raise PicturesMissingError(f"resvg could not draw the SVG: {e}") from None
