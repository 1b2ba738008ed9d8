#!/usr/bin/env python
"""Run XLA's own parser tests (``xla/hlo/parser/hlo_parser_test.cc``) against xlapy's parser.

Usage::

    python tools/xla_parser_tests.py PATH/TO/hlo_parser_test.cc [-v] [--only NAME ...]
        [--proto] [--json]
    python tools/xla_parser_tests.py --xla-git XLA_CLONE [--commit 5a9e73cbd925] ...

The C++ file is read, never copied into xlapy: give its path or an XLA clone (the commit
jaxlib 0.10.2 was built from, 5a9e73cbd925, is the default; any clone holding it will do).
tests/hlo/test_xla_parser_tests.py runs this over the clone named by ``$XLA_GIT_DIR`` and
compares the failing cases with the known ones (xla_parser_known_failures.json).
Each case runs as the C++ test runs it:

- the CreateTestCases() rows (long form): parse and verify, print with
  ``print_large_constants``, parse and verify again, print with XLA's
  ``HloPrintOptions().set_print_operand_shape(true).set_print_large_constants(true)``: the text
  must come back byte for byte (HloParameterizedParserTest::ExpectEqual);
- the CreateShortTestCases() rows: the same, printed with ``ShortParsable()``;
- the CreateNonRoundtripTestCases() rows: parse and verify, print ShortParsable, compare with
  the expected output (whitespace-stripped at both ends);
- every ``TEST``/``TEST_F`` whose body parses HLO text: the body is read as a small C++
  subset (string variables, ``absl::StrCat``/``StrFormat``, ``for`` loops, ``+=``) and
  evaluated statement by statement. ``ParseAndReturnUnverifiedModule`` is xlapy's
  ``parse_hlo_module(text, verify=False)``; ``ParseAndReturnVerifiedModule`` that plus
  ``verify_module(allow_mixed_precision=True)``, as XLA's VerifiedHloModule. The expectations
  are evaluated as gtest does: ``EXPECT_NE(absl::OkStatus(), ...)``, ``ExpectHasSubstr`` /
  ``HasSubstr`` on the status message (xlapy's ``str(error)``), ``StatusIs(code, ...)``,
  ``EXPECT_EQ(module->ToString(options), text)`` with XLA's print options mapped to
  xlapy's HloPrintOptions, ``GmockMatch(m::...)`` patterns, and the module accessors listed
  in ``_ModuleView`` (entry computation, root, names, config, layouts...).
  ``ParseShape``, ``ParseSharding``, ``ParseWindow``... (XLA's single-attribute parsers) run
  through xlapy's readers of the same syntax and are counted apart ("helpers").

The C++ reading (lexer, table rows, TEST bodies, statements and expressions) is
tools/cpp_subset.py; this file maps XLA's test API onto xlapy and runs the cases.

A C++ assertion the evaluator cannot express in xlapy terms (a proto matcher, an accessor
xlapy has no counterpart for) is not run: the case is reported as passing with that many
assertions unchecked, never silently. Cases whose body has no parse at all (LexesAsJsonDict)
are listed as not applicable.

Prints the counts per kind and every failure with its reason; ``--json`` prints them as JSON.
Exit status 0 when every applicable case passes.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from cpp_subset import (
    Case,
    Failed,
    Node,
    Tok,
    Unsupported,
    extract,
    parse_expr,
    statements,
)

from xlapy.errors import XlaError

# --------------------------------------------------------------------------------------------
# xlapy behind XLA's test API.


def _parse_module(text: str, *, verified: bool, replica_count: int = 1, options=None):
    """XLA's ParseAndReturn{Unverified,Verified}Module."""
    from xlapy.parser import parse_hlo_module
    from xlapy.verifier import verify_module

    kwargs = dict(options.values) if options is not None else {}
    try:
        module = parse_hlo_module(text, verify=False, **kwargs)
    except TypeError:  # an xlapy without the verify option
        module = parse_hlo_module(text, **kwargs)
    if replica_count != 1 and "replica_count" not in module.config:
        module.config["replica_count"] = replica_count
    if verified:
        verify_module(module, allow_mixed_precision=True)
    return module


@dataclass
class Status:
    error: BaseException | None = None

    def ok(self) -> bool:
        return self.error is None

    def message(self) -> str:
        return "" if self.error is None else str(self.error)

    def ToString(self) -> str:
        return "OK" if self.error is None else f"INVALID_ARGUMENT: {self.error}"

    def code(self) -> str:
        return "OK" if self.error is None else "INVALID_ARGUMENT"

    def __eq__(self, other) -> bool:
        return isinstance(other, Status) and self.ok() and other.ok()

    def __repr__(self) -> str:
        return "OkStatus" if self.error is None else f"Status({self.error!s:.300})"


class Result:
    """absl::StatusOr."""

    def __init__(self, thunk):
        try:
            self._value, self._status = _wrap(thunk()), Status()
        except XlaError as e:
            self._value, self._status = None, Status(e)
        except Exception as e:  # noqa: BLE001 - anything else escaping xlapy is a bug
            self._value, self._status = None, Status(
                RuntimeError(f"xlapy raised {type(e).__name__} (not an XlaError): {e}"))

    def status(self) -> Status:
        return self._status

    def ok(self) -> bool:
        return self._status.ok()

    def value(self):
        if not self._status.ok():
            raise Failed(f"value() of an error: {self._status.message()}")
        return self._value


def _wrap(value):
    from xlapy.hlo.ir import Module

    return _ModuleView(value) if isinstance(value, Module) else value


def _print_options(name: str):
    from xlapy.hlo.printer import HloPrintOptions

    if name == "ShortParsable":
        return PrintOptions(HloPrintOptions.short_parsable())
    if name == "Canonical":
        return PrintOptions(HloPrintOptions.short_parsable(), canonical=True)
    if name == "Fingerprint":
        return PrintOptions(HloPrintOptions.short_parsable(), canonical=True, fingerprint=True)
    raise Unsupported(f"HloPrintOptions::{name}")


