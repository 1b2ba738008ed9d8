"""A whole module to and from HloModuleProto (and HloModuleProtoWithConfig).

Owns: ``module_from_proto(mp, config=None)`` and ``module_to_proto(module, with_config)``,
as XLA's HloModule::CreateFromProto / ToProto: computations callees first with their ids,
instructions in post order (read back in id order, XLA's in-memory order, which decides the
order XLA prints computations in; a scheduled module also carries its HloScheduleProto, and
reading one puts each computation's instructions in schedule order, as XLA prints them),
the entry computation by id, the host program shape (``entry_computation_layout``; its
parameters named ``p0, p1, ...`` as XLA's ComputationLayout names them), input/output
aliases, buffer donors, module frontend attributes and the stack-frame index. Instruction
and computation ids are XLA's ``(computation id << 32) | local id``.

The HloModuleConfig fields XLA prints in the ``HloModule`` header (replica_count,
num_partitions, alias_passthrough_params, allow_spmd_sharding_propagation_to_*) are not
in HloModuleProto: they travel in HloModuleProtoWithConfig's config, read when present and
written with ``with_config=True``. Metadata payloads are one module-level table the
instructions' metadata index. Not converted: the origin recovery table (dropped when read,
noted in ``module.extras["dropped_from_proto"]``; refused when writing, as is the header's
``debug_attributes``, which has no field in jaxlib 0.10.2's XLA).
"""

from __future__ import annotations

from xlapy.hlo.ir import Computation, Instruction, Module
from xlapy.hlo.module_data import Alias, BufferDonor, ComputationLayout, StackFrameIndex
from xlapy.proto.instructions import decode_instruction, encode_instruction
from xlapy.proto.schema import message_class
from xlapy.proto.shapes import ProtoError, program_shape_to_proto, shape_from_proto

_ALIAS_KIND = {0: "may-alias", 1: "may-alias", 2: "must-alias"}


# -- proto -> module ----------------------------------------------------------------------------


def module_from_proto(mp, config=None, where: str = "hlo_module") -> Module:
    """The Module of HloModuleProto ``mp`` (``config``: an HloModuleConfigProto, or None)."""
    if not mp.computations:
        raise ProtoError(f"{where}: the module has no computations")
    module = Module(mp.name or "module")
    computations: dict[int, Computation] = {}
    names: set[str] = set()
    instruction_names: set[str] = set()
    fusion_callees: set[int] = set()
    payloads = [p.decode("utf-8", "surrogateescape") for p in mp.metadata_payloads]
    for ci, cp in enumerate(mp.computations):
        cwhere = f"{where}.computations[{ci}] (%{cp.name})"
        if cp.id in computations:
            raise ProtoError(f"{cwhere}: computation id {cp.id} is used twice")
        if cp.name in names:
            raise ProtoError(f"{cwhere}: computation name {cp.name!r} is not unique")
        names.add(cp.name)
        comp = _computation_from_proto(cp, computations, instruction_names, cwhere, payloads)
        computations[cp.id] = comp
        for instr in comp.instructions:
            if instr.opcode == "fusion":
                fusion_callees.update(id(c) for c in instr.called_computations())
    entry = _entry(mp, computations, where)
    order = _xla_post_order(list(computations.values()))  # from the id-ordered instructions
    if mp.HasField("schedule"):
        scheduled = _apply_schedule(mp.schedule, mp, computations, where)
        module.config["is_scheduled"] = True
        # A scheduled module prints each computation in its stored order: the unscheduled
        # ones (fusions) in the post order XLA prints them in.
        for comp in computations.values():
            if id(comp) not in scheduled:
                comp.instructions = comp.post_order()
    for comp in computations.values():
        comp.__dict__.pop("_proto_ids", None)
    for comp in order:
        module.add_computation(comp, entry=comp is entry, uniquify=False)
        if comp.is_fusion_computation is False and id(comp) in fusion_callees:
            comp.is_fusion_computation = True
    _module_config_from_proto(module, mp, config, where)
    return module


