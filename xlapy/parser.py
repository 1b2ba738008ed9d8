"""The HLO text parser: every module XLA prints, as XLA's hlo_parser.cc reads it.

Owns: ``parse_hlo_module(text)`` (with or without the ``HloModule`` header), the module
header attributes, the stack-frame tables, computations (with or without signatures,
``ENTRY``, optional ``%`` sigils), instructions (operands with or without shapes, nested
anonymous operands named ``<opcode>.anon``, ``name#i`` get-tuple-element sugar, omitted
result shapes inferred by the op's shape rule, given ones checked against it), inline
computations (``to_apply={...}``), the async sugar ``<op>-start/-update/-done`` (building the
wrapped computation, binding late operands and outputs, as XLA's parser does) and the
generic per-instruction data (sharding, frontend_attributes, metadata, backend_config,
control-predecessors, result_accuracy...). Names end up unique across the module, as XLA's
module makes them. Each attribute value is read by its kind (xlapy.hlo.attrs). Every
failure is a ParseError with line, column and a caret; nothing else escapes.

Sits above the op definitions (each instruction is made by ``make_instruction``, which checks
its attributes and runs its shape rule); imports the IR, the attribute kinds and opdefs.
"""

from __future__ import annotations

import re
from typing import Any

from xlapy.errors import InvalidArgumentError, ParseError, XlaError
from xlapy.hlo.async_chain import (
    async_wrapped_computation,
    chain_start_of_value,
    split_async_sugar,
    sugared_opcode,
)
from xlapy.hlo.attrs.numbers import read_balanced, read_string
from xlapy.hlo.attrs.result_accuracy import read_result_accuracy
from xlapy.hlo.attrs.sharding import read_sharding
from xlapy.hlo.ir import Computation, Instruction, Module, NameUniquer, callees_first
from xlapy.hlo.module_data import (
    ComputationLayout,
    OpMetadata,
    StackFrameIndex,
    read_aliases,
    read_buffer_donors,
    read_frontend_attributes,
)
from xlapy.hlo.opcodes import ASYNC_OPCODES, OPCODE_NAMES
from xlapy.opdefs import get_opdef, make_instruction, result_shape
from xlapy.opdefs.registry import RESULT_ACCURACY
from xlapy.shape import dtypes
from xlapy.shape.text import MAX_RECURSION_DEPTH, Scanner, read_shape

_NAME = re.compile(r"%?([A-Za-z_][A-Za-z0-9_.\-]*)")
_OPCODE = re.compile(r"[a-z][a-z0-9\-]*")
_ATTR_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_\-]*")
# A shape: a tuple's '(', a buffer's 'b(' (group 1) or an array's type name and '[' (group 2).
_SHAPE_START = re.compile(r"\(|(b)(?:[ \t\n\r]|/\*.*?\*/)*\(|([a-z][a-z0-9]*)\[", re.DOTALL)
# What the lexer skips whole (strings, comments) and braces: pairing an inline computation's.
_BRACE_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|/\*.*?\*/|//[^\n\r]*|[{}]', re.DOTALL)
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


def parse_hlo_module(text: str, *, verify: bool = True, fill_missing_layouts: bool = True,
                     keep_module_auto_layouts: bool = False,
                     max_recursion_depth: int = MAX_RECURSION_DEPTH) -> Module:
    """Parse HLO text (as XLA dumps it, or jax's ``as_text()``) into a Module.

    The text is a module (with or without the ``HloModule`` header) or, as XLA's parser
    allows, a single instruction (``f32[4] add(f32[4] x, f32[4] y)``): its operands become the
    parameters of the entry computation.

    ``verify``: every instruction's shape is checked against what its operands give as it is
    read, the error pointing into the text. ``verify=False`` reads what XLA's
    ParseAndReturnUnverifiedModule reads: a given result shape is kept even where the op's
    shape rule infers another or rejects the operands (XLA leaves those checks to its
    verifier: run ``verify_module``); only the checks XLA's parser makes itself stay.
    ``fill_missing_layouts``, ``keep_module_auto_layouts`` and ``max_recursion_depth`` are
    XLA's HloParserOptions of those names: arrays without a layout get the default one;
    an ``entry_computation_layout`` written without layouts stays without them (auto
    layouts) when the latter is set; shapes, nested operands and inline computations nest at
    most ``max_recursion_depth`` deep (default 500).

    >>> m = parse_hlo_module("HloModule m\\nENTRY e { ROOT c = f32[] constant(1) }")
    """
    if not isinstance(text, str):
        raise InvalidArgumentError(f"parse_hlo_module: expected HLO text (str), got {type(text).__name__}")
    if isinstance(max_recursion_depth, bool) or not isinstance(max_recursion_depth, int) \
            or max_recursion_depth < 1:
        raise InvalidArgumentError(f"parse_hlo_module: max_recursion_depth must be a positive "
                                   f"integer, got {max_recursion_depth!r}")
    parser = _Parser(text, fill_missing_layouts, max_recursion_depth)
    parser.verify = bool(verify)
    parser.keep_auto_layouts = bool(keep_module_auto_layouts)
    return parser.module()


