"""The HLO text printer, byte for byte as XLA prints.

Owns: HloPrintOptions (XLA's option names; ``default()`` and ``short_parsable()``),
module/computation/instruction printing, including the async sugar (an async op whose
computation is one instruction prints as ``<op>-start(...)`` with the op's attributes, and
the computation is not printed; ``syntax_sugar_async_ops=False`` prints ``async-start``,
``calls=`` and the computation). Attribute text comes from each instruction's schema
(``Instruction.attr_specs``, set by the op definition that made it; AttrSpec kinds own their
syntax); this module only orders and joins. Imports shape and the IR: never the op registry
or the parser.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from xlapy.hlo.async_chain import (
    async_wrapped_computation,
    can_expand_into_single_instruction,
    is_async_computation,
    sugared_opcode,
)
from xlapy.hlo.attrs import PRINT_PERCENT
from xlapy.hlo.attrs.numbers import c_escape
from xlapy.hlo.ir import Computation, Instruction, Module
from xlapy.hlo.module_data import (
    aliases_to_text,
    buffer_donors_to_text,
    frontend_attributes_to_text,
    lexes_as_json_dict,
)
from xlapy.hlo.opcodes import ASYNC_OPCODES


@dataclass(frozen=True)
class HloPrintOptions:
    """XLA's HloPrintOptions (the subset that changes the text xlapy prints)."""

    print_large_constants: bool = False
    print_metadata: bool = True
    print_metadata_only_op_name: bool = False
    print_backend_config: bool = True
    print_operand_shape: bool = False
    print_operand_names: bool = True
    print_program_shape: bool = True
    print_percent: bool = True
    print_control_dependencies: bool = True
    print_operand_index_annotation_interval: int = 5
    include_layout_in_shapes: bool = True
    print_result_shape: bool = True
    print_extra_attributes: bool = True
    print_frontend_attributes: bool = True
    syntax_sugar_async_ops: bool = True
    print_ids: bool = True
    compact_gte: bool = False  # operands name%tuple#i; get-tuple-elements not printed

    @staticmethod
    def default() -> "HloPrintOptions":
        return HloPrintOptions()

    @staticmethod
    def short_parsable() -> "HloPrintOptions":
        """What jax's ``lower(...).as_text(dialect="hlo")`` prints."""
        return HloPrintOptions(print_large_constants=True, print_metadata=False,
                               print_operand_shape=False,
                               print_operand_index_annotation_interval=0,
                               print_program_shape=False, print_percent=False,
                               print_control_dependencies=False)


def _options(options: HloPrintOptions | None, overrides: dict) -> HloPrintOptions:
    options = options or HloPrintOptions()
    unknown = set(overrides) - set(HloPrintOptions.__dataclass_fields__)
    if unknown:
        from xlapy.errors import InvalidArgumentError

        raise InvalidArgumentError(
            f"to_string: unknown print option(s) {sorted(unknown)}; known: "
            f"{', '.join(HloPrintOptions.__dataclass_fields__)}")
    return replace(options, **overrides) if overrides else options


def module_to_string(module: Module, options: HloPrintOptions | None = None, **overrides) -> str:
    """The module in XLA's text form. ``module_to_string(m, print_operand_shape=True)``."""
    opts = _options(options, overrides)
    out = [f"HloModule {module.name}"]
    cfg = module.config
    if cfg.get("is_scheduled"):
        out.append(", is_scheduled=true")
    if cfg.get("input_output_alias"):
        out.append(", input_output_alias=" + aliases_to_text(cfg["input_output_alias"]))
    if cfg.get("buffer_donor"):
        out.append(", buffer_donor=" + buffer_donors_to_text(cfg["buffer_donor"]))
    if cfg.get("alias_passthrough_params"):
        out.append(", alias_passthrough_params=true")
    layout = cfg.get("entry_computation_layout")
    if layout is None and module.entry is not None and module.entry.root is not None:
        from xlapy.hlo.module_data import ComputationLayout

        layout = ComputationLayout(tuple(p.shape for p in module.entry.parameters),
                                   module.entry.root.shape)
    if layout is not None:
        out.append(", entry_computation_layout=" + layout.to_text())
    for key in ("allow_spmd_sharding_propagation_to_parameters",
                "allow_spmd_sharding_propagation_to_output"):
        values = cfg.get(key)
        if values is not None and (len(values) != 1 or values[-1]):
            out.append(f", {key}={{" + ",".join("true" if v else "false" for v in values) + "}")
    if module.replica_count != 1:
        out.append(f", replica_count={module.replica_count}")
    if module.num_partitions != 1:
        out.append(f", num_partitions={module.num_partitions}")
    if cfg.get("frontend_attributes"):
        out.append(", frontend_attributes=" + frontend_attributes_to_text(cfg["frontend_attributes"]))
    raw_header = module.extras.get("raw_header", {})
    # Kept as text; XLA prints the recovery table's closing brace on its own line
    # followed by a newline, and debug_attributes on a line of their own.
    if "origin_recovery_table" in raw_header:
        out.append(f", origin_recovery_table={raw_header['origin_recovery_table']}\n")
    if "debug_attributes" in raw_header:
        out.append(f",\ndebug_attributes={raw_header['debug_attributes']}")
    frames = module.extras.get("stack_frames")
    if frames is not None and not frames.is_empty() and opts.print_metadata:
        out.append(frames.to_text())
    out.append("\n\n")
    scheduled = bool(cfg.get("is_scheduled"))
    # Computations some async op calls, found once (asking per computation is quadratic).
    async_called = {id(i.attrs.get("calls")) for c in module.computations
                    for i in c.instructions if i.opcode in ASYNC_OPCODES}
    for comp in module.post_order_computations():
        # With the sugar on, an async computation of one instruction is printed inside
        # its async-start (HloModule::PrintComputations).
        if opts.syntax_sugar_async_ops and id(comp) in async_called and \
                can_expand_into_single_instruction(comp):
            continue
        out.append(computation_to_string(comp, opts, entry=comp is module.entry,
                                         in_schedule_order=scheduled))
        out.append("\n\n")
    return "".join(out)