@dataclass
class PrintOptions:
    """XLA's HloPrintOptions over xlapy's (the setters a test calls)."""

    options: Any = None
    canonical: bool = False
    fingerprint: bool = False

    def __post_init__(self):
        if self.options is None:
            from xlapy.hlo.printer import HloPrintOptions

            self.options = HloPrintOptions()

    def __getattr__(self, name: str):
        if not name.startswith("set_"):
            raise AttributeError(name)
        key = name[4:]

        def setter(value=True):
            if key not in type(self.options).__dataclass_fields__:
                raise Unsupported(f"HloPrintOptions::{name}")
            self.options = replace(self.options, **{key: value})
            return self

        return setter


@dataclass
class ParserOptions:
    """XLA's HloParserOptions: the options parse_hlo_module has."""

    values: dict = field(default_factory=dict)

    def __getattr__(self, name: str):
        if not name.startswith("set_"):
            raise AttributeError(name)
        key = name[4:]
        if key not in ("fill_missing_layouts", "max_recursion_depth", "keep_module_auto_layouts"):
            raise Unsupported(f"HloParserOptions::{name}")

        def setter(value=True):
            self.values[key] = value
            return self

        return setter


class _View:
    """An xlapy object seen through the C++ accessor names the tests call. An accessor the
    view does not have is Unsupported (the assertion is counted as not run)."""

    def __getattr__(self, name: str):
        raise Unsupported(f"{type(self).__name__[1:]}::{name}")


class _ModuleView(_View):
    def __init__(self, module):
        self.m = module

    def ToString(self, options=None):
        from xlapy.hlo.printer import module_to_string

        options = options or PrintOptions()
        if options.canonical:
            raise Unsupported("canonical printing (tmp_N names)")
        return module_to_string(self.m, options.options)

    def entry_computation(self):
        return _ComputationView(self.m.entry)

    def computations(self):
        return [_ComputationView(c) for c in self.m.computations]

    def name(self):
        return self.m.name

    def config(self):
        return _ConfigView(self.m.config)

    def has_schedule(self):
        return bool(self.m.config.get("is_scheduled"))

    def input_output_alias_config(self):
        return _AliasConfigView(self.m.config.get("input_output_alias") or ())

    def buffer_donor_config(self):
        return _DonorConfigView(self.m.config.get("buffer_donor") or ())

    def schedule(self):
        if not self.m.config.get("is_scheduled"):
            raise Failed("schedule() of a module without one")
        return _ScheduleView(self.m)

    def frontend_attributes(self):
        return _MapView(self.m.config.get("frontend_attributes") or {})

    def entry_computation_layout(self):
        return _LayoutView(self.m)

    def __eq__(self, other):
        return isinstance(other, _ModuleView) and self.ToString() == other.ToString()


class _AliasConfigView(_View):
    """HloInputOutputAliasConfig over the module's input_output_alias."""

    def __init__(self, aliases):
        self.aliases = aliases

    def _find(self, number, index):
        return next((a for a in self.aliases if a.parameter_number == number
                     and tuple(a.parameter_index) == tuple(index)), None)

    def GetAliasedOutput(self, number, index):
        alias = self._find(number, index)
        return None if alias is None else tuple(alias.output_index)

    def ParameterMustAlias(self, number, index):
        alias = self._find(number, index)
        return alias is not None and alias.kind == "must-alias"

    def ParameterHasAlias(self, number, index):
        return self._find(number, index) is not None


class _DonorConfigView(_View):
    def __init__(self, donors):
        self.donors = donors

    def ParameterIsBufferDonor(self, number, index):
        return any(d.parameter_number == number and tuple(d.parameter_index) == tuple(index)
                   for d in self.donors)


class _ScheduleView(_View):
    """An is_scheduled module's schedule: each computation's instructions in text order (as
    XLA's parser makes it)."""

    def __init__(self, module):
        self.m = module

    def Verify(self):
        return Status()

    def sequences(self):
        return _ListView(self.m.computations)

    def is_computation_scheduled(self, comp):
        return any(c is comp.c for c in self.m.computations)

    def sequence(self, comp):
        return _SequenceView(comp.c)


class _SequenceView(_View):
    def __init__(self, comp):
        self.c = comp

    def instructions(self):
        return [_InstructionView(i) for i in self.c.instructions]


class _ConfigView(_View):
    def __init__(self, config):
        self.c = config

    def replica_count(self):
        return self.c.get("replica_count", 1)

    def num_partitions(self):
        return self.c.get("num_partitions", 1)

    def use_spmd_partitioning(self):
        return self.c.get("num_partitions", 1) > 1

    def alias_passthrough_params(self):
        return bool(self.c.get("alias_passthrough_params"))

    def allow_spmd_sharding_propagation_to_parameters(self):
        return _ListView(self.c.get("allow_spmd_sharding_propagation_to_parameters", (False,)))

    def allow_spmd_sharding_propagation_to_output(self):
        return _ListView(self.c.get("allow_spmd_sharding_propagation_to_output", (False,)))


class _ListView(list):
    """A std::vector / absl::Span: size(), empty(), [i]."""

    def size(self):
        return len(self)

    def empty(self):
        return not self


class _MapView(_View):
    def __init__(self, mapping):
        self.d = dict(mapping)

    def map(self):
        return self

    def size(self):
        return len(self.d)

    def begin(self):
        return _PairView(*next(iter(self.d.items())))

    def at(self, key):
        return self.d[key]


class _PairView(_View):
    def __init__(self, first, second):
        self.first, self.second = first, second


