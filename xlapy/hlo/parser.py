"""The HLO text parser: every module XLA prints, as XLA's hlo_parser.cc reads it.

Owns: ``parse_hlo_module(text)`` (with or without the ``HloModule`` header), the module
header attributes, the stack-frame tables, computations (with or without signatures,
``ENTRY``, optional ``%`` sigils), instructions (operands with or without shapes, nested
anonymous operands, ``name#i`` get-tuple-element sugar, omitted result shapes inferred by
the op's shape rule, given ones checked against it) and the generic per-instruction data
(sharding, frontend_attributes, metadata, backend_config, control-predecessors...). Each
attribute value is read by its kind (xlapy.hlo.attrs). Every failure is a ParseError with
line, column and a caret; nothing else escapes.
"""

from __future__ import annotations

import re
from typing import Any

from xlapy.errors import InvalidArgumentError, ParseError, XlaError
from xlapy.hlo.attrs.numbers import read_balanced, read_string
from xlapy.hlo.ir import Computation, Instruction, Module
from xlapy.hlo.module_data import (
    ComputationLayout,
    OpMetadata,
    StackFrameIndex,
    read_aliases,
    read_buffer_donors,
    read_frontend_attributes,
)
from xlapy.hlo.opcodes import OPCODE_NAMES
from xlapy.shape import dtypes
from xlapy.shape.text import Scanner, read_shape

_NAME = re.compile(r"%?([A-Za-z_][A-Za-z0-9_.\-]*)")
_OPCODE = re.compile(r"[a-z][a-z0-9\-]*")
_ATTR_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_\-]*")
_SHAPE_START = re.compile(r"\(|([a-z][a-z0-9]*)\[")
# Words XLA's lexer reserves (hlo_lexer.cc), and type names other than tuple: without a
# '%' sigil they cannot name an instruction or computation.
_KEYWORDS = frozenset({
    "true", "false", "inf", "nan", "HloModule", "ENTRY", "ROOT", "FileLocations", "FileNames",
    "FunctionNames", "StackFrames", "maximal", "replicated", "manual",
    "last_tile_dim_replicate", "shard_as", "shard_like", "unknown", "unreduced",
})

#: Per-instruction keys every opcode accepts (printed after the opcode's own attributes).
GENERIC_KEYS = ("sharding", "frontend_attributes", "control-predecessors", "statistics",
                "result_accuracy", "origin", "metadata", "backend_config")


def parse_hlo_module(text: str, *, fill_missing_layouts: bool = True) -> Module:
    """Parse HLO text (as XLA dumps it, or jax's ``as_text()``) into a Module.

    >>> m = parse_hlo_module("HloModule m\\nENTRY e { ROOT c = f32[] constant(1) }")
    """
    if not isinstance(text, str):
        raise InvalidArgumentError(f"parse_hlo_module: expected HLO text (str), got {type(text).__name__}")
    return _Parser(text, fill_missing_layouts).module()