def is_sugared_async_computation(comp: Computation) -> bool:
    """An async computation that its async-start prints as ``op-start(...)`` sugar."""
    return is_async_computation(comp) and can_expand_into_single_instruction(comp)


def computation_to_string(comp: Computation, options: HloPrintOptions | None = None, *,
                          entry: bool = False, in_schedule_order: bool = False,
                          **overrides) -> str:
    opts = _options(options, overrides)
    out = []
    if entry:
        out.append("ENTRY ")
    if opts.print_percent:
        out.append("%")
    out.append(comp.name + " ")
    if opts.print_program_shape:
        out.append(str(comp.program_shape()) + " ")
    out.append("{\n")
    order = comp.instructions if in_schedule_order else comp.post_order()
    for instr in order:
        if opts.compact_gte and instr.opcode == "get-tuple-element" and instr is not comp.root:
            continue
        out.append("  ")
        if instr is comp.root:
            out.append("ROOT ")
        out.append(instruction_to_string(instr, opts))
        out.append("\n")
    out.append("}")
    if comp.execution_thread and comp.execution_thread != "main":
        out.append(f', execution_thread="{comp.execution_thread}"')
    return "".join(out)


def _name(name: str, opts: HloPrintOptions) -> str:
    return ("%" if opts.print_percent else "") + name


def instruction_to_string(instr: Instruction, options: HloPrintOptions | None = None,
                          **overrides) -> str:
    """One instruction line (without indentation and ``ROOT``)."""
    opts = _options(options, overrides)
    token = PRINT_PERCENT.set(opts.print_percent)
    try:
        return _instruction_text(instr, opts)
    finally:
        PRINT_PERCENT.reset(token)


def _instruction_text(instr: Instruction, opts: HloPrintOptions) -> str:
    head = _name(instr.name, opts) + " = "
    if opts.print_result_shape:
        head += instr.shape.to_string(opts.include_layout_in_shapes) + " "
    opcode = async_sugar_opcode(instr) if opts.syntax_sugar_async_ops else None
    opcode = opcode or instr.opcode
    in_parens = [s for s in instr.attr_specs if s.in_parens]
    if in_parens:
        inside = ", ".join(_in_parens_text(instr, s, opts) for s in in_parens)
    else:
        inside = _operands_text(instr, opts)
    parts = [head + opcode + "(" + inside + ")"]
    parts.extend(attribute_texts(instr, opts))
    if opts.print_metadata and instr.metadata is not None and not instr.metadata.is_empty():
        parts.append("metadata={" + instr.metadata.to_text(opts.print_metadata_only_op_name) + "}")
    if opts.print_backend_config and instr.backend_config:
        config = instr.backend_config
        if lexes_as_json_dict(config):
            parts.append("backend_config=" + config)
        else:
            parts.append('backend_config="' + c_escape(config) + '"')
    return ", ".join(parts)


def _in_parens_text(instr, spec, opts) -> str:
    value = instr.attrs[spec.name]
    if spec.name == "literal":  # constant: elided as {...} when large, unless asked
        return value.to_hlo_text(print_large_constants=opts.print_large_constants)
    return spec.kind.to_text(value)


