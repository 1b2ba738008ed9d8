"""HLO graphs for people: a module, one computation, or the neighbourhood of one instruction
as Graphviz DOT text; DOT to SVG/PNG through Graphviz's ``dot`` program; a self-contained
HTML page with the SVG inlined.

Owns: ``module_to_dot``, ``neighborhood_to_dot``, ``render`` (``dot -T<format>``),
``html_page`` and ``GraphvizNotFoundError``. Used by ``xlapy graph``.

Drawing rules (after XLA's hlo_graph_dumper): one node per instruction drawn, labelled with
its opcode, name, key attributes (non-default schema attributes, called computations by name),
its sharding and result shape; parameters and constants in their own fills, the root bold; a fusion is
one node (its kind and fused op count) unless ``expand_fusions`` draws its fused computation
in a cluster (the fusion's operands then feed the fused parameters and its users read the
fused root); other called computations are clusters with a dashed edge from their root to
the caller, except trivial ones (a single op on parameters, like a reduction's ``add``),
which are named in the caller's label. get-tuple-element and tuple are small nodes. Operand
edges run from operand to user, labelled with the operand index when the user has several.

So the DOT text has one node per drawn instruction and one solid edge per operand use
among drawn instructions (a test relies on this); call edges are ``style=dashed``.
"""

from __future__ import annotations

import shutil
import subprocess
from collections import deque

from xlapy.errors import XlaError
from xlapy.hlo.ir import Computation, Instruction, Module

__all__ = [
    "INSTALL_HINT",
    "GraphvizFailedError",
    "GraphvizNotFoundError",
    "dot_escape",
    "find_instruction",
    "html_escape",
    "html_page",
    "module_to_dot",
    "neighborhood_to_dot",
    "render",
]

INSTALL_HINT = ("install Graphviz for SVG/PNG/HTML output (Debian/Ubuntu: apt-get install "
                "graphviz; macOS: brew install graphviz; conda: conda install graphviz), or use "
                "--format dot")

# Fill, border and font colors of XLA's hlo_graph_dumper color schemes.
_WHITE = ("white", "#9e9e9e", "black")
_YELLOW = ("#fff9c4", "#cbc693", "black")
_GREEN = ("#c8e6c9", "#97b498", "black")
_DARK_BLUE = ("#1565c0", "#003c8f", "white")
_ORANGE = ("#ffe0b2", "#cbae82", "black")  # parameters
_BLUE = ("#bbdefb", "#8aacc8", "black")  # constants (XLA paints them white)
_PURPLE = ("#e1bee7", "#af8eb5", "black")
_GRAY = ("#cfd8dc", "#9ea7aa", "black")
_BROWN = ("#bcaaa4", "#8c7b75", "black")
_DARK_GREEN = ("#2e7d32", "#005005", "white")

_COLOR_BY_OPCODE: dict[str, tuple[str, str, str]] = {}
for _names, _scheme in [
    ("broadcast dynamic-update-slice", _YELLOW),
    (("concatenate dynamic-slice reshape dynamic-reshape reverse transpose copy copy-start "
      "copy-done slice"), _GREEN),
    ("convolution dot ragged-dot scaled-dot fft triangular-solve cholesky", _DARK_BLUE),
    (("batch-norm-grad batch-norm-inference batch-norm-training reduce reduce-window scan "
      "scatter select-and-scatter gather sort"), _PURPLE),
    ("domain fusion map get-dimension-size set-dimension-size", _GRAY),
    (("all-gather all-gather-start all-gather-done all-reduce reduce-scatter all-reduce-start "
      "all-reduce-done all-to-all collective-broadcast collective-permute "
      "collective-permute-start collective-permute-done infeed outfeed partition-id "
      "ragged-all-to-all recv recv-done send send-done replica-id"), _BROWN),
    ("call conditional custom-call while", _DARK_GREEN),
    ("parameter", _ORANGE),
    ("constant", _BLUE),
]:
    for _name in _names.split():
        _COLOR_BY_OPCODE[_name] = _scheme

_MAX_ATTR_CHARS = 60
_SHARDING_COLOR = "#6a1b9a"
_MAX_SHAPE_CHARS = 80
_MAX_TOOLTIP_CHARS = 600


class GraphvizNotFoundError(XlaError):
    """Graphviz's ``dot`` program is not installed (or not on PATH)."""


class GraphvizFailedError(XlaError):
    """``dot`` ran and failed."""