class _ComputationView(_View):
    def __init__(self, comp):
        self.c = comp

    def name(self):
        return self.c.name

    def root_instruction(self):
        return _InstructionView(self.c.root)

    def instructions(self):
        return [_InstructionView(i) for i in self.c.instructions]

    def ComputeProgramShape(self):
        return _ProgramShapeView(self.c.program_shape())

    def __eq__(self, other):
        from xlapy.hlo.printer import computation_to_string

        return isinstance(other, _ComputationView) and \
            computation_to_string(self.c) == computation_to_string(other.c)


class _ProgramShapeView(_View):
    def __init__(self, program_shape):
        self.p = program_shape

    def result(self):
        return _ShapeView(self.p.result)

    def parameters(self):
        return [_ShapeView(s) for s in self.p.parameters]


class _LayoutView(_View):
    """ComputationLayout of the module's entry (entry_computation_layout)."""

    def __init__(self, module):
        self.layout = module.config.get("entry_computation_layout")
        if self.layout is None:  # XLA's module makes it from the entry's program shape
            self.layout = module.entry.program_shape()

    def parameter_count(self):
        return len(self.layout.parameters)

    def parameter_layout(self, i):
        return _ShapeView(self.layout.parameters[i])

    def result_layout(self):
        return _ShapeView(self.layout.result)

    def AnyLayoutSet(self):
        leaves = [s for p in [*self.layout.parameters, self.layout.result] for _, s in p.leaves()]
        return any(s.is_array() and s.layout is not None for s in leaves)


class _ShapeView(_View):
    def __init__(self, shape):
        self.s = shape

    def shape(self):
        return self

    def has_layout(self):
        return self.s.layout is not None

    def layout(self):
        if self.s.layout is None:
            raise Failed(f"layout() of {self.s}, which has none")
        return _LayoutValue(self.s.layout)

    def __eq__(self, other):
        return isinstance(other, _ShapeView) and self.s == other.s

    def __repr__(self):
        return str(self.s)


class _LayoutValue(_View):
    def __init__(self, layout):
        self.layout = layout

    def minor_to_major(self):
        return list(self.layout.minor_to_major)

    def tiles(self):
        return _ListView(self.layout.tiles)

    def __eq__(self, other):
        mine = tuple(self.layout.minor_to_major)
        if isinstance(other, _LayoutValue):
            return self.layout == other.layout
        return isinstance(other, tuple) and mine == other and not self.layout.tiles

    def __repr__(self):
        return str(self.layout)


class _InstructionView(_View):
    def __init__(self, instr):
        self.i = instr

    def name(self):
        return self.i.name

    def opcode(self):
        return self.i.opcode

    def shape(self):
        return _ShapeView(self.i.shape)

    def operand(self, k):
        return _InstructionView(self.i.operands[k])

    def operand_count(self):
        return len(self.i.operands)

    def raw_backend_config_string(self):
        return self.i.backend_config or ""

    def metadata(self):
        return _MetadataView(self.i.metadata)

    def feature_group_count(self):
        return self.i.attrs["feature_group_count"]

    def frontend_attributes(self):
        return _MapView(self.i.frontend_attributes or {})

    def sparsity_config(self):
        return _FieldsView(self.i.attrs["sparsity_config"])

    def convolution_kind(self):
        return f"CONVOLUTION_KIND_{self.i.attrs['convolution_kind'].name}"

    def async_wrapped_instruction(self):
        from xlapy.hlo.async_chain import async_wrapped_computation

        return _InstructionView(async_wrapped_computation(self.i).root)

    def async_chain_start(self):
        from xlapy.hlo.async_chain import async_chain_start

        return _InstructionView(async_chain_start(self.i))

    def ToString(self, options=None):
        from xlapy.hlo.printer import instruction_to_string

        options = options or PrintOptions()
        if options.canonical:
            raise Unsupported("canonical printing (tmp_N names)")
        return instruction_to_string(self.i, options.options)


class _FieldsView(_View):
    """A proto message over an xlapy dataclass: ``x()`` its field, ``has_x()`` whether set;
    an unset message reads as the default one (every number 0)."""

    def __init__(self, value):
        self.v = value

    def __getattr__(self, name: str):
        fields = getattr(type(self.v), "__dataclass_fields__", None)
        if name.startswith("has_") and (self.v is None or name[4:] in fields):
            return lambda: self.v is not None and getattr(self.v, name[4:]) is not None
        if self.v is None:
            return lambda: 0
        if fields is not None and name in fields:
            value = getattr(self.v, name)
            return lambda: _FieldsView(value) if value is None or hasattr(
                type(value), "__dataclass_fields__") else value
        raise Unsupported(f"{type(self.v).__name__}::{name}")


class _MetadataView(_View):
    def __init__(self, metadata):
        self.md = metadata

    def __getattr__(self, name: str):
        fields = getattr(self.md, "__dataclass_fields__", {})
        if name in fields:
            return lambda: getattr(self.md, name)
        raise Unsupported(f"OpMetadata::{name}")


# gmock patterns: m::Multiply(m::Parameter(0), m::Parameter(1)), m::Op().WithOpcode(...)...


@dataclass
class Pattern:
    opcode: str | None = None
    operands: list | None = None
    parameter_number: int | None = None
    operand_at: dict = field(default_factory=dict)
    num_operands: int | None = None

    def matches(self, instr) -> bool:
        if self.opcode is not None and instr.opcode != self.opcode:
            return False
        if self.parameter_number is not None and \
                instr.attrs.get("parameter_number") != self.parameter_number:
            return False
        if self.operands is not None and (len(self.operands) != len(instr.operands) or not all(
                p.matches(o) for p, o in zip(self.operands, instr.operands))):
            return False
        if self.num_operands is not None and len(instr.operands) != self.num_operands:
            return False
        return all(k < len(instr.operands) and p.matches(instr.operands[k])
                   for k, p in self.operand_at.items())

    def WithOpcode(self, opcode):
        return replace(self, opcode=opcode)

    def WithNumOperands(self, n):
        return replace(self, num_operands=n)

    def WithOperand(self, k, pattern):
        return replace(self, operand_at={**self.operand_at, k: pattern})