class _Parser:
    def __init__(self, text: str, fill_missing_layouts: bool,
                 max_depth: int = MAX_RECURSION_DEPTH):
        self.sc = Scanner(text, "hlo")
        self.fill = fill_missing_layouts
        self.max_depth = max_depth
        self.depth = 0  # nested operands and inline computations around the position
        self.shapes: dict = {}  # every shape read, interned (see read_shape)
        self.module_: Module | None = None
        self.computations: dict[str, Computation] = {}
        self.scope: dict[str, Instruction] = {}
        self.result_shape = None  # for literal kinds: the declared shape of a constant
        self.names = NameUniquer()  # every instruction name of the text, for ".anon" names
        self.wrapped_computations: list[Computation] = []  # made for async sugar
        self.verify = True  # check given shapes against the shape rules (see parse_hlo_module)
        self.keep_auto_layouts = False
        self.scopes = 0  # computations being read (nested inline ones count)
        self.single: Computation | None = None  # the entry of a single-instruction text
        self.computation_pos: dict[str, int] = {}  # where each computation name is defined
        self.scope_pos: dict[str, int] = {}  # where each instruction name of the scope is
        self._positions: dict[int, int] = {}  # id(instruction) -> where its text starts
        # Inline computations met by the attributes of the instruction being read: (the
        # computation, where its body starts), read once its attributes are (see _rhs).
        self._inline: list[tuple[Computation, int]] | None = None
        self._braces: dict[int, int] | None = None  # '{' position -> its '}' (see _skip_body)

    # -- helpers ---------------------------------------------------------------------------

    def error(self, message: str, pos: int | None = None, notes=()):
        self.sc.error(message, pos, notes)

    def _shape(self):
        return read_shape(self.sc, fill_missing_layouts=self.fill, max_depth=self.max_depth,
                          depth=self.depth, intern=self.shapes)

    def _nest(self) -> None:
        """One more level of nesting (a nested operand, an inline computation); XLA's
        parser counts these and shapes against max_recursion_depth."""
        self.depth += 1
        if self.depth > self.max_depth:
            self.sc.skip()
            self.error("maximum recursion depth exceeded")

    def read_name(self, what: str) -> str:
        sc = self.sc
        m = sc.peek_re(_NAME)
        if not m:
            self.error(f"expects name ({what}), found {sc.describe_next()}")
        name = m.group(1)
        # Without a '%' sigil, keywords and type names are not names (XLA's lexer).
        reserved = name in _KEYWORDS or (dtypes.is_type_name(name) and name != "tuple")
        if not m.group(0).startswith("%") and reserved:
            self.error(f"expects name ({what}), found the keyword or type name '{name}'")
        sc.pos = m.end()
        return name

    def read_computation_ref(self, sc: Scanner) -> Computation:
        sc.skip()
        pos = sc.pos
        if sc.peek() == "{":
            return self._inline_computation_ref()
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
            if self._is_single_instruction():
                return self._single_instruction()
            header_name = None
            config: dict[str, Any] = {}
            raw_header: dict[str, str] = {}
            if sc.peek_ident() == "HloModule":
                sc.read_ident()
                header_name = self.read_name("a module name")
                if sc.text.startswith(":", sc.pos):  # "HloModule name:" (XLA lexes name: as a name)
                    sc.pos += 1
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
                sc.skip()
                entry_pos = sc.pos
                comp, is_entry = self.computation()
                last = comp
                if is_entry:
                    if entry is not None:
                        self.error(f"expects only one ENTRY (found '{entry.name}' and "
                                   f"'{comp.name}')", entry_pos)
                    entry = comp
            if last is None:
                self.error("expected a computation (e.g. 'ENTRY main { ... }'), found end of input")
            module.entry = entry or last
            self._check_async_callers(module)
            self._uniquify_names(module)
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
            raise ParseError("maximum recursion depth exceeded (nesting too deep)", sc.text, sc.pos,
                             sc.what) from None

    def _is_single_instruction(self) -> bool:
        """As XLA's parser decides: a text is a module when it starts with ``HloModule`` or
        ``ENTRY`` or a name and ``{``; anything else is one instruction. (xlapy also reads a
        computation with a signature, ``name (p: f32[]) -> f32[] {``, and the stack-frame
        tables of a header-less dump, as a module.)"""
        sc = self.sc
        word = sc.peek_ident()
        if word in ("HloModule", "ENTRY", "FileNames", "FunctionNames", "FileLocations",
                    "StackFrames") or sc.at_end():
            return False
        m = re.compile(r"%?[A-Za-z_][A-Za-z0-9_.\-]*").match(sc.text, sc.pos)
        if m is None:
            return True
        after = Scanner(sc.text, sc.what)
        after.pos = m.end()
        nxt = after.peek()
        if nxt == "{":
            return False
        if nxt == "(" and not dtypes.is_type_name(m.group(0)):
            depth = 0  # a computation signature: (params) -> shape {
            for i in range(after.pos, len(sc.text)):
                depth += {"(": 1, ")": -1}.get(sc.text[i], 0)
                if depth == 0:
                    after.pos = i + 1
                    return after.peek(2) != "->"
        return True

    def _single_instruction(self) -> Module:
        """One instruction, as XLA's ParseSingleInstruction reads it: the entry computation
        (named as the module, ``_``) holds it as root, and every operand it names without
        defining (``%x``) or only shapes (``f32[4]``) becomes a parameter, numbered in text
        order and named after the operand (``_0``, ``_1``... when unnamed). The module is
        scheduled (XLA gives it the instruction order as schedule)."""
        sc = self.sc
        module = Module("_")
        self.module_ = module
        comp = Computation("_")
        self.single = comp
        self.scope = {}
        self.scopes = 1
        sc.skip()
        start = sc.pos
        m = _SHAPE_START.match(sc.text, sc.pos)
        if _is_shape_start(m):
            instr = self._drive(self._rhs(comp, "_", start, allow_attributes=True))
        else:
            instr, _ = self._drive(self.instruction(comp))
        if not sc.at_end():
            self.error("Expected eof after parsing single instruction. Did you mean to write an "
                       "HLO module and forget the \"HloModule\" header?")
        comp.root = instr
        self.scopes = 0
        module.add_computation(comp, entry=True, uniquify=False)
        module.entry = comp
        module.config["is_scheduled"] = True
        self._check_async_callers(module)
        self._uniquify_names(module)
        return module

    def _missing_operand(self, comp: Computation, name: str, shape, pos: int) -> Instruction:
        """XLA's create_missing_instruction_ hook of a single-instruction text: an operand
        that names no instruction becomes the next parameter."""
        from xlapy.opdefs import make_instruction

        if shape is None:
            self.error("Operand had no shape in HLO text; cannot create parameter for "
                       f"single-instruction module (operand '{name}').", pos)
        number = sum(1 for i in comp.instructions if i.opcode == "parameter")
        name = name or f"_{number}"
        param = make_instruction("parameter", [], {"parameter_number": number}, shape=shape,
                                 name=name)
        comp.add_instruction(param, uniquify=False)
        self.names.get_unique_name(name)
        self.scope[name] = param
        return param

    def _check_async_callers(self, module: Module) -> None:
        """Each async-update / async-done gets the value of an async op (through tuples,
        copies and loops: XLA's FindAsyncProducer), and no two async-starts of one
        computation call the same async computation. XLA at jaxlib 0.10.2's commit allows
        one async-start per async computation in the whole module (its Run checks it after
        parsing); newer XLA allows any number, and an async chain crossing a loop needs one
        in the loop body and one before the loop, which xlapy keeps readable."""
        seen: dict[tuple[int, int], Instruction] = {}
        for comp in module.computations:
            for instr in comp.instructions:
                if instr.opcode in ("async-update", "async-done") and instr.operands and \
                        chain_start_of_value(instr.operands[0]) is None:
                    op = instr.operands[0]
                    raise ParseError(
                        f"AsyncUpdate and AsyncDone expect a single async op as their operand. "
                        f"(%{op.name}, a {op.opcode}, does not carry an async op's value.)",
                        self.sc.text, self._positions.get(id(instr), 0), "hlo")
                called = instr.attrs.get("calls") if instr.opcode == "async-start" else None
                if called is None:
                    continue
                key = (id(called), id(comp))
                if key in seen:
                    raise ParseError(f"Computation {called.name} is called by more than one "
                                     f"async op (%{seen[key].name} and %{instr.name}).",
                                     self.sc.text, self._positions.get(id(instr), 0), "hlo")
                seen[key] = instr

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
            # XLA: arrays without a layout get the default one unless the options keep
            # them as auto layouts (or fill none).
            config[key] = ComputationLayout.read(
                sc, self.max_depth, self.shapes,
                fill_missing_layouts=self.fill and not self.keep_auto_layouts)
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
            start = sc.pos
            raw[key] = read_balanced(sc)
            if key == "debug_attributes":  # kept as text; its log modes are checked
                for m in re.finditer(r"log_mode[ \t\n\r]*=[ \t\n\r]*([A-Za-z0-9_.\-]*)", raw[key]):
                    if m.group(1) not in ("default", "fusion_debugger"):
                        self.error(f"Invalid debug_log_mode value: {m.group(1)} (expected "
                                   "default or fusion_debugger)",
                                   sc.text.index(raw[key], start) + m.start(1))
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
            self.error(f"computation already exists: {name}", name_pos,
                       notes=[("computation previously defined here",
                               self.computation_pos[name])])
        self.computation_pos[name] = name_pos
        signature = None
        if sc.peek() == "(":
            signature = self._skip_signature()
        comp = self._drive(self._instruction_list(name, name_pos))
        if signature is not None and not signature[0].compatible(comp.root.shape):
            self.error(f"Shape of computation {name}, {signature[0].to_string(False)}, is not "
                       f"compatible with that of its root instruction {comp.root.name}, "
                       f"{comp.root.shape.to_string(False)}", signature[1])
        if sc.eat(","):
            key = self._read_key()
            if key != "execution_thread":
                self.error(f"expected execution_thread after a computation, found '{key}'")
            sc.expect("=")
            comp.execution_thread = read_string(sc)
        self.computations[name] = comp
        self.module_.add_computation(comp, entry=is_entry, uniquify=False)
        return comp, is_entry

    def _instruction_list(self, name: str, name_pos: int, comp: Computation | None = None):
        """``{ instruction... }``: a computation's body, in a scope of its own (a reading
        generator, see _drive; into ``comp`` when given)."""
        sc = self.sc
        sc.expect("{", f"to start computation '{name}'")
        comp = Computation(name) if comp is None else comp
        self.scope = {}
        self.scope_pos = {}
        self.scopes += 1
        root = None
        last = None
        while not sc.eat("}"):
            if sc.at_end():
                self.error(f"expected '}}' to end computation '{name}', found end of input")
            sc.skip()
            instr_pos = sc.pos
            instr, is_root = yield from self.instruction(comp)
            last = instr
            if is_root:
                if root is not None:
                    self.error(f"one computation should have only one ROOT ('{root.name}' and "
                               f"'{instr.name}' in computation '{name}')", instr_pos)
                root = instr
        if last is None:
            self.error(f"computation '{name}' has no instructions", name_pos)
        comp.root = root or last
        self.scopes -= 1
        return comp

    def _inline_computation_ref(self) -> Computation:
        """``to_apply={ ... }``: a computation written where it is used, named ``_`` (made
        unique with the others at the end), as XLA's ParseHloComputation does. Read by an
        instruction's attributes, it is skipped and returned empty: the instruction reads
        its body once its attributes are read (_rhs), so that nesting costs no Python
        stack. (A body whose braces do not close is read at once, for its error.)"""
        sc = self.sc
        sc.skip()
        start = sc.pos
        comp = Computation("_")
        end = self._skip_body(start) if self._inline is not None else None
        if end is None:
            self._drive(self._inline_body(comp, start))
        else:
            self._inline.append((comp, start))
            sc.pos = end
        return comp

    def _inline_body(self, comp: Computation, start: int):
        """Reads the body of an inline computation at ``start`` into ``comp`` (a reading
        generator) and adds it to the module."""
        saved = self.scope, self.scope_pos
        self.sc.pos = start
        self._nest()
        yield from self._instruction_list("_", start, comp)
        self.depth -= 1
        self.scope, self.scope_pos = saved
        self.module_.add_computation(comp, uniquify=False)
        return comp

    def _skip_body(self, start: int) -> int | None:
        """The position after the ``}`` closing the ``{`` at ``start`` (strings and comments
        skipped as the lexer skips them), or None when it does not close. The pairs of the
        whole text are found in one pass, the first time one is asked for."""
        if self._braces is None:
            self._braces, stack = {}, []
            for m in _BRACE_TOKENS.finditer(self.sc.text):
                if m.group() == "{":
                    stack.append(m.start())
                elif m.group() == "}" and stack:
                    self._braces[stack.pop()] = m.end()
        return self._braces.get(start)

    def _drive(self, gen):
        """Runs a reading generator and every nested one it asks for: a generator that meets
        a nested operand or an inline computation's body yields the generator reading it and
        is sent its result. The nested ones are kept on a list, not on Python's stack, so
        the depth a text may nest is bounded by max_recursion_depth and memory only."""
        stack = [gen]
        value = None
        while True:
            try:
                request = stack[-1].send(value)
            except StopIteration as done:
                stack.pop()
                if not stack:
                    return done.value
                value = done.value
                continue
            stack.append(request)
            value = None

    def _skip_signature(self):
        """``(p0: f32[2], p1: s32[]) -> f32[2]``: checked for syntax; the parameters'
        instructions carry the real shapes. Returns the result shape and its position (XLA
        checks it against the root's)."""
        sc = self.sc
        sc.expect("(")
        if not sc.eat(")"):
            while True:
                self.read_name("a parameter name")
                sc.expect(":", "after a parameter name in the signature")
                self._shape()
                if sc.eat(")"):
                    break
                sc.expect(",", "or ')' in the computation signature")
        sc.expect("->", "after the parameters of the computation signature")
        sc.skip()
        pos = sc.pos
        return self._shape(), pos

    # -- instructions ----------------------------------------------------------------------

    def instruction(self, comp: Computation):
        """``[ROOT] name = rhs`` (a reading generator giving the instruction and whether it
        is the root)."""
        sc = self.sc
        is_root = False
        if sc.peek_ident() == "ROOT":
            sc.read_ident()
            is_root = True
        sc.skip()
        start = sc.pos
        name = self.read_name("an instruction name")
        if name in self.scope and name in self.scope_pos:
            self.error(f"instruction already exists: {name} (in computation '{comp.name}')",
                       start, notes=[("instruction previously defined here",
                                      self.scope_pos[name])])
        if not sc.eat("="):
            self.error(f"expects '=' in instruction (after the name '{name}'), found "
                       f"{sc.describe_next()}")
        instr = yield self._rhs(comp, name, start, allow_attributes=True)
        self.scope[name] = instr
        self.scope_pos[name] = start
        return instr, is_root

    def _rhs(self, comp: Computation, name: str, start: int, allow_attributes: bool):
        """``[shape] opcode(operands), attributes`` (a reading generator giving the
        instruction; its nested operands and inline computations are read by generators it
        yields, see _drive)."""
        sc = self.sc
        shape = None
        sc.skip()
        m = _SHAPE_START.match(sc.text, sc.pos)
        if _is_shape_start(m):
            shape = self._shape()
        sc.skip()
        op_pos = sc.pos
        m = sc.peek_re(_OPCODE)
        if not m:
            self.error(f"expects opcode, found {sc.describe_next()}")
        opcode = m.group(0)
        wrapped = None  # the wrapped opcode of async sugar: custom-call-start(...)
        if opcode not in OPCODE_NAMES:
            try:
                sugar = split_async_sugar(opcode)
            except ValueError as e:
                self.error(str(e), op_pos)
            if sugar is None:
                self.error(f"expects opcode but sees: {opcode}, error: Unknown opcode: {opcode}",
                           op_pos)
            opcode, wrapped = sugar
        sc.pos = m.end()
        opdef = get_opdef(opcode)
        wrapped_def = get_opdef(wrapped) if wrapped is not None else None
        if wrapped_def is not None and any(s.in_parens for s in wrapped_def.attrs):
            self.error(f"expects opcode but sees: {m.group(0)}, error: Unknown opcode: "
                       f"{m.group(0)} ({wrapped} has no async-wrapped form)", op_pos)
        in_parens = [s for s in opdef.attrs if s.in_parens]
        values: dict[str, Any] = {}
        operands: list[Instruction] = []
        sc.expect("(", f"after opcode '{m.group(0)}'")
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
            operands = yield from self.operands(comp)
        # Which schema each attribute key belongs to: the opcode's own; for sugar, the
        # wrapped op's keys go to it (custom-call-start's output_to_operand_aliasing is the
        # custom-call's, as in XLA) and the async op keeps its thread and aliasing.
        if wrapped_def is None:
            tables = [(opdef, None)]
        else:
            own = {"async_execution_thread", "output_to_operand_aliasing"}
            if opcode == "async-done":
                own.discard("output_to_operand_aliasing")
            tables = [(opdef, own)]
            if opcode == "async-start":
                tables.insert(0, (wrapped_def, None))
        excluded = frozenset()
        if opcode == "conditional" and operands:
            excluded = self._conditional_keys(operands[0].shape)
        outer, self._inline = self._inline, []
        try:
            parts, data = self._attributes(comp, m.group(0), tables, allow_attributes,
                                           excluded)
            inline = self._inline
        finally:
            self._inline = outer
        if inline:  # the bodies of the inline computations the attributes named
            end = sc.pos
            for called, body in inline:
                yield self._inline_body(called, body)
            sc.pos = end
        values.update(self._assemble(opdef, parts[-1], start))
        if opcode in ASYNC_OPCODES:
            self._check_async(opcode, wrapped, shape, operands, values, start, op_pos)
        if wrapped is not None and opcode == "async-start":
            wrapped_values = self._assemble(wrapped_def, parts[0], start)
            values["calls"] = self._async_wrapped(wrapped, wrapped_values, shape,
                                                  values.get("async_execution_thread"), start)
        if (opcode == "broadcast" and "dimensions" not in values and len(operands) == 1
                and operands[0].shape.is_scalar()):
            values["dimensions"] = ()  # optional for a scalar operand, as in XLA's parser
        if opcode == "map" and "dimensions" not in values:
            # Optional in XLA's parser: its map instruction always maps every dimension
            # (and prints dimensions={0,...,rank-1}).
            rank = (shape if shape is not None else operands[0].shape if operands else None)
            if rank is not None and rank.is_array():
                values["dimensions"] = tuple(range(len(rank.dimensions)))
        return self._add(comp, opcode, operands, values, shape, name, data, start)

    def _conditional_keys(self, index) -> frozenset[str]:
        """XLA's parser checks a conditional's branch index before its attributes, and
        allows the attributes its type calls for: returns the keys it does not allow."""
        if not (index.is_array() and index.is_scalar()):
            self.error(f"The first operand must be a scalar (a conditional's branch index), "
                       f"got {index}")
        if index.element_type == dtypes.PrimitiveType.PRED:
            return frozenset({"branch_computations"})
        if index.element_type != dtypes.PrimitiveType.S32:
            self.error(f"The first operand must be a scalar of PRED or S32 (a conditional's "
                       f"branch index), got {index}")
        return frozenset({"true_computation", "false_computation"})

    def _attributes(self, comp: Computation, label: str, tables, allow_attributes: bool,
                    excluded: frozenset[str] = frozenset()):
        """Read ``, key=value`` attributes. ``tables``: (opdef, allowed spec names or None)
        in priority order; returns the parts read per table and the generic data.
        ``excluded``: keys the op does not allow here."""
        sc = self.sc
        data: dict[str, Any] = {}
        parts: list[dict[str, dict]] = [{} for _ in tables]
        seen: set[str] = set()
        # result_accuracy= belongs to the transcendental unary ops only (as in XLA).
        generic = [k for k in GENERIC_KEYS
                   if k != "result_accuracy" or tables[-1][0].has(RESULT_ACCURACY)]
        while allow_attributes and sc.peek() == "," and self._next_is_attribute():
            sc.eat(",")
            key_pos = sc.pos
            key = self._read_key()
            if key in seen:
                self.error(f"attribute {key} already exists (duplicate attribute '{key}' for "
                           f"{label})", key_pos)
            seen.add(key)
            sc.expect("=", f"after attribute '{key}'")
            for i, (table, allowed) in enumerate(tables):
                spec = table.attr_by_key.get(key)
                if (spec is not None and not spec.in_parens and key not in excluded
                        and (allowed is None or spec.name in allowed)):
                    parts[i].setdefault(spec.name, {})[key] = spec.kind.read_key(key, sc, self)
                    break
            else:
                if key in generic:
                    self._generic_attr(key, data, comp)
                    continue
                keys = [k for table, allowed in tables for s in table.attrs
                        if not s.in_parens and (allowed is None or s.name in allowed)
                        for k in s.keys if k not in excluded]
                self.error(f"unexpected attribute \"{key}\" for {label}. Allowed attributes: "
                           f"{', '.join(dict.fromkeys(keys + generic))}", key_pos)
        return parts, data

    def _assemble(self, opdef, parts: dict[str, dict], start: int) -> dict[str, Any]:
        values = {}
        for spec_name, got in parts.items():
            spec = opdef.attr_by_name[spec_name]
            try:
                values[spec_name] = spec.kind.assemble(
                    spec_name, got, f"{opdef.opcode}: attribute '{spec_name}'")
            except XlaError as e:
                self.error(str(e), start)
        return values

    def _add(self, comp: Computation, opcode: str, operands, values, shape, name: str,
             data: dict, start: int) -> Instruction:
        control = data.pop("control-predecessors", ())
        if opcode == "parameter":
            number = values.get("parameter_number")
            if isinstance(number, int) and number < 0:
                self.error(f"parameter number must be >= 0, got {number}", start)
            if any(p.opcode == "parameter" and p.parameter_number == number
                   for p in comp.instructions):
                self.error(f"Duplicate parameter number {number}", start)
        try:
            instr = make_instruction(opcode, operands, values, shape=shape, name=name or opcode,
                                     check_shape=self.verify, **data)
        except XlaError as e:
            self.error(str(e), start)
        self._positions[id(instr)] = start
        # Nested (anonymous) instructions are named "<opcode>.anon", unique among the
        # names seen so far in the text (XLA's parser-wide NameUniquer).
        if name:
            self.names.get_unique_name(name)
        else:
            instr.name = self.names.get_unique_name(f"{opcode}.anon")
        comp.add_instruction(instr, uniquify=False)
        for pred in control:
            pred.add_control_dependency_to(instr)
        if instr.sharding is not None and instr.shape.is_tuple():
            instr.sharding = _normalize_tuple_sharding(instr.sharding, instr.shape)
        if opcode in ASYNC_OPCODES:
            _copy_to_wrapped(instr, data)
        return instr

    # -- async ops -------------------------------------------------------------------------

    def _check_async(self, opcode: str, wrapped: str | None, shape, operands, values,
                     start: int, op_pos: int) -> None:
        """XLA's parser checks of async-start/update/done (plain or sugared)."""
        if shape is None and wrapped is not None:
            self.error(f"Async op {opcode} must have an explicit shape (the sugared form "
                       f"{sugared_opcode(opcode, wrapped)} builds its computation from it).",
                       op_pos)
        # The messages carry the words of XLA at jaxlib 0.10.2's commit (first) and of
        # newer XLA, whose parser reads async chains through tuples, copies and loops.
        if shape is not None and opcode != "async-done" and not (
                shape.is_tuple() and len(shape.tuple_shapes) >= 2
                and shape.tuple_shapes[0].is_tuple()):
            older = ("AsyncStart expects the op shape to be in the form of ((async-operands), "
                     "async-outputs, state)." if opcode == "async-start" else
                     "AsyncUpdate expects the op shape to be the same as the operand shape.")
            self.error(f"{older} AsyncStart and AsyncUpdate expect the shape to be in the form "
                       "of ((operand0_shape, operand1_shape, ...), output_shape, ...), found "
                       f"{shape}.", start)
        if opcode == "async-start":
            return
        single = "AsyncUpdate and AsyncDone expect a single async op as their operand"
        if not operands:
            self.error(f"{single}: No operand found for AsyncUpdate and AsyncDone", op_pos)
        if operands[0].opcode == "async-done":
            self.error(f"{single}: AsyncUpdate and AsyncDone cannot have AsyncDone as operand.",
                       op_pos)
        chain_start = chain_start_of_value(operands[0])
        if chain_start is None:
            return  # maybe through a loop not read yet: _check_async_callers looks again
        comp = chain_start.attrs.get("calls")
        if wrapped is not None and comp is not None and comp.root.opcode != wrapped:
            self.error(f"Expect async wrapped opcode to be {comp.root.opcode}, but got {wrapped}",
                       op_pos)
        thread = values.get("async_execution_thread")
        start_thread = chain_start.attrs.get("async_execution_thread") or "main"
        if thread is not None and thread != start_thread:
            self.error(f"Expect async_execution_thread to be {start_thread}, but got {thread}",
                       start)
        given = values.get("calls")
        if given is not None and comp is not None and given is not comp:
            self.error(f"Expect async_wrapped_computation to be {comp.name}, but got "
                       f"{given.name}", start)
        if comp is not None:
            values["calls"] = comp  # inherited from the async-start, as XLA does
            if wrapped is not None and any(comp is c for c in self.wrapped_computations):
                self._late_bind(comp, opcode, shape, start)

    def _late_bind(self, comp: Computation, opcode: str, shape, start: int) -> None:
        """Sugared -update/-done may bind what the -start left open (XLA's
        UpdateAsyncWrappedComputation): operands the update's shape adds become new
        parameters and operands of the wrapped op, and a result shape the op's does not match
        (the update's {1}, the done's shape) becomes its result."""
        root = comp.root
        operands, result = list(root.operands), root.shape
        if opcode == "async-update" and shape is not None:
            bound = shape.tuple_shapes[0].tuple_shapes
            for i in range(len(comp.parameters), len(bound)):
                param = make_instruction("parameter", [], {"parameter_number": i},
                                         shape=bound[i], name="async_param")
                comp.add_instruction(param, uniquify=False)
                comp.instructions.remove(param)
                comp.instructions.insert(comp.instructions.index(root), param)
                operands.append(param)
        if shape is not None:
            out = shape.tuple_shapes[1] if opcode == "async-update" else shape
            bound = not out.is_empty_tuple()  # () leaves the output unbound
            if bound and (not out.compatible(result) or out.is_tuple() != result.is_tuple()):
                result = out
        if operands == root.operands and result is root.shape:
            return
        try:
            result = result_shape(root.opcode, operands, dict(root.attrs.items()), result,
                                  check_shape=self.verify)
        except XlaError as e:
            self.error(f"{opcode}: binding the wrapped {root.opcode} late: {e}", start)
        new = root.clone(operands, shape=result)
        for op in root.operands:
            if id(root) in op._user_ids:
                op._drop_user(root)
        comp.instructions[comp.instructions.index(root)] = new
        new.parent = comp
        comp.root = new

    def _async_wrapped(self, wrapped: str, values: dict, shape, thread, start: int) -> Computation:
        """The computation ``<op>-start`` sugar stands for: parameters for the bound operand
        shapes and the op as root, with the async-start's result shape (XLA's
        CreateAsyncWrappedComputation)."""
        operand_shapes = list(shape.tuple_shapes[0].tuple_shapes)
        called = values.get("to_apply") if wrapped == "call" else (
            values.get("calls") if wrapped == "fusion" else None)
        result = shape.tuple_shapes[1]
        if called is not None:  # call-start / fusion-start: the callee's parameters and result
            params = called.program_shape().parameters
            operand_shapes += params[len(operand_shapes):]
            result = None
        comp = Computation("async_wrapped")  # made unique with the others at the end
        params = []
        try:
            for i, s in enumerate(operand_shapes):
                param = make_instruction("parameter", [], {"parameter_number": i}, shape=s,
                                         name="async_param")
                comp.add_instruction(param, uniquify=False)
                params.append(param)
            root = make_instruction(wrapped, params, values, shape=result,
                                    name="async_op", check_shape=self.verify)
        except XlaError as e:
            self.error(f"{sugared_opcode('async-start', wrapped)}: {e}", start)
        comp.add_instruction(root, uniquify=False)
        comp.root = root
        if thread is not None and thread != "main":
            _set_thread(comp, thread)
        self.module_.add_computation(comp, uniquify=False)
        self.wrapped_computations.append(comp)
        return comp

    def _uniquify_names(self, module: Module) -> None:
        """Computation and instruction names become unique across the module, in text order
        (XLA's HloModule::AddComputationInternal with uniquify_identifiers): a second ``p0``
        in another computation is renamed ``p0.1``, as XLA's parser does."""
        computations, instructions = NameUniquer(), NameUniquer()
        for comp in module.computations:
            comp.name = computations.get_unique_name(comp.name)
            for instr in comp.instructions:
                instr.name = instructions.get_unique_name(instr.name)
        module.computation_uniquer, module.name_uniquer = computations, instructions

    def _next_is_attribute(self) -> bool:
        """After ``,`` comes ``key=``: an attribute (not the next operand or computation)."""
        m = re.compile(r",[ \t\n\r]*[A-Za-z_][A-Za-z0-9_\-]*[ \t\n\r]*=").match(self.sc.text, self.sc.pos)
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
            data["sharding"] = read_sharding(sc)
        elif key == "control-predecessors":
            sc.expect("{", "to start control-predecessors")
            preds = []
            if not sc.eat("}"):
                while True:
                    pos = sc.pos
                    pred_name = self.read_name("an instruction name")
                    if pred_name not in self.scope:
                        self.error(f"instruction '{pred_name}' is not defined (in computation "
                                   f"'{comp.name}')", pos)
                    preds.append(self.scope[pred_name])
                    if sc.eat("}"):
                        break
                    sc.expect(",", "or '}' in control-predecessors")
            data["control-predecessors"] = preds
        elif key == "result_accuracy":
            text = read_result_accuracy(sc)
            if text is not None:  # mode=default is XLA's default: not printed
                data.setdefault("extras", {})[key] = text
        else:  # statistics, origin: carried through as text
            data.setdefault("extras", {})[key] = read_balanced(sc)

    def operands(self, comp: Computation):
        """The operands up to ``)`` (a reading generator giving the list)."""
        sc = self.sc
        out: list[Instruction] = []
        if sc.eat(")"):
            return out
        while True:
            out.append((yield from self.operand(comp)))
            if sc.eat(")"):
                return out
            sc.expect(",", "or ')' in the operand list")

    def operand(self, comp: Computation):
        """One operand: a name or a nested instruction (a reading generator giving it)."""
        sc = self.sc
        sc.skip()
        start = sc.pos
        shape = None
        m = _SHAPE_START.match(sc.text, sc.pos)
        if _is_shape_start(m):
            shape = self._shape()
        sc.skip()
        after_shape = sc.pos
        m = _NAME.match(sc.text, sc.pos)
        if shape is not None and sc.peek() in (",", ")"):  # a shape and no name
            if self.single is not None and self.scopes == 1:
                return self._missing_operand(comp, "", shape, after_shape)
            self.error(f"expects name (an operand name after the operand shape {shape}), found "
                       f"{sc.describe_next()}")
        if m:
            # a named operand is followed by ',' ')' or '#'; otherwise it is a nested op
            end = m.end()
            follow = re.compile(r"[ \t\n\r]*([,)#])").match(sc.text, end)
            if follow:
                name = m.group(1)
                sc.pos = end
                instr = self.scope.get(name)
                if instr is None and self.single is not None and self.scopes == 1:
                    instr = self._missing_operand(comp, name, shape, after_shape)
                    shape = None  # the parameter has the declared shape
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
                        gte = make_instruction("get-tuple-element", [instr], {"index": index},
                                               name=key.replace("#", "_"))
                        comp.add_instruction(gte)
                        self.scope[key] = gte
                    instr, name = gte, key
                if shape is not None and not shape.compatible(instr.shape):
                    self.error(f"The declared operand shape {shape} is not compatible with the "
                               f"shape of the operand instruction {instr.shape}. (operand {name})",
                               start)
                return instr
        # nested anonymous instruction: [shape] opcode(operands)
        sc.pos = start
        self._nest()
        instr = yield self._rhs(comp, "", start, allow_attributes=False)
        self.depth -= 1
        return instr