def _operands_text(instr: Instruction, opts: HloPrintOptions) -> str:
    pieces = []
    for i, op in enumerate(instr.operands):
        text = ""
        if opts.print_operand_shape:
            text = op.shape.to_string(opts.include_layout_in_shapes)
        if opts.print_operand_names:
            text = (text + " " if text else "") + _operand_name(op, opts)
        pieces.append(text)
    if not pieces:
        return ""
    out = pieces[0]
    interval = opts.print_operand_index_annotation_interval
    for i, piece in enumerate(pieces[1:], 1):
        if interval and i % interval == 0:
            out += f", /*index={i}*/" + piece
        else:
            out += ", " + piece
    return out


def _operand_name(op: Instruction, opts: HloPrintOptions) -> str:
    if not opts.compact_gte or op.opcode != "get-tuple-element":
        return _name(op.name, opts)
    index = []
    while op.opcode == "get-tuple-element":  # XLA's LatestNonGteAncestorAndIndex
        index.append(op.attrs["index"])
        op = op.operands[0]
    return _name(op.name, opts) + "".join(f"#{i}" for i in reversed(index))


def attribute_texts(instr: Instruction, opts: HloPrintOptions) -> list[str]:
    """``key=value`` texts after the operands, in XLA's order: the opcode's attributes
    (defaults omitted), sharding, frontend attributes, control predecessors, statistics,
    result accuracy, origin."""
    out = _extra_attribute_texts(instr, opts)
    if "origin" in instr.extras:
        out.append(f"origin={instr.extras['origin']}")
    return out


def _extra_attribute_texts(instr: Instruction, opts: HloPrintOptions) -> list[str]:
    """XLA's HloInstruction::PrintExtraAttributes: everything but origin, metadata and
    backend_config."""
    out = _schema_texts(instr, opts) if opts.print_extra_attributes else []
    extras = instr.extras
    if instr.sharding is not None:
        out.append(f"sharding={instr.sharding}")
    if opts.print_frontend_attributes and instr.frontend_attributes:
        out.append("frontend_attributes=" + frontend_attributes_to_text(instr.frontend_attributes))
    if opts.print_control_dependencies and instr.control_predecessors:
        names = ", ".join(_name(p.name, opts) for p in instr.control_predecessors)
        out.append("control-predecessors={" + names + "}")
    for key in ("statistics", "result_accuracy"):
        if key in extras:
            out.append(f"{key}={extras[key]}")
    return out


def _schema_texts(instr: Instruction, opts: HloPrintOptions) -> list[str]:
    skip: set[str] = set()
    wrapped_texts: list[str] = []
    if instr.opcode in ("async-update", "async-done"):
        # The thread and computation are the chain's, printed on its async-start only.
        skip = {"calls", "async_execution_thread"}
    elif (instr.opcode == "async-start" and opts.syntax_sugar_async_ops
          and async_sugar_opcode(instr)):
        # Sugar: the wrapped op's attributes stand in for calls= (after the thread).
        skip = {"calls"}
        nested = replace(opts, print_frontend_attributes=not instr.frontend_attributes)
        wrapped_texts = _extra_attribute_texts(instr.attrs["calls"].root, nested)
    out = []
    for spec in instr.attr_specs:
        if spec.in_parens or spec.name in skip:
            continue
        if spec.name == "output_to_operand_aliasing":
            out.extend(wrapped_texts)
            wrapped_texts = []
        value = instr.attrs.get(spec.name)
        # Kinds with ``always_printed`` (replica_groups=, has_dynamic_root=) appear
        # even at their default value, as XLA prints them.
        if value is None or (not spec.required and _equal(value, spec.default)
                             and not getattr(spec.kind, "always_printed", False)):
            continue
        if spec.omit is not None and spec.omit(value, instr):
            continue
        for key, text in spec.kind.items(spec.name, value):
            out.append(f"{key}={text}")
    return out + wrapped_texts


def _equal(a, b) -> bool:
    try:
        return bool(a == b)
    except (ValueError, TypeError):  # array-valued attributes: never equal to a scalar default
        return False


def async_sugar_opcode(instr: Instruction) -> str | None:
    """``custom-call-start``-style spelling of an async-start/update/done whose wrapped
    computation is a single instruction (HloPrintOptions::syntax_sugar_async_ops), or None."""
    if instr.opcode not in ("async-start", "async-update", "async-done"):
        return None
    comp = async_wrapped_computation(instr)
    if comp is None or comp.root is None or not can_expand_into_single_instruction(comp):
        return None
    return sugared_opcode(instr.opcode, comp.root.opcode)