def _pattern(cpp_name: str):
    def make(*args):
        if cpp_name == "Op":
            return Pattern()
        opcode = _OPCODE_OF_PATTERN.get(cpp_name) or re.sub(
            r"(?<!^)([A-Z])", r"-\1", cpp_name).lower()
        if cpp_name == "Parameter":
            return Pattern("parameter", parameter_number=args[0] if args else None)
        return Pattern(opcode, operands=list(args) if args else None)
    return make


_OPCODE_OF_PATTERN = {"GetTupleElement": "get-tuple-element", "Constant": "constant"}


@dataclass
class Matcher:
    kind: str
    args: tuple

    def check(self, value) -> tuple[bool, str]:
        if self.kind == "HasSubstr":
            text = value if isinstance(value, str) else str(value)
            return self.args[0] in text, f"{text!r:.600} does not contain {self.args[0]!r}"
        if self.kind == "StatusIs":
            status = value.status() if isinstance(value, Result) else value
            if status.ok():
                return False, "the status is OK"
            return self.args[1].check(status.message()) if len(self.args) > 1 else (True, "")
        if self.kind == "GmockMatch":
            instr = value.i
            return self.args[0].matches(instr), f"{instr.opcode} %{instr.name} does not match"
        if self.kind == "ElementsAre":
            items = list(value)
            if len(items) != len(self.args):
                return False, f"{items} has {len(items)} elements, not {len(self.args)}"
            for got, want in zip(items, self.args):
                ok, why = want.check(got) if isinstance(want, Matcher) else (got == want, "")
                if not ok:
                    return False, f"{items} != {list(self.args)} ({why})"
            return True, ""
        raise Unsupported(f"matcher {self.kind}")


# --------------------------------------------------------------------------------------------
# Helpers: XLA's single-attribute parsers over xlapy's readers of the same syntax.


def _scan_all(text: str, what: str, read):
    from xlapy.shape.text import Scanner

    sc = Scanner(text, what)
    value = read(sc)
    if not sc.at_end():
        sc.error(f"extra content after {what}: {sc.describe_next()}")
    return value


class _TextValue(_View):
    """A parsed attribute whose ToString is xlapy's text of it."""

    def __init__(self, text: str):
        self.text = text

    def ToString(self, include_metadata=False):
        return self.text


def _helper(name: str):
    def parse_sharding(text):
        from xlapy.hlo.attrs.sharding import read_sharding

        return Result(lambda: _TextValue(_scan_all(text, "sharding", read_sharding)))

    def parse_shape(text):
        from xlapy.shape import parse_shape

        return Result(lambda: _ShapeView(parse_shape(text)))

    def kind_reader(kind):
        def parse(text):
            return Result(lambda: _TextValue(kind.to_text(_scan_all(
                text, name, lambda sc: kind.read(sc, None)))))
        return parse

    def parse_replica_groups(text):
        from xlapy.hlo.attrs.collective import read_replica_groups

        def read():
            groups = _scan_all(text, "replica_groups", read_replica_groups)
            if name == "ParseReplicaGroupsOnly":  # a std::vector<ReplicaGroup>
                return _ListView(groups.expand().groups)
            return _TextValue(groups.to_text())
        return Result(read)

    def parse_frontend_attributes(text):
        from xlapy.hlo.module_data import read_frontend_attributes

        return Result(lambda: _scan_all(text, "frontend_attributes", read_frontend_attributes))

    if name == "ParseSharding":
        return parse_sharding
    if name == "ParseShape":
        return parse_shape
    if name in ("ParseReplicaGroupsOnly", "ParseCollectiveDeviceListBase"):
        return parse_replica_groups
    if name == "ParseFrontendAttributes":
        return parse_frontend_attributes
    from xlapy.hlo.attrs.padding import PaddingConfigKind
    from xlapy.hlo.attrs.window import DimLabelsKind, WindowKind

    kinds = {"ParseWindow": WindowKind, "ParseConvolutionDimensionNumbers": DimLabelsKind,
             "ParsePaddingConfig": PaddingConfigKind}
    if name in kinds:
        return kind_reader(kinds[name]())
    raise Unsupported(name)


_HELPERS = ("ParseSharding", "ParseShape", "ParseWindow", "ParseConvolutionDimensionNumbers",
            "ParsePaddingConfig", "ParseReplicaGroupsOnly", "ParseCollectiveDeviceListBase",
            "ParseFrontendAttributes", "ParseLayout", "ParseOriginalValue", "ParseStatistics")


# --------------------------------------------------------------------------------------------
# The evaluator.


_PRIMITIVE_TYPES = ("PRED", "S4", "S8", "S16", "S32", "S64", "U4", "U8", "U16", "U32", "U64",
                    "F16", "BF16", "F32", "F64", "C64", "C128")


@dataclass
class Outcome:
    name: str
    kind: str
    ok: bool = True
    failures: list[str] = field(default_factory=list)
    unchecked: list[str] = field(default_factory=list)
    parses: int = 0  # ParseAndReturn*Module calls
    helpers: int = 0  # ParseShape, ParseSharding, ...
    expects_error: bool = False