def _xla_post_order(computations: list[Computation]) -> list[Computation]:
    """XLA's HloModule::MakeComputationPostOrder, the order it prints a module in: each
    computation no instruction calls (in module order), after the computations it embeds
    (found through its instructions in their order)."""
    called = {id(c) for comp in computations for i in comp.instructions
              for c in i.called_computations()}
    added: set[int] = set()
    order: list[Computation] = []
    for comp in computations:
        if id(comp) in called:
            continue
        for e in comp.embedded_computations() + [comp]:
            if id(e) not in added:
                added.add(id(e))
                order.append(e)
    order += [c for c in computations if id(c) not in added]  # only on a call cycle
    return order


def _entry(mp, computations: dict, where: str) -> Computation:
    if mp.entry_computation_name:
        for comp in computations.values():
            if comp.name == mp.entry_computation_name:
                return comp
        raise ProtoError(f"{where}: entry computation {mp.entry_computation_name!r} is not "
                         f"among the computations")
    if mp.entry_computation_id in computations:
        return computations[mp.entry_computation_id]
    return list(computations.values())[-1]


def _computation_from_proto(cp, computations: dict, instruction_names: set,
                            where: str, payloads: list[str]) -> Computation:
    comp = Computation(cp.name)
    comp.is_fusion_computation = bool(cp.is_fusion_computation)
    comp.execution_thread = cp.execution_thread or None
    if not cp.instructions:
        raise ProtoError(f"{where}: the computation has no instructions")
    by_id: dict[int, Instruction] = {}
    parameters: set[int] = set()
    for ii, ip in enumerate(cp.instructions):
        iwhere = f"{where}.instructions[{ii}] (%{ip.name})"
        if ip.id in by_id:
            raise ProtoError(f"{iwhere}: instruction id {ip.id} is used twice")
        if ip.name in instruction_names:
            raise ProtoError(f"{iwhere}: instruction name {ip.name!r} is not unique")
        instruction_names.add(ip.name)
        operands = []
        for oid in ip.operand_ids:
            if oid not in by_id:
                raise ProtoError(f"{iwhere}: operand id {oid} is not an earlier instruction "
                                 f"of this computation")
            operands.append(by_id[oid])
        instr = decode_instruction(ip, operands, computations, iwhere, payloads)
        if instr.opcode == "parameter":
            number = instr.parameter_number
            if number in parameters:
                raise ProtoError(f"{iwhere}: parameter number {number} is used twice")
            parameters.add(number)
        comp.add_instruction(instr, uniquify=False)
        by_id[ip.id] = instr
    if sorted(parameters) != list(range(len(parameters))):
        raise ProtoError(f"{where}: parameter numbers {sorted(parameters)} are not 0..n-1")
    for ii, ip in enumerate(cp.instructions):
        for pid in ip.control_predecessor_ids:
            if pid not in by_id:
                raise ProtoError(f"{where}.instructions[{ii}] (%{ip.name}): control "
                                 f"predecessor id {pid} is not an instruction of this "
                                 f"computation")
            by_id[pid].add_control_dependency_to(by_id[ip.id])
    if cp.root_id not in by_id:
        raise ProtoError(f"{where}: root_id {cp.root_id} is not an instruction of the "
                         f"computation")
    comp.root = by_id[cp.root_id]
    # XLA's CreateFromProto keeps the instructions in id order (their creation order), the
    # order its printer walks to find the computations each one embeds.
    comp.instructions = [by_id[i] for i in sorted(by_id)]
    comp._proto_ids = {iid: instr for iid, instr in by_id.items()}  # for the schedule
    return comp


def _apply_schedule(sp, mp, computations: dict, where: str) -> set[int]:
    """Each scheduled computation's instructions in its sequence's order; returns the ids
    (``id(computation)``) of the computations the schedule orders."""
    done: set[int] = set()
    for cid, sequence in sp.sequences.items():
        comp = computations.get(cid)
        if comp is None:
            raise ProtoError(f"{where}.schedule: sequence for computation id {cid}, which the "
                             f"module does not have")
        ids = comp._proto_ids
        order = []
        for iid in sequence.instruction_ids:
            if iid not in ids:
                raise ProtoError(f"{where}.schedule: instruction id {iid} is not in "
                                 f"computation %{comp.name}")
            order.append(ids[iid])
        if len(order) == len(comp.instructions) and len(set(map(id, order))) == len(order):
            comp.instructions = order
            done.add(id(comp))
    return done


