"""Shardy's round trip through HLO text, read back as GSPMD (XLA's sdy round-trip import,
xla/service/spmd/shardy/sdy_round_trip/, followed by its export to HLO shardings).

jax (Shardy, the default partitioner) dumps a sharded program as HLO whose shardings are
Shardy attributes carried as text: the module's ``xla.sdy.meshes`` frontend attribute
(``{mesh = #sdy.mesh<["x"=2, "y"=2]>}``), ``xla.sdy.sharding`` on parameters
(``#sdy.sharding<@mesh, [{"x"}, {}]>``), and custom calls standing for Shardy ops:

- ``xla.sdy.FuncResultSharding``: the sharding of a function result; becomes the root's
  sharding (a ``Sharding`` custom call where the value has other uses);
- ``Sharding`` with ``xla.sdy.sharding``: a sharding constraint;
- ``xla.sdy.GlobalToLocalShape`` / ``call`` of ``xla.sdy.manual_computation_body`` /
  ``xla.sdy.LocalToGlobalShape``: a shard_map (``sdy.manual_computation``), with
  ``xla.sdy.in_shardings``, ``xla.sdy.out_shardings`` and ``xla.sdy.manual_axes``; becomes
  what XLA exports for it: ``Sharding`` + ``SPMDFullToShardShape`` before the body (inlined),
  ``Sharding`` + ``SPMDShardToFullShape`` after it, the body's values manual (a shard_map
  nested in another's body is manual over both's axes);
- ``xla.sdy.ShardingGroup``: dropped (shard_as/shard_like groups do not change results);
- ``xla.sdy.PropagationBarrier``: its operand (a barrier to propagation only);
- ``xla.sdy.sharding`` on any other instruction: its result shardings.

GSPMD ``sharding=`` attributes elsewhere are dropped, as XLA's import drops them (the
Shardy attributes are the truth). Shardy shardings become HLO shardings through the named
(V3) form: ``xlapy.hlo.attrs.mesh.NamedSharding`` and HloSharding.v2(), XLA's
V3ToV2Sharding. Open dimensions (``?``) and priorities are read and ignored: GSPMD
propagation (xlapy.passes.spmd.propagation) fills unsharded values.

Owns ``import_shardy(module) -> bool`` and the reader of the ``#sdy`` attribute texts.
"""

from __future__ import annotations

import re

from xlapy.errors import InvalidArgumentError
from xlapy.hlo.attrs.mesh import AxisRef, DimSharding, Mesh, NamedSharding
from xlapy.hlo.attrs.sharding import HloSharding
from xlapy.hlo.ir import Instruction, Module
from xlapy.shape.text import Scanner

MESHES_KEY = "xla.sdy.meshes"
SHARDING_KEY = "xla.sdy.sharding"
_NAME = re.compile(r"[A-Za-z_$.][A-Za-z0-9_$.\-]*")
_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"')


class SdyError(InvalidArgumentError):
    """A Shardy attribute that cannot be read."""


# -- the #sdy attribute texts -----------------------------------------------------------------


def _string(sc: Scanner) -> str:
    sc.skip()
    m = _STRING.match(sc.text, sc.pos)
    if not m:
        sc.error(f"expected a quoted axis name, found {sc.describe_next()}")
    sc.pos = m.end()
    return m.group(1)


def read_mesh_attr(sc: Scanner) -> Mesh:
    """``#sdy.mesh<["x"=2, "y"=4], device_ids=[...]>`` or (inline) ``mesh<[...]>``."""
    if not (sc.eat("#sdy.mesh") or sc.eat("mesh")):
        sc.error(f"expected '#sdy.mesh<', found {sc.describe_next()}")
    sc.expect("<", "to start a mesh")
    sc.expect("[", "to start the mesh axes")
    names: list[str] = []
    sizes: list[int] = []
    if not sc.eat("]"):
        while True:
            names.append(_string(sc))
            sc.expect("=", "after a mesh axis name")
            sizes.append(sc.read_int("a mesh axis size"))
            if sc.eat("]"):
                break
            sc.expect(",", "or ']' in the mesh axes")
    ids = None
    if sc.eat(","):
        if sc.read_ident() != "device_ids":
            sc.error("expected device_ids= in a mesh")
        sc.expect("=")
        sc.expect("[", "to start device_ids")
        ids = [sc.read_int("a device id")]
        while sc.eat(","):
            ids.append(sc.read_int("a device id"))
        sc.expect("]", "to end device_ids")
    sc.expect(">", "to end a mesh")
    if not names:
        return Mesh(maximal_device=ids[0]) if ids else Mesh()
    if ids is not None and ids == list(range(len(ids))):
        ids = None
    return Mesh(tuple(names), tuple(sizes), device_ids=None if ids is None else tuple(ids))