class Evaluator:
    def __init__(self, outcome: Outcome):
        self.vars: dict[str, Any] = {}
        self.out = outcome

    # statements

    def run(self, stmts) -> None:
        for stmt in stmts:
            self.stmt(stmt)

    def stmt(self, stmt) -> None:
        kind = stmt[0]
        if kind == "block":
            self.run(stmt[1])
        elif kind == "for":
            self._for(stmt[1], stmt[2])
        elif kind == "if":
            self.stmt(stmt[2] if self.eval(parse_expr(stmt[1])) else (stmt[3] or ("block", [])))
        elif kind == "expr":
            try:
                self.expr_stmt(stmt[1])
            except Unsupported as e:
                self.out.unchecked.append(f"line {stmt[1][0].line}: {e}")
                target = _assigned_name(stmt[1])
                if target is not None:  # later uses of it cannot be evaluated either
                    self.vars[target] = _Unknown(f"{target} (line {stmt[1][0].line}: {e})")

    def _for(self, head: list[Tok], body) -> None:
        parts = [[]]
        depth = 0
        for t in head:
            if t.value == ";" and depth == 0:
                parts.append([])
                continue
            if t.kind == "op" and t.value in "([{":
                depth += 1
            elif t.kind == "op" and t.value in ")]}":
                depth -= 1
            parts[-1].append(t)
        if len(parts) == 1:  # for (const std::string& s : list)
            colon = max(k for k, t in enumerate(head) if t.value == ":")
            name = head[colon - 1].value
            for item in self.eval(parse_expr(head[colon + 1:])):
                self.vars[name] = item
                self.stmt(body)
            return
        self.expr_stmt(parts[0])
        for _ in range(100000):
            if not self.eval(parse_expr(parts[1])):
                return
            self.stmt(body)
            self.expr_stmt(parts[2])
        raise Unsupported("a loop that does not end")

    def expr_stmt(self, toks: list[Tok]) -> None:
        values = [t.value for t in toks]
        depth = 0
        for k, t in enumerate(toks):  # a declaration or assignment: the top-level '='
            if t.kind == "op" and t.value in "([{":
                depth += 1
            elif t.kind == "op" and t.value in ")]}":
                depth -= 1
            elif depth == 0 and t.kind == "op" and t.value in ("=", "+=", "-="):
                lhs = [x for x in toks[:k] if not (x.kind == "op" and x.value in "[]")]
                name = lhs[-1].value
                value = self.eval(parse_expr(toks[k + 1:]), type_name=lhs[-2].value
                                  if len(lhs) > 1 else None)
                if t.value == "+=":
                    value = self.vars[name] + value
                elif t.value == "-=":
                    value = self.vars[name] - value
                self.vars[name] = value
                return
        if values[-1] in ("++", "--"):
            self.vars[values[0]] += 1 if values[-1] == "++" else -1
            return
        if values[0] in ("++", "--"):
            self.vars[values[1]] += 1 if values[0] == "++" else -1
            return
        if len(toks) >= 2 and all(t.kind == "id" or t.value in ("<", ">", "*", "&", ",")
                                  for t in toks) and toks[-1].kind == "id":
            self.vars[toks[-1].value] = self._default(toks[-2].value)  # T name;
            return
        if len(toks) >= 2 and toks[-1].value == ")" and toks[0].kind == "id" and \
                toks[1].kind == "id" and toks[2].value == "(":
            raise Unsupported(f"constructing {toks[0].value} {toks[1].value}(...)")
        self.eval(parse_expr(toks))

    def _default(self, type_name: str):
        if type_name == "HloParserOptions":
            return ParserOptions()
        if type_name == "HloPrintOptions":
            return PrintOptions()
        if type_name in ("string", "std::string"):
            return ""
        if type_name == "HloModuleConfig":
            return {}
        raise Unsupported(f"a default {type_name}")

    # expressions

    def eval(self, node: Node, type_name: str | None = None):
        op = node.op
        if op == "lit":
            return node.a
        if op == "name":
            return self.name(node.a)
        if op == "list":
            return tuple(self.eval(x) for x in node.a)
        if op == "unary":
            v = self.eval(node.b)
            if node.a == "!":
                return not v
            if node.a == "-":
                return -v
            if node.a == "*":
                return v.value() if isinstance(v, Result) else v
            return v
        if op == "cond":
            return self.eval(node.b) if self.eval(node.a) else self.eval(node.c)
        if op == "bin":
            a = self.eval(node.b)
            if node.a == "<<" and isinstance(a, _Sink):
                return a  # a failure message streamed into an EXPECT: not evaluated
            return _binary(node.a, a, self.eval(node.c))
        if op == "index":
            return self.eval(node.a)[self.eval(node.b)]
        if op == "member":
            obj = self.eval(node.a)
            if isinstance(obj, Result) and node.b not in ("status", "ok", "value"):
                obj = obj.value()  # result->x
            try:
                return getattr(obj, node.b)
            except AttributeError:
                raise Unsupported(f"{type(obj).__name__}::{node.b}") from None
        if op == "call":
            fn = node.a
            if fn.op == "name" and fn.a in _MACROS:
                return _MACROS[fn.a](self, node.b)
            target = self.eval(fn)
            args = [self.eval(x) for x in node.b]
            if not callable(target):
                raise Unsupported(f"calling {target!r}")
            return target(*args)
        raise Unsupported(op)

    def name(self, name: str):
        if name in self.vars:
            if isinstance(self.vars[name], _Unknown):
                raise Unsupported(f"uses {self.vars[name].why}")
            return self.vars[name]
        short = name.split("::")[-1]
        if short == "ParseAndReturnUnverifiedModule":
            return self._parse(verified=False)
        if short == "ParseAndReturnVerifiedModule":
            return self._parse(verified=True)
        if short in _HELPERS:
            helper = _helper(short)  # Unsupported when xlapy has no counterpart

            def call(text, *rest):
                self.out.helpers += 1
                return helper(text)
            return call
        if short == "ReplicaGroupsToString":
            return lambda groups: "{" + ",".join(
                "{" + ",".join(map(str, g)) + "}" for g in groups) + "}"
        if short == "FrontendAttributesToString":
            from xlapy.hlo.module_data import frontend_attributes_to_text

            return frontend_attributes_to_text
        if short == "OkStatus":
            return Status
        if name.startswith("HloPrintOptions::"):
            return lambda: _print_options(short)
        if short == "HloPrintOptions":
            return PrintOptions
        if short == "HloParserOptions":
            return ParserOptions
        if short == "HloModuleConfig":
            return dict
        if name.startswith(("m::", "match::")):
            return _pattern(short)
        if name.startswith("HloOpcode::k"):
            return re.sub(r"(?<!^)([A-Z])", r"-\1", short[1:]).lower()
        if short in ("HasSubstr", "StatusIs", "GmockMatch", "ElementsAre"):
            return lambda *args, _k=short: Matcher(_k, args)
        if name in ("tsl::error::INVALID_ARGUMENT", "absl::StatusCode::kInvalidArgument"):
            return "INVALID_ARGUMENT"
        if short == "StripAsciiWhitespace":
            return lambda s: s.strip(" \t\n\r\f\v")
        if short == "StrCat":
            return lambda *parts: "".join(str(p) for p in parts)
        if short == "StrFormat":
            return lambda fmt, *args: fmt % args
        if short == "StrContains":
            return lambda s, sub: sub in s
        if short == "to_string":
            return str
        if short in ("string", "std::string"):
            return lambda s="": s
        if short in ("Cast", "DynCast", "static_cast", "dynamic_cast", "move"):
            return lambda x: x
        if short in _PRIMITIVE_TYPES and name in (short, f"PrimitiveType::{short}"):
            return short.lower()
        if name.startswith("ShapeUtil::"):
            return _shape_util(short)
        if short.startswith("CONVOLUTION_KIND_"):  # compared with convolution_kind()
            return short
        if short == "ShapeIndex":
            return lambda *args: tuple(args[0]) if len(args) == 1 and isinstance(
                args[0], tuple) else tuple(args)
        if name in ("Layout", "LayoutUtil::MakeLayout"):
            return lambda minor_to_major: tuple(minor_to_major)
        if name == "LayoutUtil::Equal":
            return lambda a, b: a == b if isinstance(a, _LayoutValue) else b == a
        if name == "Shape::kUnboundedSize":
            return "?"
        raise Unsupported(f"name {name}")

    def _parse(self, *, verified: bool):
        def call(text, config=None, options=None):
            self.out.parses += 1
            rc = (config or {}).get("replica_count", 1) if isinstance(config, dict) else 1
            if options is not None and not isinstance(options, ParserOptions):
                raise Unsupported("parser options")
            return Result(lambda: _parse_module(text, verified=verified, replica_count=rc,
                                                options=options))
        return call

    # assertions

    def check(self, ok: bool, what: str, fatal: bool) -> None:
        if ok:
            return
        self.out.ok = False
        self.out.failures.append(what)
        if fatal:
            raise Failed(what)


