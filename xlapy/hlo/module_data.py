"""Module- and instruction-level data XLA prints outside the op attributes: op metadata,
frontend attributes, input/output aliasing, buffer donors, the entry computation layout
and the stack-frame tables. Each is a frozen value with its XLA text form beside it.
Imports only the shape layer and attrs helpers."""

from __future__ import annotations

from dataclasses import dataclass, field

from xlapy.hlo.attrs.numbers import c_escape, read_string
from xlapy.shape import Shape
from xlapy.shape.text import MAX_RECURSION_DEPTH, Scanner, read_shape


def read_sub_attributes(sc: Scanner, readers: dict, what: str) -> dict:
    """``{key=value key=value, ...}`` (spaces or commas between): XLA's ParseSubAttributes."""
    sc.expect("{", f"to start {what}")
    values: dict = {}
    while not sc.eat("}"):
        pos = sc.pos
        key = sc.read_ident()
        if key is None:
            sc.error(f"expected an attribute name or '}}' in {what}, found {sc.describe_next()}")
        if key not in readers:
            sc.error(f"unknown attribute '{key}' in {what} (allowed: {', '.join(readers)})", pos)
        if key in values:
            sc.error(f"duplicate attribute '{key}' in {what}", pos)
        sc.expect("=", f"after '{key}'")
        values[key] = readers[key](sc)
        sc.eat(",")
    return values


def _read_int(sc):
    return sc.read_int()


def _read_int_list(sc):
    from xlapy.hlo.attrs import read_int_list

    return read_int_list(sc)


# -- metadata ------------------------------------------------------------------------------


@dataclass(frozen=True)
class OpMetadata:
    """XLA's OpMetadata: printed ``metadata={op_type="..." op_name="..." source_file="..."
    source_line=3 ...}`` with empty/zero fields omitted."""

    op_type: str = ""
    op_name: str = ""
    source_file: str = ""
    source_line: int = 0
    source_end_line: int = 0
    source_column: int = 0
    source_end_column: int = 0
    profile_type: tuple[int, ...] = ()
    deduplicated_name: str = ""
    scheduling_name: str = ""
    stack_frame_id: int = 0
    metadata_payload: str | None = None

    def is_empty(self) -> bool:
        return (not self.op_type and not self.op_name and not self.source_file
                and not self.scheduling_name and self.stack_frame_id == 0
                and self.metadata_payload is None)

    def to_text(self, only_op_name: bool = False) -> str:
        if only_op_name:
            return f'op_name="{c_escape(self.op_name)}"' if self.op_name else ""
        parts = []
        if self.op_type:
            parts.append(f'op_type="{c_escape(self.op_type)}"')
        if self.op_name:
            parts.append(f'op_name="{c_escape(self.op_name)}"')
        if self.source_file:
            parts.append(f'source_file="{c_escape(self.source_file)}"')
        for key in ("source_line", "source_end_line", "source_column", "source_end_column"):
            if getattr(self, key):
                parts.append(f"{key}={getattr(self, key)}")
        if self.profile_type:
            parts.append("profile_type={" + ",".join(map(str, self.profile_type)) + "}")
        if self.deduplicated_name:
            parts.append(f'deduplicated_name="{c_escape(self.deduplicated_name)}"')
        if self.scheduling_name:
            parts.append(f'scheduling_name="{self.scheduling_name}"')
        if self.stack_frame_id:
            parts.append(f"stack_frame_id={self.stack_frame_id}")
        if self.metadata_payload is not None:
            parts.append(f'metadata_payload="{c_escape(self.metadata_payload)}"')
        return " ".join(parts)

    @staticmethod
    def read(sc: Scanner) -> "OpMetadata":
        readers = {
            "op_type": read_string, "op_name": read_string, "source_file": read_string,
            "source_line": _read_int, "source_end_line": _read_int, "source_column": _read_int,
            "source_end_column": _read_int, "profile_type": _read_int_list,
            "deduplicated_name": read_string, "scheduling_name": read_string,
            "stack_frame_id": _read_int, "metadata_payload": read_string,
        }
        return OpMetadata(**read_sub_attributes(sc, readers, "metadata"))


# -- frontend attributes -------------------------------------------------------------------


def lexes_as_json_dict(text: str) -> bool:
    """XLA's LexesAsJsonDict: the text is a balanced ``{...}`` (strings skipped)."""
    text = text.strip()
    if not text.startswith("{") or not text.endswith("}"):
        return False
    depth = 0
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == '"':
            i += 1
            while i < len(text) and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0 and i != len(text) - 1:
                return False
        i += 1
    return depth == 0


def frontend_attributes_to_text(attrs: dict[str, str]) -> str:
    items = []
    for key, value in sorted(attrs.items()):
        if lexes_as_json_dict(value):
            items.append(f"{key}={value}")
        else:
            items.append(f'{key}="{c_escape(value)}"')
    return "{" + ",".join(items) + "}"