def read_meshes(text: str) -> dict[str, Mesh]:
    """The ``xla.sdy.meshes`` module attribute: ``{name = #sdy.mesh<...>, ...}``."""
    sc = Scanner(text, MESHES_KEY)
    sc.expect("{", "to start the meshes")
    meshes: dict[str, Mesh] = {}
    if sc.eat("}"):
        return meshes
    while True:
        m = sc.peek_re(_NAME)
        if not m:
            sc.error(f"expected a mesh name, found {sc.describe_next()}")
        sc.pos = m.end()
        sc.expect("=", "after a mesh name")
        meshes[m.group(0)] = read_mesh_attr(sc)
        if sc.eat("}"):
            return meshes
        sc.expect(",", "or '}' in the meshes")


def _axis(sc: Scanner, mesh: Mesh) -> AxisRef:
    pos = sc.pos
    name = _string(sc)
    if name not in mesh.axis_names:
        sc.error(f"axis \"{name}\" is not an axis of the mesh {mesh.to_text()}", pos)
    index = mesh.axis_index(name)
    if sc.eat(":"):
        sc.expect("(", "to start a sub-axis pre-size")
        pre = sc.read_int("a sub-axis pre-size")
        sc.expect(")", "to end a sub-axis pre-size")
        return AxisRef(index, pre, sc.read_int("a sub-axis size"))
    return AxisRef(index)


def _axes(sc: Scanner, mesh: Mesh) -> tuple[tuple[AxisRef, ...], bool]:
    sc.expect("{", "to start a dimension sharding")
    axes: list[AxisRef] = []
    closed = True
    if not sc.eat("}"):
        while True:
            if sc.eat("?"):
                closed = False
            else:
                axes.append(_axis(sc, mesh))
            if sc.eat("}"):
                break
            sc.expect(",", "or '}' in a dimension sharding")
    if sc.peek() == "p" and re.match(r"p\d", sc.text[sc.pos:]):  # a priority: read, ignored
        sc.read_ident()
    return tuple(axes), closed


def _tensor_sharding(sc: Scanner, meshes: dict[str, Mesh]) -> NamedSharding:
    """The body of a TensorShardingAttr: ``@mesh, [{"x"}, {}], replicated={"y"}``."""
    sc.skip()
    if sc.eat("@"):
        m = sc.peek_re(_NAME)
        if not m or m.group(0) not in meshes:
            sc.error(f"unknown mesh {sc.describe_next()} (meshes: {', '.join(meshes)})")
        sc.pos = m.end()
        mesh = meshes[m.group(0)]
    else:
        mesh = read_mesh_attr(sc)
    sc.expect(",", "after the mesh of a sharding")
    sc.expect("[", "to start the dimension shardings")
    dims: list[DimSharding] = []
    if not sc.eat("]"):
        while True:
            axes, closed = _axes(sc, mesh)
            dims.append(DimSharding(axes, closed))
            if sc.eat("]"):
                break
            sc.expect(",", "or ']' in the dimension shardings")
    extra: dict = {}
    while sc.eat(","):
        key = sc.read_ident()
        if key not in ("replicated", "unreduced"):
            sc.error(f"expected replicated= or unreduced= in a sharding, found {key!r}")
        sc.expect("=")
        extra[key] = _axes(sc, mesh)[0]
    if mesh.maximal_device is not None:
        return NamedSharding(mesh, "maximal")
    return NamedSharding(mesh, "dims", tuple(dims), **extra)


def read_sharding_attr(text: str, meshes: dict[str, Mesh]) -> NamedSharding:
    """``#sdy.sharding<@mesh, [...]>``."""
    sc = Scanner(text, SHARDING_KEY)
    sc.expect("#sdy.sharding", "to start a Shardy sharding")
    sc.expect("<")
    out = _tensor_sharding(sc, meshes)
    sc.expect(">", "to end a Shardy sharding")
    return out


def read_sharding_per_value(text: str, meshes: dict[str, Mesh]) -> list[NamedSharding]:
    """``#sdy.sharding_per_value<[<@mesh, [...]>, ...]>``."""
    sc = Scanner(text, "xla.sdy.sharding_per_value")
    sc.expect("#sdy.sharding_per_value", "to start a Shardy sharding per value")
    sc.expect("<")
    sc.expect("[")
    out: list[NamedSharding] = []
    if not sc.eat("]"):
        while True:
            sc.expect("<", "to start a sharding")
            out.append(_tensor_sharding(sc, meshes))
            sc.expect(">", "to end a sharding")
            if sc.eat("]"):
                break
            sc.expect(",", "or ']' in shardings per value")
    sc.expect(">")
    return out