# -- escaping ------------------------------------------------------------------------------


def dot_escape(text: str) -> str:
    """``text`` as the inside of a DOT double-quoted string."""
    return (text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
            .replace("\r", ""))


def html_escape(text: str) -> str:
    """``text`` for HTML (and Graphviz HTML-like labels): & < > " ' as entities."""
    return (text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace('"', "&quot;").replace("'", "&#39;"))


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


# -- facts about instructions --------------------------------------------------------------


def _called(instr: Instruction) -> list[tuple[str, Computation]]:
    """(role, computation) for each computation ``instr`` calls: the attribute name, with
    ``[j]`` for lists (branch_computations[1])."""
    out = []
    for key, value in instr.attrs.items():
        if isinstance(value, Computation):
            out.append((key, value))
        elif isinstance(value, tuple) and value and all(isinstance(v, Computation) for v in value):
            out.extend((f"{key}[{j}]", v) for j, v in enumerate(value))
    return out


def _is_trivial(comp: Computation) -> bool:
    """One op applied to parameters (a reduction's add, a sort's compare): described in the
    caller's label instead of being drawn."""
    root = comp.root
    if root is None or root.opcode == "parameter" or _called(root):
        return False
    others = [i for i in comp.instructions if i.opcode != "parameter"]
    return others == [root] and all(op.opcode == "parameter" for op in root.operands)


def _fused_op_count(comp: Computation) -> int:
    return sum(1 for i in comp.instructions if i.opcode != "parameter")


def _attribute_lines(instr: Instruction) -> list[str]:
    """``key=value`` texts of the non-default schema attributes, called computations
    excluded (the graph shows those itself)."""
    from xlapy.hlo.printer import HloPrintOptions, attribute_texts

    if instr.opcode in ("parameter", "constant", "get-tuple-element", "tuple"):
        return []
    skip = {key for key, value in instr.attrs.items()
            if isinstance(value, Computation)
            or (isinstance(value, tuple) and value and isinstance(value[0], Computation))}
    skip |= {"sharding", "frontend_attributes", "control-predecessors", "statistics",
             "result_accuracy", "origin", "kind", "output_to_operand_aliasing"}
    opts = HloPrintOptions(print_metadata=False, print_frontend_attributes=False,
                           print_control_dependencies=False, print_percent=False)
    try:
        texts = attribute_texts(instr, opts)
    except Exception:  # noqa: BLE001 - a picture should not fail on an odd attribute
        texts = []
    return [_clip(t, _MAX_ATTR_CHARS) for t in texts if t.split("=", 1)[0] not in skip]


def _tooltip(instr: Instruction) -> str:
    from xlapy.hlo.printer import instruction_to_string

    try:
        text = instruction_to_string(instr, print_metadata=False, print_backend_config=False)
    except Exception:  # noqa: BLE001
        text = f"%{instr.name} = {instr.shape} {instr.opcode}(...)"
    return _clip(text, _MAX_TOOLTIP_CHARS)


def _constant_text(instr: Instruction) -> str:
    literal = instr.attrs.get("literal")
    if literal is None:
        return ""
    try:
        return _clip(literal.to_hlo_text(print_large_constants=False), 40)
    except Exception:  # noqa: BLE001
        return ""


def find_instruction(module: Module, name: str,
                     computation: Computation | None = None) -> Instruction:
    """The instruction called ``name`` (a leading % is ignored), in ``computation`` or
    anywhere in ``module``; InvalidArgumentError naming close matches if absent."""
    from difflib import get_close_matches

    from xlapy.errors import InvalidArgumentError

    name = name.lstrip("%")
    comps = [computation] if computation is not None else module.computations
    names = []
    for comp in comps:
        for instr in comp.instructions:
            if instr.name == name:
                return instr
            names.append(instr.name)
    where = f"computation %{computation.name}" if computation is not None else \
        f"module {module.name}"
    close = get_close_matches(name, names, n=3)
    hint = f"; did you mean {', '.join('%' + c for c in close)}?" if close else ""
    raise InvalidArgumentError(f"{where} has no instruction %{name}{hint}")


# -- the DOT writer ------------------------------------------------------------------------