def _is_shape_start(m: re.Match | None) -> bool:
    """Whether a _SHAPE_START match opens a shape (a tuple, a buffer or an array type)."""
    return m is not None and (m.group(0) == "(" or m.group(1) is not None
                              or dtypes.is_type_name(m.group(2)))


def _set_thread(comp: Computation, thread: str) -> None:
    """The computation and everything it calls run on ``thread`` (XLA's SetThreadName)."""
    for c in callees_first([comp]):
        c.execution_thread = thread


def _normalize_tuple_sharding(text: str, shape) -> str:
    """A single sharding on a tuple-shaped instruction applies to every leaf; XLA's parser
    stores (and prints) it as a tuple sharding (HloSharding::NormalizeTupleSharding)."""
    if re.match(r"\{[ \t\n\r]*[{}]", text):  # already a tuple sharding: {{...}, ...} or {}
        return text
    leaves = max(len(shape.leaves()), 1)  # an empty tuple still has one entry
    out = "{" + text
    for i in range(1, leaves):
        out += (f", /*index={i}*/" if i % 5 == 0 else ", ") + text
    return out + "}"


def _copy_to_wrapped(instr: Instruction, data: dict) -> None:
    """XLA's parser gives an async op's metadata, backend_config, frontend attributes,
    statistics and origin to the instruction it wraps as well."""
    comp = async_wrapped_computation(instr)
    if comp is None or comp.root is None:
        return
    root = comp.root
    if "metadata" in data:
        root.metadata = data["metadata"]
    if "backend_config" in data:
        root.backend_config = data["backend_config"]
    if "frontend_attributes" in data:
        root.frontend_attributes = dict(data["frontend_attributes"])
    for key in ("statistics", "origin"):
        if key in data.get("extras", {}):
            root.extras[key] = data["extras"][key]