def read_manual_axes(text: str) -> list[str]:
    """``#sdy<manual_axes{"x", "y"}>``."""
    sc = Scanner(text, "xla.sdy.manual_axes")
    sc.expect("#sdy<manual_axes", "to start manual axes")
    sc.expect("{")
    names: list[str] = []
    if not sc.eat("}"):
        while True:
            names.append(_string(sc))
            if sc.eat("}"):
                break
            sc.expect(",", "or '}' in manual axes")
    sc.expect(">")
    return names


def to_hlo(named: NamedSharding) -> HloSharding:
    """The GSPMD sharding XLA's export gives a Shardy sharding."""
    if named.kind == "dims" and not any(d.axes for d in named.dims) and not named.manual \
            and not named.unreduced:
        return HloSharding.replicate()
    return HloSharding("named", named=named).v2()


def manual_sharding(named: NamedSharding, manual: list[str], local: bool) -> HloSharding:
    """The sharding of a shard_map boundary value: ``named`` as a global value (``local``
    False), or the local value inside the body (True): the manual axes leave the dimensions
    and become a manual subgroup; every axis manual gives ``{manual}``."""
    mesh = named.mesh
    if mesh.maximal_device is not None:
        return HloSharding.manual() if local else to_hlo(named)
    indices = {mesh.axis_index(n) for n in manual}
    if not local:
        return to_hlo(named)
    if all(i in indices or s == 1 for i, s in enumerate(mesh.axis_sizes)):
        return HloSharding.manual()
    dims = tuple(DimSharding(tuple(a for a in d.axes if a.index not in indices), d.closed)
                 for d in named.dims)
    manual_refs = tuple(AxisRef(i) for i in sorted(indices))
    return HloSharding("named", named=NamedSharding(mesh, "dims", dims, named.replicated,
                                                    manual=manual_refs)).v2()


# -- the module --------------------------------------------------------------------------------


def has_shardy_attributes(module: Module) -> bool:
    fe = module.config.get("frontend_attributes") or {}
    return MESHES_KEY in fe


def _new(comp, opcode, operands, attrs, shape, name, sharding=None, like=None) -> Instruction:
    from xlapy.opdefs import make_instruction

    instr = make_instruction(opcode, operands, attrs, shape=shape, name=name,
                             metadata=like.metadata if like is not None else None)
    instr.sharding = sharding.to_text() if isinstance(sharding, HloSharding) else sharding
    return comp.add_instruction(instr)


def _custom_call(comp, target: str, operand: Instruction, shape, sharding, like) -> Instruction:
    return _new(comp, "custom-call", [operand], {"custom_call_target": target}, shape,
                like.name, sharding, like)


def _values(instr: Instruction, count: int) -> list[Instruction | None]:
    """The values of a multi-result custom call: its get-tuple-element users by index (one
    result: the instruction itself)."""
    if not instr.shape.is_tuple():
        return [instr]
    out: list[Instruction | None] = [None] * count
    for user in instr.users:
        if user.opcode == "get-tuple-element":
            out[user.attrs["index"]] = user
    return out


def import_shardy(module: Module) -> bool:
    """Rewrite a module holding Shardy attributes into GSPMD form (in place). Returns
    whether the module had any."""
    fe = module.config.get("frontend_attributes") or {}
    if MESHES_KEY not in fe:
        return False
    meshes = read_meshes(fe[MESHES_KEY])
    entry = module.entry
    for p in entry.parameters:
        text = p.frontend_attributes.get(SHARDING_KEY)
        p.sharding = to_hlo(read_sharding_attr(text, meshes)).to_text() if text else None
    bodies = set()
    manual_axes = _manual_bodies(module)
    for comp in module.computations:
        results: dict = {}
        for instr in list(comp.instructions):
            if instr.parent is not comp:
                continue
            _import_instruction(comp, instr, meshes, bodies, entry, results,
                                manual_axes.get(id(comp)))
        if comp is entry:
            _set_root_sharding(comp, results)
    _inline_bodies(module, bodies)
    for comp in module.computations:
        for instr in comp.instructions:
            for key in [k for k in instr.frontend_attributes if k.startswith("xla.sdy.")]:
                del instr.frontend_attributes[key]
            if instr.opcode == "call" and instr.frontend_attributes.get("inlineable") == "false":
                del instr.frontend_attributes["inlineable"]
    fe = {k: v for k, v in fe.items() if not k.startswith("xla.sdy.")}
    if fe:
        module.config["frontend_attributes"] = fe
    else:
        module.config.pop("frontend_attributes", None)
    return True