class _DotWriter:
    def __init__(self, *, expand_fusions: bool, draw_calls: bool):
        self.expand_fusions = expand_fusions
        self.draw_calls = draw_calls
        self.ids: dict[int, str] = {}  # id(instr) -> node id
        self.out_node: dict[int, str] = {}  # node that produces instr's value
        self.in_nodes: dict[int, list[str]] = {}  # expanded fusion: operand i -> fused param
        self.drawn: list[Instruction] = []  # instructions with a node or an expansion
        self.body: list[str] = []
        self.edges: list[str] = []
        self.pending_calls: list[Computation] = []
        self.call_edges: list[tuple[Computation, Instruction, str]] = []
        self.seen_comps: set[int] = set()
        self.focus: Instruction | None = None
        self.notes: dict[int, str] = {}  # id(instr) -> extra label line
        self.clusters = 0

    def _new_id(self, instr: Instruction) -> str:
        node = f"n{len(self.ids)}"
        self.ids[id(instr)] = node
        return node

    # -- nodes ---------------------------------------------------------------------------

    def add_instructions(self, instrs: list[Instruction], indent: str) -> None:
        for instr in instrs:
            if instr.opcode == "fusion" and self.expand_fusions and "calls" in instr.attrs:
                self._expand_fusion(instr, indent)
            else:
                self._node(instr, indent)

    def _expand_fusion(self, instr: Instruction, indent: str) -> None:
        fused: Computation = instr.attrs["calls"]
        self.clusters += 1
        kind = instr.attrs.get("kind")
        kind_text = f" ({_enum_text(kind)})" if kind is not None else ""
        title = f"{instr.name}: fusion{kind_text}, {fused.name}"
        self.body.append(f'{indent}subgraph cluster_{self.clusters} {{')
        inner = indent + "  "
        self.body += [f'{inner}label="{dot_escape(title)}";',
                      f'{inner}tooltip="{dot_escape(_tooltip(instr))}";',
                      f'{inner}style="rounded,filled"; fillcolor="#f5f5f5"; color="#9e9e9e";']
        self.add_instructions(fused.instructions, inner)
        self.body.append(f"{indent}}}")
        self.drawn.append(instr)
        params = {p.parameter_number: p for p in fused.parameters}
        self.in_nodes[id(instr)] = [self.out_node[id(params[i])] if i in params else ""
                                    for i in range(len(instr.operands))]
        self.out_node[id(instr)] = self.out_node[id(fused.root)]
        self.seen_comps.add(id(fused))

    def _node(self, instr: Instruction, indent: str) -> None:
        node = self._new_id(instr)
        self.out_node[id(instr)] = node
        self.drawn.append(instr)
        is_root = instr.parent is not None and instr.parent.root is instr
        fill, border, font = _COLOR_BY_OPCODE.get(instr.opcode, _WHITE)
        attrs = {"tooltip": f'"{dot_escape(_tooltip(instr))}"'}
        op = instr.opcode
        shape_text = html_escape(_clip(str(instr.shape), _MAX_SHAPE_CHARS))
        root_mark = "ROOT " if is_root else ""
        if op == "get-tuple-element":
            label = f'<font point-size="10">{root_mark}#{instr.attrs.get("index")}</font>'
            attrs.update(shape="ellipse", margin='"0.04,0.02"', height="0.3", width="0.3")
        elif op == "tuple":
            label = (f'<font point-size="10">{root_mark}<b>tuple</b> '
                     f'({len(instr.operands)})</font>')
            attrs.update(shape="invtrapezium", margin='"0.04,0.02"', height="0.3")
        else:
            lines = []
            if op == "parameter":
                head = f"Parameter {instr.attrs.get('parameter_number')}"
            elif op == "fusion":
                kind = instr.attrs.get("kind")
                head = "fusion" + (f" {_enum_text(kind)}" if kind is not None else "")
            else:
                head = op
            lines.append(f"<b>{html_escape(root_mark + head)}</b>")
            lines.append(f'<font point-size="9">{html_escape(instr.name)}</font>')
            if op == "constant":
                value = _constant_text(instr)
                if value:
                    lines.append(html_escape(value))
            if op == "fusion" and "calls" in instr.attrs:
                fused = instr.attrs["calls"]
                n = _fused_op_count(fused)
                if n == 1:  # a wrapped single op: say which
                    lines.append(html_escape(f"1 fused op: {fused.root.opcode}"))
                else:
                    lines.append(html_escape(f"{n} fused ops"))
            lines += [html_escape(t) for t in _attribute_lines(instr)]
            if instr.sharding:  # XLA's dumper prints the sharding too
                lines.append(f'<font color="{_SHARDING_COLOR}">'
                             f'{html_escape(_clip("sharding=" + instr.sharding, _MAX_ATTR_CHARS))}'
                             f'</font>')
            for role, comp in _called(instr):
                if op == "fusion" and role == "calls":
                    continue
                if _is_trivial(comp):
                    lines.append(html_escape(f"{role}: {comp.root.opcode} ({comp.name})"))
                else:
                    lines.append(html_escape(f"{role}={comp.name}"))
                    if self.draw_calls:
                        self.call_edges.append((comp, instr, role))
                        if id(comp) not in self.seen_comps:
                            self.seen_comps.add(id(comp))
                            self.pending_calls.append(comp)
            note = self.notes.get(id(instr))
            if note:
                lines.append(f'<i>{html_escape(note)}</i>')
            lines.append(shape_text)
            label = "<br/>".join(lines)
            attrs["shape"] = "ellipse" if op == "while" else "box"
        style = ["filled"]
        if op not in ("get-tuple-element", "tuple") and op != "while":
            style.append("rounded")
        if is_root:
            style.append("bold")
            attrs["penwidth"] = "3"
        if self.focus is instr:
            attrs["penwidth"] = "4"
            border = "#d32f2f"
        attrs.update(style=f'"{",".join(style)}"', fillcolor=f'"{fill}"', color=f'"{border}"',
                     fontcolor=f'"{font}"')
        attr_text = ", ".join(f"{k}={v}" for k, v in attrs.items())
        self.body.append(f"{indent}{node} [label=<{label}>, {attr_text}];")

    # -- edges ---------------------------------------------------------------------------

    def add_operand_edges(self) -> None:
        drawn = {id(i) for i in self.drawn}
        for instr in self.drawn:
            many = len(instr.operands) > 1
            targets = self.in_nodes.get(id(instr))
            for i, op in enumerate(instr.operands):
                if id(op) not in drawn:
                    continue
                dst = targets[i] if targets is not None else self.out_node[id(instr)]
                if not dst:
                    continue
                label = f' [label="{i}"]' if many else ""
                self.edges.append(f"  {self.out_node[id(op)]} -> {dst}{label};")

    def add_call_clusters(self) -> None:
        while self.pending_calls:
            comp = self.pending_calls.pop(0)
            self.clusters += 1
            self.body.append(f"  subgraph cluster_{self.clusters} {{")
            self.body += [f'    label="{dot_escape(comp.name)}";',
                          '    style="rounded,dashed"; color="#757575";']
            self.add_instructions(comp.instructions, "    ")
            self.body.append("  }")
        for comp, caller, role in self.call_edges:
            src = self.out_node.get(id(comp.root))
            dst = self.out_node.get(id(caller))
            if src and dst:
                self.edges.append(f'  {src} -> {dst} [style=dashed, color="#757575", '
                                  f'fontcolor="#757575", label="{dot_escape(role)}"];')

    def text(self, title: str) -> str:
        head = ["digraph G {",
                f'  label="{dot_escape(title)}";',
                '  labelloc=t; fontname="Helvetica"; fontsize=16; rankdir=TB; nodesep=0.3;',
                '  node [fontname="Helvetica", fontsize=11];',
                '  edge [fontname="Helvetica", fontsize=9, color="#616161", arrowsize=0.7];']
        return "\n".join(head + self.body + self.edges + ["}"]) + "\n"