def read_frontend_attributes(sc: Scanner) -> dict[str, str]:
    from xlapy.hlo.attrs.numbers import read_balanced

    sc.expect("{", "to start frontend_attributes")
    out: dict[str, str] = {}
    while not sc.eat("}"):
        key_pos = sc.pos
        m = sc.peek_re(_ATTR_KEY)
        if not m:
            sc.error(f"expected an attribute name in frontend_attributes, found {sc.describe_next()}")
        sc.pos = m.end()
        key = m.group(0)
        if key.startswith('"'):
            from xlapy.hlo.attrs.numbers import c_unescape

            key = c_unescape(key[1:-1])
        sc.expect("=", f"after frontend attribute '{key}'")
        if sc.peek() == '"':
            value = read_string(sc)
        elif sc.peek() == "{":
            value = read_balanced(sc)
        else:
            sc.error(f"expected a quoted string or {{...}} for frontend attribute '{key}'", key_pos)
        out[key] = value
        if not sc.eat(","):
            sc.expect("}", "or ',' in frontend_attributes")
            break
    return out


import re as _re  # noqa: E402

_ATTR_KEY = _re.compile(r'"(?:[^"\\]|\\.)*"|[A-Za-z0-9_.\-]+')


# -- aliasing ------------------------------------------------------------------------------


def shape_index_text(index: tuple[int, ...]) -> str:
    return "{" + ",".join(str(i) for i in index) + "}"


def read_shape_index(sc: Scanner) -> tuple[int, ...]:
    """``{1, 0}`` (XLA's ParseShapeIndex and its messages)."""
    if not sc.eat("{"):
        sc.error(f"Expects '{{' at the start of ShapeIndex, found {sc.describe_next()}")
    out = []
    while sc.peek() != "}":
        out.append(sc.read_int("a tuple index of the ShapeIndex"))
        if not sc.eat(","):
            break
    if not sc.eat("}"):
        sc.error(f"Expects '}}' at the end of ShapeIndex, found {sc.describe_next()}")
    return tuple(out)


@dataclass(frozen=True)
class Alias:
    """One input/output alias: output ``output_index`` may (or must) reuse the buffer of
    parameter ``parameter_number`` at ``parameter_index``."""

    output_index: tuple[int, ...]
    parameter_number: int
    parameter_index: tuple[int, ...] = ()
    kind: str = "may-alias"  # or "must-alias"

    def to_text(self) -> str:
        return (f"{shape_index_text(self.output_index)}: ({self.parameter_number}, "
                f"{shape_index_text(self.parameter_index)}, {self.kind})")


def aliases_to_text(aliases: tuple[Alias, ...]) -> str:
    return "{ " + ", ".join(a.to_text() for a in aliases) + " }"


def read_aliases(sc: Scanner) -> tuple[Alias, ...]:
    """``{ {0}: (0, {}, may-alias), {1}: (1, {}) }`` (the kind is optional: may-alias)."""
    if not sc.eat("{"):
        sc.error(f"Expects '{{' at the start of aliasing description, found "
                 f"{sc.describe_next()}")
    out = []
    fmt = ("Expected format: <output_shape_index>: (<input_param>, <input_param_shape_index>) "
           "OR <output_shape_index>: <input_param>")
    while not sc.eat("}"):
        output_index = read_shape_index(sc)
        for token in (":", "("):
            if not sc.eat(token):
                sc.error(f"{fmt}; expected '{token}', found {sc.describe_next()}")
        param = sc.read_int("a parameter number")
        if not sc.eat(","):
            sc.error(f"{fmt}; expected ',', found {sc.describe_next()}")
        param_index = read_shape_index(sc)
        kind = "may-alias"
        if sc.eat(","):
            pos = sc.pos
            word = sc.peek_re(_re.compile(r"(?:may|must)-alias"))
            if not word:
                sc.error("expected may-alias or must-alias", pos)
            sc.pos = word.end()
            kind = word.group(0)
        if not sc.eat(")"):
            sc.error(f"{fmt}; expected ')', found {sc.describe_next()}")
        out.append(Alias(output_index, param, param_index, kind))
        if not sc.eat(","):
            if not sc.eat("}"):
                sc.error("Expects '}' at the end of aliasing description (or ',' before the "
                         f"next alias), found {sc.describe_next()}")
            break
    return tuple(out)


@dataclass(frozen=True)
class BufferDonor:
    parameter_number: int
    parameter_index: tuple[int, ...] = ()

    def to_text(self) -> str:
        return f"({self.parameter_number}, {shape_index_text(self.parameter_index)})"


def buffer_donors_to_text(donors: tuple[BufferDonor, ...]) -> str:
    return "{ " + ", ".join(d.to_text() for d in donors) + " }"


def read_buffer_donors(sc: Scanner) -> tuple[BufferDonor, ...]:
    if not sc.eat("{"):
        sc.error(f"Expects '{{' at the start of buffer donor description, found "
                 f"{sc.describe_next()}")
    out = []
    fmt = "Expected format: (<input_param>, <input_param_shape_index>)"
    while not sc.eat("}"):
        if not sc.eat("("):
            sc.error(f"{fmt}; expected '(', found {sc.describe_next()}")
        param = sc.read_int("a parameter number")
        if not sc.eat(","):
            sc.error(f"{fmt}; expected ',', found {sc.describe_next()}")
        out.append(BufferDonor(param, read_shape_index(sc)))
        if not sc.eat(")"):
            sc.error(f"{fmt}; expected ')', found {sc.describe_next()}")
        if not sc.eat(","):
            if not sc.eat("}"):
                sc.error("Expects '}' at the end of buffer donor description (or ',' before "
                         f"the next donor), found {sc.describe_next()}")
            break
    return tuple(out)