class _Unknown:
    """The value of a variable whose assignment could not be evaluated."""

    def __init__(self, why: str):
        self.why = why


def _assigned_name(toks: list[Tok]) -> str | None:
    """The variable a declaration or assignment statement sets (``T x = ...``, ``x += ...``)."""
    depth = 0
    for k, t in enumerate(toks):
        if t.kind == "op" and t.value in "([{":
            depth += 1
        elif t.kind == "op" and t.value in ")]}":
            depth -= 1
        elif depth == 0 and t.kind == "op" and t.value in ("=", "+=", "-="):
            lhs = [x for x in toks[:k] if x.kind == "id"]
            return lhs[-1].value if lhs else None
    return None


def _shape_util(name: str):
    """ShapeUtil's shape makers and comparison, over xlapy shapes."""
    from xlapy.shape import Shape, parse_shape

    def array(element_type, dims, dynamic=None):
        dims = [f"<={d}" if dynamic and dynamic[k] and d != "?" else str(d)
                for k, d in enumerate(dims)]
        return _ShapeView(parse_shape(f"{element_type}[{','.join(dims)}]"))

    def dense(element_type, dims, minor_to_major, *more):
        if more:  # tiles, element sizes, memory space, split configs
            raise Unsupported("ShapeUtil::MakeShapeWithDenseLayout with tiles or sizes")
        return _ShapeView(parse_shape(f"{element_type}[{','.join(map(str, dims))}]"
                                      f"{{{','.join(map(str, minor_to_major))}}}"))

    makers = {
        "MakeShape": array,
        "MakeScalarShape": lambda element_type: _ShapeView(parse_shape(f"{element_type}[]")),
        "MakeShapeWithDenseLayout": dense,
        "MakeTupleShape": lambda shapes: _ShapeView(Shape.tuple([v.s for v in shapes])),
        "MakeTokenShape": lambda: _ShapeView(parse_shape("token[]")),
        "MakeOpaqueShape": lambda: _ShapeView(parse_shape("opaque[]")),
        "Equal": lambda a, b: a == b,
    }
    if name not in makers:
        raise Unsupported(f"ShapeUtil::{name}")
    return makers[name]


class _Sink:
    """What an EXPECT_* returns: ``<< message`` after it is dropped."""


def _binary(op, a, b):
    if op == "==":
        return a == b
    if op == "!=":
        return not a == b  # noqa: SIM201 - C++'s != is !(a == b) here
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op == "<":
        return a < b
    if op == ">":
        return a > b
    if op == "<=":
        return a <= b
    if op == ">=":
        return a >= b
    if op == "&&":
        return a and b
    if op == "||":
        return a or b
    raise Unsupported(f"operator {op}")


def _status_of(value) -> Status:
    if isinstance(value, Status):
        return value
    if isinstance(value, Result):
        return value.status()
    raise Unsupported(f"status of {value!r}")