def _enum_text(value) -> str:
    name = getattr(value, "text", None) or getattr(value, "name", None) or str(value)
    return str(name)


def module_to_dot(module: Module, computation: str | Computation | None = None, *,
                  expand_fusions: bool = False, draw_calls: bool = True) -> str:
    """DOT text of ``computation`` (default: the entry), with the non-trivial computations
    it calls as clusters (``draw_calls``) and fusions drawn inside (``expand_fusions``)."""
    comp = _computation(module, computation)
    writer = _DotWriter(expand_fusions=expand_fusions, draw_calls=draw_calls)
    writer.add_instructions(comp.instructions, "  ")
    writer.add_call_clusters()
    writer.add_operand_edges()
    which = "ENTRY " if comp is module.entry else ""
    return writer.text(f"{module.name}: {which}{comp.name}")


def neighborhood_to_dot(module: Module, instruction: str | Instruction, radius: int = 2, *,
                        computation: str | Computation | None = None,
                        expand_fusions: bool = False) -> str:
    """DOT text of the instructions within ``radius`` operand/user steps of
    ``instruction`` (in its computation); the centre has a red border, and nodes with
    operands or users left out say how many."""
    from xlapy.errors import InvalidArgumentError

    if radius < 0:
        raise InvalidArgumentError(f"radius must be >= 0, got {radius}")
    comp = _computation(module, computation) if computation is not None else None
    center = instruction if isinstance(instruction, Instruction) else \
        find_instruction(module, instruction, comp)
    distance = {id(center): 0}
    queue = deque([center])
    while queue:
        cur = queue.popleft()
        if distance[id(cur)] == radius:
            continue
        for nxt in list(cur.operands) + list(cur.users):
            if nxt.parent is center.parent and id(nxt) not in distance:
                distance[id(nxt)] = distance[id(cur)] + 1
                queue.append(nxt)
    members = [i for i in center.parent.instructions if id(i) in distance]
    writer = _DotWriter(expand_fusions=expand_fusions, draw_calls=False)
    writer.focus = center
    for instr in members:
        hidden_ops = sum(1 for op in instr.operands if id(op) not in distance)
        hidden_users = sum(1 for u in instr.users if id(u) not in distance)
        parts = []
        if hidden_ops:
            parts.append(f"{hidden_ops} operand{'s' if hidden_ops != 1 else ''}")
        if hidden_users:
            parts.append(f"{hidden_users} user{'s' if hidden_users != 1 else ''}")
        if parts:
            writer.notes[id(instr)] = "+ " + " and ".join(parts) + " not shown"
    writer.add_instructions(members, "  ")
    writer.add_operand_edges()
    return writer.text(f"{module.name}: %{center.name} in {center.parent.name}, "
                       f"radius {radius}")