def _module_config_from_proto(module: Module, mp, config, where: str) -> None:
    cfg = module.config
    layout_proto = None
    if config is not None and config.HasField("entry_computation_layout"):
        layout_proto = config.entry_computation_layout
    elif mp.HasField("host_program_shape"):
        layout_proto = mp.host_program_shape
    if layout_proto is not None and layout_proto.HasField("result"):
        cfg["entry_computation_layout"] = ComputationLayout(
            tuple(shape_from_proto(p, f"{where}.host_program_shape.parameters[{i}]")
                  for i, p in enumerate(layout_proto.parameters)),
            shape_from_proto(layout_proto.result, f"{where}.host_program_shape.result"))
    if mp.input_output_alias.entries:
        cfg["input_output_alias"] = tuple(
            Alias(tuple(e.output_shape_index), e.parameter_number,
                  tuple(e.parameter_shape_index), _ALIAS_KIND.get(e.kind, "may-alias"))
            for e in mp.input_output_alias.entries)
    if mp.buffer_donor.entries:
        cfg["buffer_donor"] = tuple(BufferDonor(e.parameter_number,
                                                tuple(e.parameter_shape_index))
                                    for e in mp.buffer_donor.entries)
    if mp.frontend_attributes.map:
        cfg["frontend_attributes"] = dict(mp.frontend_attributes.map)
    if mp.origin_recovery_table:
        # A debugging table of modules (xlapy keeps it as text when parsing HLO text); not
        # converted from its proto form: dropped, and said so.
        module.extras["dropped_from_proto"] = ("origin_recovery_table",)
    if mp.HasField("stack_frame_index"):
        sf = mp.stack_frame_index
        frames = StackFrameIndex(
            list(sf.file_names), list(sf.function_names),
            [(f.file_name_id, f.function_name_id, f.line, f.end_line, f.column, f.end_column)
             for f in sf.file_locations],
            # XLA prints a frame's parent_frame_id one above the proto's (0: no parent).
            [(f.file_location_id, f.parent_frame_id + 1) for f in sf.stack_frames])
        if not frames.is_empty():
            module.extras["stack_frames"] = frames
    if config is not None:
        if config.replica_count > 1:
            cfg["replica_count"] = config.replica_count
        if config.num_partitions > 1:
            cfg["num_partitions"] = config.num_partitions
        if config.alias_passthrough_params:
            cfg["alias_passthrough_params"] = True
        for key in ("allow_spmd_sharding_propagation_to_parameters",
                    "allow_spmd_sharding_propagation_to_output"):
            values = tuple(getattr(config, key))
            if values:
                cfg[key] = values


# -- module -> proto ----------------------------------------------------------------------------