def _m_eq(fatal: bool, negate: bool):
    def run(ev: Evaluator, args):
        a, b = ev.eval(args[0]), ev.eval(args[1])
        if isinstance(a, Status) and isinstance(b, Status):
            # EXPECT_EQ(absl::OkStatus(), result.status()) and the like
            ok_both = a.ok() == b.ok()
            why = (b if a.ok() else a).message() or "OK"
            if negate:
                ev.out.expects_error = True
            ev.check(ok_both != negate, f"status {'==' if not negate else '!='} OK failed: "
                     f"{why:.800}", fatal)
            return _Sink()
        equal = _equal(a, b)
        ev.check(equal != negate, f"{'EXPECT_EQ' if not negate else 'EXPECT_NE'}: "
                 f"{_show(a)} vs {_show(b)}", fatal)
        return _Sink()
    return run


def _equal(a, b) -> bool:
    if isinstance(a, tuple) and isinstance(b, list) or isinstance(a, list) and isinstance(b, tuple):
        return list(a) == list(b)
    return a == b


def _show(v) -> str:
    if isinstance(v, str):
        return repr(v) if len(v) < 400 else repr(v[:400]) + "..."
    return repr(v)


def _m_bool(fatal: bool, want: bool):
    def run(ev: Evaluator, args):
        node = args[0]
        v = ev.eval(node)
        if isinstance(v, Result):
            v = v.ok()
        if (want is False or (node.op == "unary" and node.a == "!")) \
                and _mentions_status(node):
            ev.out.expects_error = True
        ev.check(bool(v) == want, f"{'EXPECT_TRUE' if want else 'EXPECT_FALSE'} failed", fatal)
        return _Sink()
    return run


def _mentions_status(node: Node) -> bool:
    if node.op == "member" and node.b in ("ok", "status"):
        return True
    return any(_mentions_status(x) for x in (node.a, node.b, node.c) if isinstance(x, Node))


def _m_ok(fatal: bool):
    def run(ev: Evaluator, args):
        status = _status_of(ev.eval(args[0]))
        ev.check(status.ok(), f"expected OK, got: {status.message():.1200}", fatal)
        return _Sink()
    return run


def _m_ok_and_assign(ev: Evaluator, args):
    decl = args[0]
    while decl.op in ("unary",):
        decl = decl.b
    name = decl.a if decl.op == "name" else None
    if name is None:
        raise Unsupported("ASSERT_OK_AND_ASSIGN target")
    name = name.split()[-1]
    result = ev.eval(args[1])
    status = _status_of(result)
    ev.check(status.ok(), f"expected OK, got: {status.message():.1200}", True)
    ev.vars[name] = result.value()
    return _Sink()


def _m_that(fatal: bool):
    def run(ev: Evaluator, args):
        value = ev.eval(args[0])
        matcher = ev.eval(args[1])
        if not isinstance(matcher, Matcher):
            raise Unsupported(f"matcher {matcher!r}")
        if matcher.kind in ("StatusIs", "HasSubstr") and _mentions_status(args[0]):
            ev.out.expects_error = True
        ok, why = matcher.check(value)
        ev.check(ok, f"EXPECT_THAT: {why}", fatal)
        return _Sink()
    return run


def _m_has_substr(ev: Evaluator, args):
    text, sub = ev.eval(args[0]), ev.eval(args[1])
    if _mentions_status(args[0]):
        ev.out.expects_error = True
    ev.check(sub in text, f"{text!r:.900} does not contain {sub!r}", False)
    return _Sink()


def _m_ignore(ev: Evaluator, args):
    return _Sink()


def _m_unsupported(ev: Evaluator, args):
    raise Unsupported("an expectation on a C++-only API")


_MACROS = {
    "EXPECT_EQ": _m_eq(False, False), "ASSERT_EQ": _m_eq(True, False),
    "EXPECT_NE": _m_eq(False, True), "ASSERT_NE": _m_eq(True, True),
    "EXPECT_TRUE": _m_bool(False, True), "ASSERT_TRUE": _m_bool(True, True),
    "EXPECT_FALSE": _m_bool(False, False), "ASSERT_FALSE": _m_bool(True, False),
    "TF_EXPECT_OK": _m_ok(False), "EXPECT_OK": _m_ok(False), "ASSERT_OK": _m_ok(True),
    "TF_ASSERT_OK": _m_ok(True),
    "ASSERT_OK_AND_ASSIGN": _m_ok_and_assign, "TF_ASSERT_OK_AND_ASSIGN": _m_ok_and_assign,
    "EXPECT_THAT": _m_that(False), "ASSERT_THAT": _m_that(True),
    "ExpectHasSubstr": _m_has_substr,
    "LOG": _m_ignore, "VLOG": _m_ignore,
}


# --------------------------------------------------------------------------------------------
# Running cases.


def run_table_case(case: Case, proto: bool = False) -> Outcome:
    """HloParameterizedParserTest::ExpectEqual and HloNonRoundtripParserTest::Run."""
    from xlapy.hlo.printer import HloPrintOptions, module_to_string

    out = Outcome(case.name, case.kind + ("-proto" if proto else ""), parses=1)
    try:
        module = _parse_module(case.text, verified=True, replica_count=case.replica_count)
        if case.kind == "nonroundtrip":
            printed = module_to_string(module, HloPrintOptions.short_parsable())
            if printed.strip() != case.expected.strip():
                out.ok = False
                out.failures.append(_diff(case.expected.strip(), printed.strip()))
            return out
        module = _parse_module(module_to_string(module, print_large_constants=True),
                               verified=True, replica_count=case.replica_count)
        if proto:
            from xlapy.proto import module_to_proto
            from xlapy.proto.module import module_from_proto

            module = module_from_proto(module_to_proto(module))
        options = HloPrintOptions.short_parsable() if case.kind == "short" else \
            HloPrintOptions(print_operand_shape=True, print_large_constants=True)
        printed = module_to_string(module, options)
        if printed != case.text:
            out.ok = False
            out.failures.append(_diff(case.text, printed))
    except XlaError as e:
        out.ok = False
        out.failures.append(f"{type(e).__name__}: {e}")
    except Exception as e:  # noqa: BLE001 - reported as a failure of xlapy, not the runner
        out.ok = False
        out.failures.append(f"xlapy raised {type(e).__name__} (not an XlaError): {e}")
    return out