class _Parser:
    def __init__(self, text: str, fill_missing_layouts: bool):
        self.sc = Scanner(text, "hlo")
        self.fill = fill_missing_layouts
        self.module_: Module | None = None
        self.computations: dict[str, Computation] = {}
        self.scope: dict[str, Instruction] = {}
        self.result_shape = None  # for literal kinds: the declared shape of a constant

    # -- helpers ---------------------------------------------------------------------------

    def error(self, message: str, pos: int | None = None):
        self.sc.error(message, pos)

    def read_name(self, what: str) -> str:
        sc = self.sc
        m = sc.peek_re(_NAME)
        if not m:
            self.error(f"expected {what}, found {sc.describe_next()}")
        name = m.group(1)
        # Without a '%' sigil, keywords and type names are not names (XLA's lexer).
        reserved = name in _KEYWORDS or (dtypes.is_type_name(name) and name != "tuple")
        if not m.group(0).startswith("%") and reserved:
            self.error(f"expected {what}, found the keyword or type name '{name}'")
        sc.pos = m.end()
        return name

    def read_computation_ref(self, sc: Scanner) -> Computation:
        pos = sc.pos
        sc.skip()
        pos = sc.pos
        m = sc.peek_re(_NAME)
        if not m:
            self.error(f"expected a computation name, found {sc.describe_next()}")
        sc.pos = m.end()
        comp = self.computations.get(m.group(1))
        if comp is None:
            self.error(f"computation does not exist: {m.group(1)}", pos)
        return comp

    # -- module ----------------------------------------------------------------------------

    def module(self) -> Module:
        sc = self.sc
        try:
            header_name = None
            config: dict[str, Any] = {}
            raw_header: dict[str, str] = {}
            if sc.peek_ident() == "HloModule":
                sc.read_ident()
                header_name = self.read_name("a module name")
                seen = set()
                while sc.eat(","):
                    pos = sc.pos
                    key = self._read_key()
                    if key in seen:
                        self.error(f"duplicate module attribute '{key}'", pos)
                    seen.add(key)
                    sc.expect("=", f"after '{key}'")
                    self._module_attr(key, config, raw_header, pos)
            module = Module(header_name or "module")
            self.module_ = module
            frames = StackFrameIndex.read(sc)
            if not frames.is_empty():
                module.extras["stack_frames"] = frames
            entry = None
            last = None
            while not sc.at_end():
                comp, is_entry = self.computation()
                last = comp
                if is_entry:
                    if entry is not None:
                        self.error(f"more than one ENTRY computation ('{entry.name}' and '{comp.name}')")
                    entry = comp
            if last is None:
                self.error("expected a computation (e.g. 'ENTRY main { ... }'), found end of input")
            module.entry = entry or last
            if header_name is None:
                module.name = f"module_{module.entry.name}"
            module.config.update(config)
            if raw_header:
                module.extras["raw_header"] = raw_header
            return module
        except ParseError:
            raise
        except XlaError as e:  # a check below the parser that did not know the position
            raise ParseError(str(e), sc.text, sc.pos, sc.what) from None
        except RecursionError:
            raise ParseError("maximum nesting depth exceeded", sc.text, sc.pos, sc.what) from None

    def _read_key(self) -> str:
        m = self.sc.peek_re(_ATTR_KEY)
        if not m:
            self.error(f"expected an attribute name, found {self.sc.describe_next()}")
        self.sc.pos = m.end()
        return m.group(0)

    def _module_attr(self, key: str, config: dict, raw: dict, pos: int) -> None:
        sc = self.sc
        if key in ("is_scheduled", "alias_passthrough_params"):
            config[key] = self._bool()
        elif key in ("replica_count", "num_partitions"):
            config[key] = sc.read_int(f"an integer for {key}")
        elif key == "entry_computation_layout":
            config[key] = ComputationLayout.read(sc)
        elif key == "input_output_alias":
            config[key] = read_aliases(sc)
        elif key == "buffer_donor":
            config[key] = read_buffer_donors(sc)
        elif key == "frontend_attributes":
            config[key] = read_frontend_attributes(sc)
        elif key in ("allow_spmd_sharding_propagation_to_parameters",
                     "allow_spmd_sharding_propagation_to_output"):
            if sc.peek() == "{":
                sc.expect("{")
                values = []
                if not sc.eat("}"):
                    while True:
                        values.append(self._bool())
                        if sc.eat("}"):
                            break
                        sc.expect(",", "or '}' in a list of booleans")
                config[key] = tuple(values)
            else:
                config[key] = (self._bool(),)
        elif key in ("origin_recovery_table", "debug_attributes"):
            raw[key] = read_balanced(sc)
        else:
            self.error(
                f"unknown module attribute '{key}' (allowed: is_scheduled, replica_count, "
                "num_partitions, input_output_alias, buffer_donor, alias_passthrough_params, "
                "entry_computation_layout, frontend_attributes, "
                "allow_spmd_sharding_propagation_to_parameters, "
                "allow_spmd_sharding_propagation_to_output)", pos)

    def _bool(self) -> bool:
        pos = self.sc.pos
        word = self.sc.read_ident()
        if word not in ("true", "false"):
            self.error(f"expected true or false, found {word!r}", pos)
        return word == "true"

    # -- computations ----------------------------------------------------------------------

    def computation(self) -> tuple[Computation, bool]:
        sc = self.sc
        is_entry = False
        if sc.peek_ident() == "ENTRY":
            sc.read_ident()
            is_entry = True
        name_pos = sc.pos
        name = self.read_name("a computation name")
        if name in self.computations:
            self.error(f"computation '{name}' is defined twice", name_pos)
        if sc.peek() == "(":
            self._skip_signature()
        sc.expect("{", f"to start computation '{name}'")
        comp = Computation(name)
        self.scope = {}
        root = None
        last = None
        while not sc.eat("}"):
            if sc.at_end():
                self.error(f"expected '}}' to end computation '{name}', found end of input")
            sc.skip()
            instr_pos = sc.pos
            instr, is_root = self.instruction(comp)
            last = instr
            if is_root:
                if root is not None:
                    self.error(f"computation '{name}' has more than one ROOT ('{root.name}' and "
                               f"'{instr.name}')", instr_pos)
                root = instr
        if last is None:
            self.error(f"computation '{name}' has no instructions", name_pos)
        comp.root = root or last
        if sc.eat(","):
            key = self._read_key()
            if key != "execution_thread":
                self.error(f"expected execution_thread after a computation, found '{key}'")
            sc.expect("=")
            comp.execution_thread = read_string(sc)
        self.computations[name] = comp
        self.module_.add_computation(comp, entry=is_entry, uniquify=False)
        return comp, is_entry

    def _skip_signature(self) -> None:
        """``(p0: f32[2], p1: s32[]) -> f32[2]``: checked for syntax; the parameters'
        instructions carry the real shapes."""
        sc = self.sc
        sc.expect("(")
        if not sc.eat(")"):
            while True:
                self.read_name("a parameter name")
                sc.expect(":", "after a parameter name in the signature")
                read_shape(sc, fill_missing_layouts=self.fill)
                if sc.eat(")"):
                    break
                sc.expect(",", "or ')' in the computation signature")
        sc.expect("->", "after the parameters of the computation signature")
        read_shape(sc, fill_missing_layouts=self.fill)

    # -- instructions ----------------------------------------------------------------------

    def instruction(self, comp: Computation) -> tuple[Instruction, bool]:
        sc = self.sc
        is_root = False
        if sc.peek_ident() == "ROOT":
            sc.read_ident()
            is_root = True
        sc.skip()
        start = sc.pos
        name = self.read_name("an instruction name")
        if name in self.scope:
            self.error(f"instruction '{name}' is defined twice in computation '{comp.name}'", start)
        sc.expect("=", f"after instruction name '{name}'")
        instr = self.instruction_rhs(comp, name, start, allow_attributes=True)
        self.scope[name] = instr
        return instr, is_root

    def instruction_rhs(self, comp: Computation, name: str, start: int,
                        allow_attributes: bool) -> Instruction:
        sc = self.sc
        shape = None
        sc.skip()
        m = _SHAPE_START.match(sc.text, sc.pos)
        if m and (m.group(0) == "(" or dtypes.is_type_name(m.group(1))):
            shape = read_shape(sc, fill_missing_layouts=self.fill)
        sc.skip()
        op_pos = sc.pos
        m = sc.peek_re(_OPCODE)
        if not m:
            self.error(f"expected an opcode, found {sc.describe_next()}")
        opcode = m.group(0)
        if opcode not in OPCODE_NAMES:
            self.error(f"unknown opcode '{opcode}'", op_pos)
        sc.pos = m.end()
        from xlapy.opdefs import get_opdef

        opdef = get_opdef(opcode)
        in_parens = [s for s in opdef.attrs if s.in_parens]
        values: dict[str, Any] = {}
        operands: list[Instruction] = []
        sc.expect("(", f"after opcode '{opcode}'")
        if in_parens:
            self.result_shape = shape
            for i, spec in enumerate(in_parens):
                if i:
                    sc.expect(",")
                if spec.name == "literal" and shape is None:
                    self.error("a constant needs its shape: write e.g. 'c = f32[] constant(1)'", start)
                values[spec.name] = spec.kind.read(sc, self)
            sc.expect(")", f"to end the operands of {opcode}")
        else:
            operands = self.operands(comp)
        data: dict[str, Any] = {}
        parts: dict[str, dict] = {}
        seen: set[str] = set()
        while allow_attributes and sc.peek() == "," and self._next_is_attribute():
            sc.eat(",")
            key_pos = sc.pos
            key = self._read_key()
            if key in seen:
                self.error(f"duplicate attribute '{key}' for {opcode}", key_pos)
            seen.add(key)
            sc.expect("=", f"after attribute '{key}'")
            spec = opdef.attr_by_key.get(key)
            if spec is not None and not spec.in_parens:
                parts.setdefault(spec.name, {})[key] = spec.kind.read_key(key, sc, self)
            elif key in GENERIC_KEYS:
                self._generic_attr(key, data, comp)
            else:
                allowed = [k for s in opdef.attrs if not s.in_parens for k in s.keys]
                self.error(f"unknown attribute '{key}' for {opcode} (allowed: "
                           f"{', '.join(allowed + list(GENERIC_KEYS))})", key_pos)
        for spec_name, got in parts.items():
            spec = opdef.attr_by_name[spec_name]
            try:
                values[spec_name] = spec.kind.assemble(spec_name, got, f"{opcode}: attribute '{spec_name}'")
            except XlaError as e:
                self.error(str(e), start)
        control = data.pop("control-predecessors", ())
        from xlapy.opdefs import make_instruction

        try:
            instr = make_instruction(opcode, operands, values, shape=shape, name=name or opcode, **data)
        except XlaError as e:
            self.error(str(e), start)
        comp.add_instruction(instr, uniquify=not name)
        for pred in control:
            pred.add_control_dependency_to(instr)
        return instr

    def _next_is_attribute(self) -> bool:
        """After ``,`` comes ``key=``: an attribute (not the next operand or computation)."""
        m = re.compile(r",\s*[A-Za-z_][A-Za-z0-9_\-]*\s*=").match(self.sc.text, self.sc.pos)
        return m is not None

    def _generic_attr(self, key: str, data: dict, comp: Computation) -> None:
        sc = self.sc
        if key == "metadata":
            data["metadata"] = OpMetadata.read(sc)
        elif key == "frontend_attributes":
            data["frontend_attributes"] = read_frontend_attributes(sc)
        elif key == "backend_config":
            data["backend_config"] = read_string(sc) if sc.peek() == '"' else read_balanced(sc)
        elif key == "sharding":
            data["sharding"] = read_balanced(sc)
        elif key == "control-predecessors":
            sc.expect("{", "to start control-predecessors")
            preds = []
            if not sc.eat("}"):
                while True:
                    pos = sc.pos
                    pred_name = self.read_name("an instruction name")
                    if pred_name not in self.scope:
                        self.error(f"instruction does not exist: {pred_name}", pos)
                    preds.append(self.scope[pred_name])
                    if sc.eat("}"):
                        break
                    sc.expect(",", "or '}' in control-predecessors")
            data["control-predecessors"] = preds
        else:  # statistics, result_accuracy, origin: carried through as text
            data.setdefault("extras", {})[key] = read_balanced(sc)

    def operands(self, comp: Computation) -> list[Instruction]:
        sc = self.sc
        out: list[Instruction] = []
        if sc.eat(")"):
            return out
        while True:
            out.append(self.operand(comp))
            if sc.eat(")"):
                return out
            sc.expect(",", "or ')' in the operand list")

    def operand(self, comp: Computation) -> Instruction:
        sc = self.sc
        sc.skip()
        start = sc.pos
        shape = None
        m = _SHAPE_START.match(sc.text, sc.pos)
        if m and (m.group(0) == "(" or dtypes.is_type_name(m.group(1))):
            shape = read_shape(sc, fill_missing_layouts=self.fill)
        sc.skip()
        after_shape = sc.pos
        m = _NAME.match(sc.text, sc.pos)
        if m:
            # a named operand is followed by ',' ')' or '#'; otherwise it is a nested op
            end = m.end()
            follow = re.compile(r"\s*([,)#])").match(sc.text, end)
            if follow:
                name = m.group(1)
                sc.pos = end
                instr = self.scope.get(name)
                if instr is None:
                    self.error(f"instruction does not exist: {name}", after_shape)
                while sc.eat("#"):
                    idx_pos = sc.pos
                    index = sc.read_int("a tuple index after '#'")
                    if not instr.shape.is_tuple():
                        self.error(f"GTE operand must be tuple, but has shape: {instr.shape}", idx_pos)
                    if not 0 <= index < len(instr.shape.tuple_shapes):
                        self.error(f"GTE index {index} out of bounds for shape: {instr.shape}", idx_pos)
                    key = f"{name}#{index}"
                    gte = self.scope.get(key)
                    if gte is None:
                        from xlapy.opdefs import make_instruction

                        gte = make_instruction("get-tuple-element", [instr], {"index": index},
                                               name=key.replace("#", "_"))
                        comp.add_instruction(gte)
                        self.scope[key] = gte
                    instr, name = gte, key
                if shape is not None and not shape.compatible(instr.shape):
                    self.error(f"operand shape {shape} does not match the shape {instr.shape} of "
                               f"instruction {name}", start)
                return instr
        # nested anonymous instruction: [shape] opcode(operands)
        sc.pos = start
        return self.instruction_rhs(comp, "", start, allow_attributes=False)