def _computation(module: Module, computation) -> Computation:
    from xlapy.errors import InvalidArgumentError

    if isinstance(computation, Computation):
        return computation
    if computation is None:
        if module.entry is None:
            raise InvalidArgumentError(f"module {module.name} has no entry computation")
        return module.entry
    name = computation.lstrip("%")
    for comp in module.computations:
        if comp.name == name:
            return comp
    names = ", ".join("%" + c.name for c in module.computations)
    raise InvalidArgumentError(f"module {module.name} has no computation %{name}; it has "
                               f"{names}")


# -- Graphviz and HTML ---------------------------------------------------------------------


def render(dot_text: str, fmt: str, *, timeout: float = 300.0) -> bytes:
    """``dot -T<fmt>`` of ``dot_text`` (fmt: svg, png, pdf...): the output bytes.
    GraphvizNotFoundError when ``dot`` is not installed."""
    exe = shutil.which("dot")
    if exe is None:
        raise GraphvizNotFoundError(f"--format {fmt} needs Graphviz's 'dot' program, which is "
                                    f"not on PATH: {INSTALL_HINT}")
    try:
        done = subprocess.run([exe, f"-T{fmt}"], input=dot_text.encode("utf-8"),
                              capture_output=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise GraphvizFailedError(f"dot -T{fmt} took more than {timeout:g} s; draw less "
                                  "(--computation, or --instruction with --radius)") from None
    if done.returncode != 0:
        message = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise GraphvizFailedError(f"dot -T{fmt} failed (exit {done.returncode}): "
                                  + (message[0] if message else "no message"))
    return done.stdout


_HTML_STYLE = """\
body { font-family: Helvetica, Arial, sans-serif; margin: 1em; }
h1 { font-size: 1.2em; }
.graph svg { max-width: 100%; height: auto; }
.node:hover polygon, .node:hover ellipse, .node:hover path { stroke-width: 4; }
.edge:hover path { stroke: #1976d2; stroke-width: 3; }"""


def html_page(svg_text: str, title: str) -> str:
    """A self-contained HTML page (no scripts, no network) showing ``svg_text`` inline."""
    svg = svg_text
    start = svg.find("<svg")
    if start > 0:
        svg = svg[start:]  # drop the XML declaration, DOCTYPE and comments before <svg
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>{html_escape(title)}</title>\n<style>\n{_HTML_STYLE}\n</style>\n"
            f"</head>\n<body>\n<h1>{html_escape(title)}</h1>\n"
            "<p>Hover a node for its full instruction text.</p>\n"
            f"<div class=\"graph\">\n{svg.strip()}\n</div>\n</body>\n</html>\n")