def _is_body_call(instr: Instruction) -> bool:
    return instr.opcode == "call" and instr.attrs["to_apply"].name.startswith(
        "xla.sdy.manual_computation_body")


def _call_axes(call: Instruction) -> list[str] | None:
    """The manual axes of a manual computation body's call: from the GlobalToLocalShape that
    feeds it, else (no operands) from the LocalToGlobalShape that reads it."""
    ends = []
    for operand in call.operands:
        ends.append(operand.operands[0] if operand.opcode == "get-tuple-element" else operand)
    for user in call.users:
        ends += user.users if user.opcode == "get-tuple-element" else [user]
    for end in ends:
        if end.opcode == "custom-call" and end.attrs.get("custom_call_target") in (
                "xla.sdy.GlobalToLocalShape", "xla.sdy.LocalToGlobalShape"):
            text = end.frontend_attributes.get("xla.sdy.manual_axes")
            if text:
                return read_manual_axes(text)
    return None


def _manual_bodies(module: Module) -> dict[int, list[str]]:
    """The manual axes in force inside each computation that runs in manual code: a manual
    computation body adds its call's axes to those of the code around the call (a shard_map
    nested in another is manual over both), and computations called from manual code
    (loop bodies, branches, calls) inherit them."""
    out: dict[int, list[str]] = {}
    stack = [(module.entry, [])]
    seen: set[tuple] = set()
    while stack:
        comp, axes = stack.pop()
        key = (id(comp), tuple(axes))
        if key in seen:
            continue
        seen.add(key)
        if axes:
            out[id(comp)] = axes
        for instr in comp.instructions:
            for callee in instr.called_computations():
                inner = axes
                if _is_body_call(instr):
                    extra = _call_axes(instr) or []
                    inner = axes + [a for a in extra if a not in axes]
                stack.append((callee, inner))
    return out


def _import_instruction(comp, instr, meshes, bodies, entry, results, manual=None) -> None:
    target = instr.attrs.get("custom_call_target") if instr.opcode == "custom-call" else None
    fe = instr.frontend_attributes
    if instr.opcode == "parameter" and comp is entry:
        return
    if target == "Sharding":
        text = fe.get(SHARDING_KEY)
        if text:
            named = read_sharding_per_value(text, meshes)[0]
            sharding = manual_sharding(named, manual, local=True) if manual else to_hlo(named)
            instr.sharding = sharding.to_text()
        return
    instr.sharding = None
    if target == "xla.sdy.FuncResultSharding":
        named = read_sharding_per_value(fe[SHARDING_KEY], meshes)[0]
        _func_result(comp, instr, to_hlo(named), results)
    elif target == "xla.sdy.GlobalToLocalShape":
        shardings = read_sharding_per_value(fe["xla.sdy.in_shardings"], meshes)
        axes = read_manual_axes(fe["xla.sdy.manual_axes"])
        _cross_manual(comp, instr, shardings, manual or [], axes, to_local=True)
    elif target == "xla.sdy.LocalToGlobalShape":
        shardings = read_sharding_per_value(fe["xla.sdy.out_shardings"], meshes)
        axes = read_manual_axes(fe["xla.sdy.manual_axes"])
        _cross_manual(comp, instr, shardings, manual or [], axes, to_local=False)
    elif target == "xla.sdy.ShardingGroup":
        if not instr.users and instr is not comp.root:
            comp.remove_instruction(instr)
    elif target == "xla.sdy.PropagationBarrier":
        instr.replace_all_uses_with(instr.operands[0])
        if instr is not comp.root:
            comp.remove_instruction(instr)
    elif instr.opcode == "call":
        callee = instr.attrs["to_apply"]
        if callee.name.startswith("xla.sdy.manual_computation_body"):
            bodies.add(id(instr))
    elif target is not None and target.startswith("xla.sdy."):
        raise SdyError(f"custom-call %{instr.name}: the Shardy custom call {target!r} is not "
                       f"supported by xlapy's Shardy import")
    elif SHARDING_KEY in fe and not instr.shape.is_token():
        # an op's own result shardings (sdy.sharding on the op, #sdy.sharding_per_value)
        values = read_sharding_per_value(fe[SHARDING_KEY], meshes)
        hlo = [_in_context(v, manual or []) for v in values]
        instr.sharding = (hlo[0] if len(hlo) == 1 and not instr.shape.is_tuple()
                          else HloSharding.tuple_(hlo)).to_text()