# -- entry computation layout ---------------------------------------------------------------


@dataclass(frozen=True)
class ComputationLayout:
    """``{(f32[4,8]{1,0}, s32[]{:T(256)})->(f32[4]{0})}``: parameter and result shapes with
    the layouts the caller sees."""

    parameters: tuple[Shape, ...]
    result: Shape

    def to_text(self) -> str:
        parts = []
        for i, p in enumerate(self.parameters):
            if i:
                parts.append(f", /*index={i}*/" if i % 5 == 0 else ", ")
            parts.append(str(p))
        return "{(" + "".join(parts) + ")->" + str(self.result) + "}"

    @staticmethod
    def read(sc: Scanner, max_depth: int = MAX_RECURSION_DEPTH,
             intern: dict | None = None, *,
             fill_missing_layouts: bool = True) -> "ComputationLayout":
        """``max_depth``/``intern``/``fill_missing_layouts``: as read_shape's (the HLO
        parser passes its own; without filling, an array written without a layout keeps
        none: XLA's auto layout)."""
        sc.expect("{", "to start entry_computation_layout")
        sc.expect("(", "to start the parameter layouts")
        params = []
        if not sc.eat(")"):
            while True:
                params.append(read_shape(sc, max_depth=max_depth, intern=intern,
                                         fill_missing_layouts=fill_missing_layouts))
                if sc.eat(")"):
                    break
                sc.expect(",", "or ')' in the parameter layouts")
        sc.expect("->", "after the parameter layouts")
        result = read_shape(sc, max_depth=max_depth, intern=intern,
                            fill_missing_layouts=fill_missing_layouts)
        sc.expect("}", "to end entry_computation_layout")
        return ComputationLayout(tuple(params), result)


# -- stack frames ---------------------------------------------------------------------------


@dataclass
class StackFrameIndex:
    """The FileNames / FunctionNames / FileLocations / StackFrames tables of a dump."""

    file_names: list[str] = field(default_factory=list)
    function_names: list[str] = field(default_factory=list)
    # (file_name_id, function_name_id, line, end_line, column, end_column)
    file_locations: list[tuple[int, int, int, int, int, int]] = field(default_factory=list)
    # (file_location_id, parent_frame_id) as printed (parent is 1-based)
    stack_frames: list[tuple[int, int]] = field(default_factory=list)

    def is_empty(self) -> bool:
        return not (self.file_names or self.function_names or self.file_locations
                    or self.stack_frames)

    def to_text(self) -> str:
        out = ["\n\nFileNames\n"]
        out += [f'{i} "{c_escape(n)}"\n' for i, n in enumerate(self.file_names, 1)]
        out.append("\nFunctionNames\n")
        out += [f'{i} "{c_escape(n)}"\n' for i, n in enumerate(self.function_names, 1)]
        out.append("\nFileLocations\n")
        out += [f"{i} {{file_name_id={a} function_name_id={b} line={c} end_line={d} "
                f"column={e} end_column={f}}}\n"
                for i, (a, b, c, d, e, f) in enumerate(self.file_locations, 1)]
        out.append("\nStackFrames\n")
        out += [f"{i} {{file_location_id={a} parent_frame_id={b}}}\n"
                for i, (a, b) in enumerate(self.stack_frames, 1)]
        return "".join(out)

    @staticmethod
    def read(sc: Scanner) -> "StackFrameIndex":
        index = StackFrameIndex()
        location_keys = ("file_name_id", "function_name_id", "line", "end_line", "column",
                         "end_column")
        frame_keys = ("file_location_id", "parent_frame_id")

        def entry(keys, what):
            values = read_sub_attributes(sc, {k: _read_int for k in keys}, what)
            missing = [k for k in keys if k not in values]
            if missing:
                sc.error(f"{what} is missing {', '.join(missing)}")
            return tuple(values[k] for k in keys)

        sections = {
            "FileNames": lambda: index.file_names.append(read_string(sc)),
            "FunctionNames": lambda: index.function_names.append(read_string(sc)),
            "FileLocations": lambda: index.file_locations.append(entry(location_keys, "a file location")),
            "StackFrames": lambda: index.stack_frames.append(entry(frame_keys, "a stack frame")),
        }
        while sc.peek_ident() in sections:
            section = sc.read_ident()
            expected = 1
            while sc.peek_re(_re.compile(r"[0-9]+[ \t\n\r]")):
                pos = sc.pos
                n = sc.read_int()
                if n != expected:
                    sc.error(f"{section}: expected entry number {expected}, found {n}", pos)
                expected += 1
                sections[section]()
        return index