def _diff(want: str, got: str) -> str:
    w, g = want.splitlines(), got.splitlines()
    for k, (a, b) in enumerate(zip(w, g)):
        if a != b:
            return f"printed text differs at line {k + 1}:\n  want: {a}\n  got:  {b}"
    return f"printed text differs in length ({len(w)} vs {len(g)} lines)"


def run_test_case(case: Case) -> Outcome:
    out = Outcome(case.name, "test")
    ev = Evaluator(out)
    try:
        ev.run(statements(case.body))
    except Failed:
        pass
    except Unsupported as e:
        out.unchecked.append(str(e))
    except XlaError as e:
        out.ok = False
        out.failures.append(f"{type(e).__name__}: {e}")
    except Exception as e:  # noqa: BLE001
        out.ok = False
        out.failures.append(f"runner or xlapy raised {type(e).__name__}: {e}")
    if out.parses and not out.helpers:
        out.kind = "error" if out.expects_error else "parse-ok"
    elif out.helpers:
        out.kind = "helper"
    else:
        out.kind = "n/a"
    return out


def run_all(cases: list[Case], proto: bool = False) -> list[Outcome]:
    outcomes = []
    for case in cases:
        if case.kind == "test":
            outcomes.append(run_test_case(case))
        else:
            outcomes.append(run_table_case(case))
            if proto and case.kind in ("long", "short"):
                outcomes.append(run_table_case(case, proto=True))
    return outcomes


KINDS = ("long", "short", "nonroundtrip", "error", "parse-ok")


def summary(outcomes: list[Outcome]) -> dict:
    def count(kinds):
        sel = [o for o in outcomes if o.kind in kinds]
        return {"passed": sum(o.ok for o in sel), "total": len(sel)}

    result = {k: count((k,)) for k in KINDS + ("long-proto", "short-proto", "helper")}
    result["module cases"] = count(KINDS)
    result["not applicable"] = [o.name for o in outcomes if o.kind == "n/a"]
    result["unchecked assertions"] = sum(len(o.unchecked) for o in outcomes if o.ok
                                         and o.kind != "n/a")
    return result


#: The XLA commit jaxlib 0.10.2 was built from.
JAXLIB_XLA_COMMIT = "5a9e73cbd925"
TEST_FILE = "xla/hlo/parser/hlo_parser_test.cc"


def read_source(path: str | None = None, git_dir: str | None = None,
                commit: str = JAXLIB_XLA_COMMIT) -> str:
    """The C++ test file: ``path``, or ``git show commit:xla/hlo/parser/hlo_parser_test.cc`` in
    the XLA clone ``git_dir`` (any clone holding the commit: openxla/xla or a fork)."""
    if path is not None:
        return Path(path).read_text()
    if git_dir is None:
        raise SystemExit("give the test file's path or --xla-git DIR (an XLA clone)")
    import subprocess

    proc = subprocess.run(["git", "-C", git_dir, "show", f"{commit}:{TEST_FILE}"],
                          capture_output=True, text=True, check=False)
    if proc.returncode:
        raise SystemExit(f"git show {commit}:{TEST_FILE} in {git_dir}: {proc.stderr.strip()}")
    return proc.stdout


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("path", nargs="?", help="xla/hlo/parser/hlo_parser_test.cc of an XLA checkout")
    ap.add_argument("--xla-git", metavar="DIR",
                    help="read the test file from this XLA clone (git show COMMIT:path)")
    ap.add_argument("--commit", default=JAXLIB_XLA_COMMIT,
                    help=f"with --xla-git: the commit (default {JAXLIB_XLA_COMMIT}, jaxlib "
                         f"0.10.2's)")
    ap.add_argument("-v", "--verbose", action="store_true",
                    help="also list the assertions not run in passing cases")
    ap.add_argument("--only", nargs="*", help="run only these case names")
    ap.add_argument("--proto", action="store_true",
                    help="also run the rows through an HloModuleProto (the *Proto suites)")
    ap.add_argument("--json", action="store_true", help="print the outcome as JSON")
    args = ap.parse_args(argv)
    cases = extract(read_source(args.path, args.xla_git, args.commit))
    if args.only:
        cases = [c for c in cases if c.name in set(args.only)]
    outcomes = run_all(cases, proto=args.proto)
    total = summary(outcomes)
    if args.json:
        print(json.dumps({"summary": total, "cases": [o.__dict__ for o in outcomes]}, indent=1))
    else:
        for o in outcomes:
            if not o.ok:
                print(f"FAIL [{o.kind}] {o.name}")
                for f in o.failures:
                    print("    " + f.replace("\n", "\n    "))
            elif args.verbose and o.unchecked:
                print(f"pass [{o.kind}] {o.name} ({len(o.unchecked)} assertion(s) not run)")
                for u in o.unchecked:
                    print("    not run: " + u)
        print()
        for k in KINDS + ("long-proto", "short-proto", "helper"):
            c = total[k]
            if c["total"]:
                print(f"{k:>14}: {c['passed']:4d} / {c['total']}")
        c = total["module cases"]
        print(f"{'module cases':>14}: {c['passed']:4d} / {c['total']}  (long, short, "
              f"non-round-trip, error and parse-ok cases)")
        print(f"C++ assertions not run in passing cases: {total['unchecked assertions']} "
              f"(-v lists them); not applicable: {', '.join(total['not applicable']) or '-'}")
    applicable = [o for o in outcomes if o.kind != "n/a"]
    return 0 if all(o.ok for o in applicable) else 1


if __name__ == "__main__":
    sys.exit(main())