def _func_result(comp, instr: Instruction, sharding: HloSharding, results: dict) -> None:
    """The value becomes a result with ``sharding`` (recorded in ``results``); uses that do
    not lead to the root see a sharding constraint instead (XLA's handleFuncResultSharding,
    which opens its dimensions)."""
    operand = instr.operands[0]
    other = [u for u in instr.users if not _reaches_root(u, comp)]
    if other:
        constraint = _custom_call(comp, "Sharding", operand, operand.shape, sharding, instr)
        for u in other:
            u.replace_operand_with(instr, constraint)
    instr.replace_all_uses_with(operand)
    results[id(operand)] = sharding
    if instr is not comp.root:
        comp.remove_instruction(instr)


def _reaches_root(user: Instruction, comp) -> bool:
    """The value flows to the computation's result through tuples/get-tuple-elements."""
    while True:
        if user is comp.root:
            return True
        if user.opcode not in ("tuple", "get-tuple-element") or len(user.users) != 1:
            return False
        user = user.users[0]


def _resolve(instr: Instruction) -> Instruction:
    """``instr`` seen through get-tuple-element(tuple(...))."""
    while instr.opcode == "get-tuple-element" and instr.operands[0].opcode == "tuple":
        instr = instr.operands[0].operands[instr.attrs["index"]]
    return instr


def _set_root_sharding(comp, results: dict) -> None:
    """The root's sharding from the recorded result shardings (one per element of a tuple
    root; an element without one is replicated)."""
    if not results:
        return
    root = comp.root
    value = _resolve(root)
    if id(value) in results:
        root.sharding = results[id(value)].to_text()
        return
    if value.opcode != "tuple" or any(o.shape.is_tuple() for o in value.operands):
        return
    found = [results.get(id(_resolve(o))) for o in value.operands]
    if any(f is not None for f in found):
        root.sharding = HloSharding.tuple_([f or HloSharding.replicate() for f in found]
                                           ).to_text()


def _in_context(named: NamedSharding, manual: list[str]) -> HloSharding:
    """``named`` as the sharding of a value in code manual over ``manual`` (none: global)."""
    return manual_sharding(named, manual, local=True) if manual else to_hlo(named)


def _cross_manual(comp, instr, shardings, outer: list[str], axes: list[str],
                  to_local: bool) -> None:
    """xla.sdy.GlobalToLocalShape (``to_local``) or LocalToGlobalShape as XLA exports them: per
    operand a ``Sharding`` custom call on the side it comes from, then
    SPMDFullToShardShape / SPMDShardToFullShape into the other side; the values the call
    produced are replaced by those, and the call removed. ``outer``: the manual axes of the
    code around the shard_map (a nested one), ``axes`` its own: the body is manual over
    both."""
    target = "SPMDFullToShardShape" if to_local else "SPMDShardToFullShape"
    inner = outer + [a for a in axes if a not in outer]
    values = _values(instr, len(instr.operands))
    for i, operand in enumerate(instr.operands):
        old = values[i]
        new_shape = instr.shape.tuple_shapes[i] if instr.shape.is_tuple() else instr.shape
        named = shardings[i]
        before, after = (outer, inner) if to_local else (inner, outer)
        first = _custom_call(comp, "Sharding", operand, operand.shape,
                             _in_context(named, before), instr)
        crossed = _custom_call(comp, target, first, new_shape, _in_context(named, after),
                               instr)
        if old is not None:
            old.replace_all_uses_with(crossed)
            if not old.users and old is not comp.root and old is not instr:
                comp.remove_instruction(old)
        if old is instr:
            instr.replace_all_uses_with(crossed)
    if not instr.users and instr is not comp.root:
        comp.remove_instruction(instr)


def _inline_bodies(module: Module, bodies: set[int]) -> None:
    """Inline the calls of manual computation bodies (XLA's export inlines them)."""
    from xlapy.passes.inline_calls import inline_call

    for comp in module.computations:
        for instr in list(comp.instructions):
            if id(instr) in bodies and instr.parent is comp:
                inline_call(instr)
    module.remove_unused_computations()


__all__ = ["SdyError", "has_shardy_attributes", "import_shardy", "manual_sharding",
           "read_manual_axes", "read_meshes", "read_sharding_attr", "read_sharding_per_value",
           "to_hlo"]