def module_to_proto(module: Module, *, with_config: bool = False):
    """HloModuleProto of ``module`` (HloModuleProtoWithConfig with ``with_config``)."""
    if module.entry is None:
        raise ProtoError(f"module_to_proto: module {module.name} has no entry computation")
    for key in module.extras.get("raw_header", {}):
        raise ProtoError(f"module_to_proto: the module header's {key}=... (kept as text by "
                         f"xlapy) has no proto form xlapy can write")
    mp = message_class("HloModuleProto")()
    mp.name = module.name
    # XLA writes its computations in module order (callees first), not in print order.
    order = module.post_order_computations()
    fusion_callees = {id(c) for comp in order for i in comp.instructions
                      if i.opcode == "fusion" for c in i.called_computations()}
    comp_ids = {id(c): cid for cid, c in enumerate(order)}
    instr_ids: dict[int, int] = {}
    for comp in order:
        for local, instr in enumerate(_id_order(comp, comp_ids)):
            instr_ids[id(instr)] = (comp_ids[id(comp)] << 32) | local
    scheduled = bool(module.config.get("is_scheduled"))
    payloads: dict[str, int] = {}
    for comp in order:
        cp = mp.computations.add(name=comp.name, id=comp_ids[id(comp)])
        for instr in comp.post_order():
            encode_instruction(instr, cp.instructions.add(), instr_ids, comp_ids, payloads)
        cp.root_id = instr_ids[id(comp.root)]
        ps = comp.program_shape()
        program_shape_to_proto(ps.parameters, ps.result, ps.parameter_names, cp.program_shape)
        fusion = comp.is_fusion_computation or id(comp) in fusion_callees
        cp.is_fusion_computation = fusion
        cp.execution_thread = comp.execution_thread or "main"
        if scheduled and not fusion:
            seq = mp.schedule.sequences[comp_ids[id(comp)]]
            seq.instruction_ids.extend(instr_ids[id(i)] for i in comp.instructions)
    mp.metadata_payloads.extend(p.encode("utf-8", "surrogateescape") for p in payloads)
    mp.entry_computation_name = module.entry.name
    mp.entry_computation_id = comp_ids[id(module.entry)]
    layout = module.config.get("entry_computation_layout")
    params = layout.parameters if layout is not None else \
        tuple(p.shape for p in module.entry.parameters)
    result = layout.result if layout is not None else module.entry.root.shape
    program_shape_to_proto(params, result, [f"p{i}" for i in range(len(params))],
                           mp.host_program_shape)
    for alias in module.config.get("input_output_alias") or ():
        entry = mp.input_output_alias.entries.add(
            parameter_number=alias.parameter_number,
            kind=2 if alias.kind == "must-alias" else 1)
        entry.output_shape_index.extend(alias.output_index)
        entry.parameter_shape_index.extend(alias.parameter_index)
    for donor in module.config.get("buffer_donor") or ():
        entry = mp.buffer_donor.entries.add(parameter_number=donor.parameter_number)
        entry.parameter_shape_index.extend(donor.parameter_index)
    for key, value in (module.config.get("frontend_attributes") or {}).items():
        mp.frontend_attributes.map[key] = value
    frames = module.extras.get("stack_frames")
    if frames is not None and not frames.is_empty():
        sf = mp.stack_frame_index
        sf.file_names.extend(frames.file_names)
        sf.function_names.extend(frames.function_names)
        for a, b, line, end_line, column, end_column in frames.file_locations:
            sf.file_locations.add(file_name_id=a, function_name_id=b, line=line,
                                  end_line=end_line, column=column, end_column=end_column)
        for a, b in frames.stack_frames:
            sf.stack_frames.add(file_location_id=a, parent_frame_id=b - 1)
    if not with_config:
        return mp
    wrapped = message_class("HloModuleProtoWithConfig")()
    wrapped.hlo_module.CopyFrom(mp)
    config = wrapped.config
    config.entry_computation_layout.CopyFrom(mp.host_program_shape)
    config.replica_count = module.replica_count
    config.num_partitions = module.num_partitions
    config.alias_passthrough_params = bool(module.config.get("alias_passthrough_params"))
    for key in ("allow_spmd_sharding_propagation_to_parameters",
                "allow_spmd_sharding_propagation_to_output"):
        getattr(config, key).extend(module.config.get(key) or ())
    return wrapped


def _id_order(comp: Computation, positions: dict[int, int]) -> list[Instruction]:
    """The order of ``comp``'s instruction ids: its stored order, except that the
    instructions calling computations come in the order of what they reach first in the
    module's computation order. XLA reads instructions back in id order and prints a
    module's computations in the order it meets them walking instructions in that order
    (_xla_post_order): so the module read back prints its computations as this one does."""
    calling = [i for i in comp.instructions if i.called_computations()]
    if len(calling) < 2:
        return list(comp.instructions)

    def first(instr: Instruction) -> int:
        reached = [c for callee in instr.called_computations()
                   for c in callee.embedded_computations() + [callee]]
        return min(positions.get(id(c), len(positions)) for c in reached)

    ordered = iter(sorted(calling, key=first))
    return [next(ordered) if i.called_computations() else i for i in comp.instructions]


__all__ = ["module_from_proto", "module_to_proto"]
