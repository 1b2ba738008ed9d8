"""StableHLO (a parsed MLIR module) to an HLO Module, following XLA's translation
(``xla/hlo/translate/mhlo_to_hlo/mlir_hlo_to_hlo.cc`` and the passes XLA runs before it:
``stablehlo-prepare-for-hlo-export``, CHLO legalization, constant sinking).

Owns the structure of the translation: functions become computations (``main`` the entry:
one parameter per argument, named from the argument's location or ``Arg_<i>``, a tuple root
when there is not exactly one result), ``func.call`` a ``call``, regions computations named
``region_<n>`` (if/case/while regions take their block arguments and the values they
capture from outside as one tuple parameter, ``arg_tuple``, or a single parameter, or the
empty tuple ``arg_empty_tuple``; constants defined outside a region are materialised inside
it, as XLA sinks them), multi-result ops a tuple plus one ``get-tuple-element`` per result.
Module attributes: ``mhlo.num_replicas``/``mhlo.num_partitions``, ``mhlo.frontend_attributes``,
Shardy meshes (as the ``xla.sdy.meshes`` frontend attribute); argument attributes
``tf.aliasing_output`` (input_output_alias), ``jax.buffer_donor`` (buffer_donor),
``mhlo.sharding``, ``sdy.sharding``, ``mhlo.frontend_attributes``,
``mhlo.is_same_data_across_replicas``; per-op ``mhlo.sharding``,
``mhlo.frontend_attributes``, ``sdy.*`` (kept as ``xla.sdy.*`` frontend attributes) and
location names (instruction names and ``op_name`` metadata). Every instruction is made with
``xlapy.opdefs.make_instruction``, so the HLO shape rules check every op, and each error
points at the MLIR op's line and column. The per-op rules are in
``xlapy.stablehlo.lowerings`` (stablehlo) and ``xlapy.stablehlo.chlo`` (chlo).
"""

from __future__ import annotations

import re
from typing import Any

from xlapy.errors import InvalidArgumentError, ParseError, XlaError
from xlapy.hlo.ir import Computation, Instruction, Module
from xlapy.opdefs import get_opdef, make_instruction
from xlapy.shape import Shape
from xlapy.shape.text import Scanner
from xlapy.stablehlo import mlir as M
from xlapy.stablehlo.mlir import LocatedError
from xlapy.stablehlo.values import dense_array, shape_of

_MISSING = object()
CONSTANT_OPS = frozenset({"stablehlo.constant", "arith.constant", "chlo.constant"})
TERMINATORS = frozenset({"stablehlo.return", "func.return", "mhlo.return", "sdy.return"})


def sanitize(name: str) -> str:
    """An instruction name from a location name: the last ``/`` component, characters
    other than letters, digits, ``_``, ``-``, ``.`` replaced by ``_`` (XLA's
    SanitizeOpName)."""
    name = name.rsplit("/", 1)[-1]
    name = re.sub(r"[^A-Za-z0-9_.\-]", "_", name)
    if not name or name[0].isdigit():
        name = "_" + name
    return name


class Converter:
    """One translation: ``Converter(parser, module_op).run(entry)`` -> Module."""

    def __init__(self, parser: M.MlirParser, module_op: M.Op):
        self.p = parser
        self.text = parser.text
        self.module_op = module_op
        self.funcs: dict[str, M.Op] = {}
        self.meshes: dict[str, M.Op] = {}
        self.lowered: dict[str, Computation] = {}
        self.lowering_now: set[str] = set()
        self.region_id = 0
        self.computations: list[Computation] = []  # callees before callers
        for op in module_op.regions[0][0].ops:
            if op.name == "func.func":
                sym = op.attrs.get("sym_name")
                if not isinstance(sym, M.StrAttr):
                    self.error("func.func needs a sym_name string", op.pos)
                name = sym.value
                if name in self.funcs:
                    self.error(f"function @{name} is defined twice", op.pos)
                self.funcs[name] = op
            elif op.name == "sdy.mesh":
                self.meshes[op.attrs["sym_name"].value] = op
            elif op.name == "builtin.module":
                self.error("nested modules are not supported", op.pos)
            else:
                self.error(f"'{op.name}' cannot appear at the top level of a module (only "
                           "func.func and sdy.mesh can)", op.pos)

    def error(self, message: str, pos: int):
        raise ParseError(message, self.text, pos, self.p.sc.what)

    # -- module ----------------------------------------------------------------------------

    def run(self, entry: str | None) -> Module:
        if entry is None:
            if "main" in self.funcs:
                entry = "main"
            else:
                bodies = [n for n, f in self.funcs.items() if f.regions]
                if len(bodies) != 1:
                    self.error("conversion requires a module with a `main` function (or a "
                               f"single function; this one has {len(bodies)}: "
                               + ", ".join("@" + n for n in bodies) + ")", self.module_op.pos)
                entry = bodies[0]
        if entry not in self.funcs:
            self.error(f"the module has no function @{entry}", self.module_op.pos)
        sym = self.module_op.attrs.get("sym_name")
        module = Module(sym.value if isinstance(sym, M.StrAttr) else "main")
        self.module = module
        self.entry_name = entry
        for name, f in self.funcs.items():  # XLA translates every function with a body
            if f.regions:
                self.function(name)
        entry_comp = self.lowered[entry]
        for comp in self.computations:
            module.add_computation(comp, entry=comp is entry_comp)
        module.remove_unused_computations()
        self._module_config(module)
        return module

    def _module_config(self, module: Module) -> None:
        attrs = self.module_op.attrs
        for key, cfg in (("mhlo.num_replicas", "replica_count"),
                         ("mhlo.num_partitions", "num_partitions")):
            a = attrs.get(key)
            if a is not None:
                if not isinstance(a, M.IntAttr) or a.value < 1:
                    self.error(f"{key} must be a positive integer", a.pos)
                module.config[cfg] = a.value
        fe = {}
        a = attrs.get("mhlo.frontend_attributes")
        if a is not None:
            fe.update(frontend_dict(self, a))
        if self.meshes:
            body = ", ".join(f"{name} = {op.attrs['mesh'].text}"
                             for name, op in self.meshes.items())
            fe["xla.sdy.meshes"] = "{" + body + "}"
        if fe:
            module.config["frontend_attributes"] = fe
        if self.aliases:
            module.config["input_output_alias"] = tuple(self.aliases)
        if self.donors:
            module.config["buffer_donor"] = tuple(self.donors)

    # -- functions -------------------------------------------------------------------------

    def function(self, name: str, call_pos: int | None = None) -> Computation:
        if name in self.lowered:
            return self.lowered[name]
        f = self.funcs.get(name)
        if f is None:
            self.error(f"call to unknown function @{name}", call_pos or 0)
        if not f.regions:
            self.error(f"function @{name} has no body", call_pos if call_pos else f.pos)
        if name in self.lowering_now:
            self.error(f"function @{name} calls itself (recursion has no HLO form)",
                       call_pos if call_pos is not None else f.pos)
        self.lowering_now.add(name)
        is_entry = name == self.entry_name
        comp = Computation(name)
        low = Lowering(self, comp, None)
        block = f.regions[0][0]
        arg_attrs = _dicts(f.attrs.get("arg_attrs"))
        res_attrs = _dicts(f.attrs.get("res_attrs"))
        if is_entry:
            self.aliases, self.donors = [], []
            ftype = f.attrs.get("function_type")
            if not (isinstance(ftype, M.TypeAttr) and isinstance(ftype.type, M.FunctionType)):
                self.error(f"function @{name} has no function_type", f.pos)
            n_results = len(ftype.type.results)
        for i, arg in enumerate(block.args):
            attrs = arg_attrs[i].items if i < len(arg_attrs) else {}
            low.cur_op = None
            data: dict[str, Any] = {}
            if is_entry:
                data = self._entry_arg_data(attrs, i, n_results, f)
            replication = None
            if is_entry:
                r = attrs.get("mhlo.is_same_data_across_replicas")
                if isinstance(r, M.BoolAttr):
                    replication = tuple([r.value] * max(1, len(shape_of(arg.type).leaves())))
                r = attrs.get("mhlo.parameter_replication")
                if isinstance(r, M.ArrayAttr):
                    replication = tuple(bool(getattr(x, "value", False)) for x in r.items)
            pname = sanitize(arg.loc) if arg.loc else f"Arg_{i}"
            values = {"parameter_number": i}
            if replication is not None:
                values["parameter_replication"] = replication
            inst = low.make("parameter", [], values, shape=self.shape(arg.type, arg.pos),
                            name=pname, pos=arg.pos, data=data)
            low.values[id(arg)] = inst
        ret_shardings = []
        result_sdy = []
        for r in res_attrs:
            s = r.items.get("mhlo.sharding") if isinstance(r, M.DictAttr) else None
            sdy = r.items.get("sdy.sharding") if isinstance(r, M.DictAttr) else None
            result_sdy.append(sdy)
            if not isinstance(s, M.StrAttr) and sdy is not None:
                s = M.StrAttr(sdy_to_hlo_sharding(self, sdy)) if \
                    sdy_to_hlo_sharding(self, sdy) is not None else None
            ret_shardings.append(s.value if isinstance(s, M.StrAttr) else None)
        low.block(block, ret_shardings=ret_shardings if is_entry else None,
                  result_sdy=result_sdy)
        self.lowering_now.discard(name)
        self.lowered[name] = comp
        self.computations.append(comp)
        return comp

    def _entry_arg_data(self, attrs: dict, i: int, n_results: int, f: M.Op) -> dict:
        from xlapy.hlo.module_data import Alias, BufferDonor

        data: dict[str, Any] = {}
        a = attrs.get("tf.aliasing_output")
        if a is not None:
            if not isinstance(a, M.IntAttr):
                self.error("tf.aliasing_output must be an integer", a.pos)
            if n_results != 1:
                index = (a.value,)
            elif a.value != 0:
                self.error("Aliasing output must be 0 if only one output exists", a.pos)
            else:
                index = ()
            self.aliases.append(Alias(index, i, ()))
        a = attrs.get("jax.buffer_donor")
        if isinstance(a, M.BoolAttr) and a.value:
            self.donors.append(BufferDonor(i, ()))
        a = attrs.get("mhlo.sharding")
        if isinstance(a, M.StrAttr):
            data["sharding"] = a.value
        fe = {}
        a = attrs.get("mhlo.frontend_attributes")
        if a is not None:
            fe.update(frontend_dict(self, a))
        a = attrs.get("sdy.sharding")
        if a is not None:
            fe["xla.sdy.sharding"] = a.text
            hlo = sdy_to_hlo_sharding(self, a)
            if hlo is not None and "sharding" not in data:
                data["sharding"] = hlo
        if fe:
            data["frontend_attributes"] = fe
        return data

    def shape(self, t: M.MType, pos: int) -> Shape:
        try:
            return shape_of(t)
        except XlaError as e:
            self.error(str(e), pos)

    # -- regions ---------------------------------------------------------------------------

    def region(self, outer: "Lowering", region: list, owner: M.Op, *,
               implicit: list | None = None, implicit_results: list | None = None,
               single_arg: bool = False, prefix: str = "region") -> Computation:
        """A region as a computation (XLA's LowerRegionAsComputation)."""
        name = f"{prefix}_{self.region_id}"
        self.region_id += 1
        comp = Computation(name)
        low = Lowering(self, comp, outer)
        block = region[0]
        implicit = implicit or []
        if single_arg:
            pieces = [(a, self.shape(a.type, a.pos)) for a in block.args]
            pieces += [(v, outer.get(v, owner).shape) for v in implicit]
            if len(pieces) > 1:
                tup = low.make("parameter", [], {"parameter_number": 0},
                               shape=Shape.tuple(s for _, s in pieces), name="arg_tuple",
                               pos=owner.pos)
                for i, (v, _) in enumerate(pieces):
                    low.values[id(v)] = low.make("get-tuple-element", [tup], {"index": i},
                                                 pos=owner.pos)
            elif len(pieces) == 1:
                v, s = pieces[0]
                pname = sanitize(v.loc) if getattr(v, "loc", None) else "Arg_"
                low.values[id(v)] = low.make("parameter", [], {"parameter_number": 0}, shape=s,
                                             name=pname, pos=owner.pos)
            else:
                low.make("parameter", [], {"parameter_number": 0}, shape=Shape.tuple(()),
                         name="arg_empty_tuple", pos=owner.pos)
        else:
            for i, a in enumerate(block.args):
                pname = sanitize(a.loc) if a.loc else f"Arg_{i}"
                low.values[id(a)] = low.make("parameter", [], {"parameter_number": i},
                                             shape=self.shape(a.type, a.pos), name=pname,
                                             pos=a.pos)
        low.block(block, implicit_results=implicit_results or [])
        self.computations.append(comp)
        return comp


def _dicts(a) -> list:
    """The dictionaries of arg_attrs/res_attrs (absent: none)."""
    if isinstance(a, M.ArrayAttr):
        return [x if isinstance(x, M.DictAttr) else M.DictAttr({}) for x in a.items]
    return []


def implicit_operands(regions: list, lowering: "Lowering") -> list:
    """Values used inside ``regions`` (and regions nested in them) but defined outside,
    in first-use order (MLIR's getUsedValuesDefinedAbove), constants excepted: XLA sinks
    those into the regions."""
    inside: set[int] = set()
    out: list = []
    seen: set[int] = set()

    def mark(region):
        for block in region:
            inside.add(id(block))
            for op in block.ops:
                for r in op.regions:
                    mark(r)

    def walk(region):
        for block in region:
            for op in block.ops:
                for v in op.operands:
                    home = v.owner if isinstance(v.owner, M.Block) else v.owner.parent
                    if id(home) in inside or id(v) in seen:
                        continue
                    if isinstance(v.owner, M.Op) and v.owner.name in CONSTANT_OPS:
                        continue
                    seen.add(id(v))
                    out.append(v)
                for r in op.regions:
                    walk(r)

    for r in regions:
        mark(r)
    for r in regions:
        walk(r)
    return out


class Lowering:
    """Lowers the ops of one computation: the map from MLIR values to instructions and
    the emission of instructions on behalf of the op being lowered."""

    def __init__(self, conv: Converter, comp: Computation, outer: "Lowering | None"):
        self.conv = conv
        self.comp = comp
        self.outer = outer
        self.values: dict[int, Instruction] = {}
        self.cur_op: M.Op | None = None
        self.root: Instruction | None = None

    # -- values ----------------------------------------------------------------------------

    def get(self, v: M.Value, user: M.Op | None = None) -> Instruction:
        inst = self.values.get(id(v))
        if inst is not None:
            return inst
        owner = v.owner
        if isinstance(owner, M.Op) and owner.name in CONSTANT_OPS:
            saved = self.cur_op
            self.lower(owner)  # a constant from outside: materialised here
            self.cur_op = saved
            return self.values[id(v)]
        pos = user.pos if user is not None else v.pos
        self.conv.error(f"'%{v.name}' is defined outside this region and is not a constant; "
                        "XLA passes such values only into if/case/while regions", pos)

    def operands(self, op: M.Op) -> list[Instruction]:
        return [self.get(v, op) for v in op.operands]

    # -- emission --------------------------------------------------------------------------

    def make(self, opcode: str, operands, values: dict | None = None, *, shape=None,
             name: str | None = None, pos: int | None = None, data: dict | None = None,
             texts: dict | None = None) -> Instruction:
        """Make and add one instruction. ``texts``: attributes given in their HLO text
        (``{"lhs_contracting_dims": "{1}"}``), read by the opcode's attribute kinds;
        ``values``: attributes given as values. The current op's sharding, frontend
        attributes and location name go on it unless ``data`` says otherwise."""
        op = self.cur_op
        if pos is None:
            pos = op.pos if op is not None else 0
        attrs = dict(values or {})
        try:
            if texts:
                attrs.update(read_hlo_attrs(opcode, texts))
            if data is None:
                data = self.op_data(opcode)
            inst = make_instruction(opcode, list(operands), attrs, shape=shape,
                                    name=name or self.default_name(opcode), **data)
        except LocatedError as e:
            self.conv.error(str(e), e.pos)
        except XlaError as e:
            where = f"{op.name}: " if op is not None else ""
            self.conv.error(where + str(e), pos)
        self.comp.add_instruction(inst)
        return inst

    def default_name(self, opcode: str) -> str:
        op = self.cur_op
        if op is not None and op.loc:
            return sanitize(op.loc)
        return opcode

    def op_data(self, opcode: str = "") -> dict:
        op = self.cur_op
        if op is None:
            return {}
        data: dict[str, Any] = {}
        a = op.attrs.get("mhlo.sharding")
        if isinstance(a, M.StrAttr) and opcode != "get-tuple-element":
            data["sharding"] = a.value
        fe = {}
        a = op.attrs.get("mhlo.frontend_attributes")
        if a is not None:
            fe.update(frontend_dict(self.conv, a))
        for key, value in op.attrs.items():
            if key.startswith("sdy."):
                fe["xla." + key] = value.text
        if fe:
            data["frontend_attributes"] = fe
        if op.loc:
            from xlapy.hlo.module_data import OpMetadata

            data["metadata"] = OpMetadata(op_name=op.loc)
        return data

    def result_shape(self, op: M.Op) -> Shape:
        """The declared result shape (a tuple for several results)."""
        shapes = [self.conv.shape(v.type, op.pos) for v in op.results]
        return shapes[0] if len(shapes) == 1 else Shape.tuple(shapes)

    def bind(self, op: M.Op, inst: Instruction) -> None:
        """Map the op's results to ``inst`` (one result) or to get-tuple-elements of it."""
        if len(op.results) == 1:
            self.values[id(op.results[0])] = inst
            return
        for i, v in enumerate(op.results):
            self.values[id(v)] = self.make("get-tuple-element", [inst], {"index": i})

    def tuple_if_many(self, insts: list[Instruction]) -> Instruction:
        return insts[0] if len(insts) == 1 else self.make("tuple", insts)

    # -- blocks ----------------------------------------------------------------------------

    def block(self, block: M.Block, *, ret_shardings=None, implicit_results=(),
              result_sdy=()) -> None:
        """Lower the block's ops; its return becomes the root (a tuple for several values).
        ``ret_shardings``: the entry's result shardings (HLO text or None each);
        ``result_sdy``: the function's ``sdy.sharding`` result attributes (None each), kept
        as XLA's Shardy round-trip export keeps them: each returned value passes through a
        custom call ``xla.sdy.FuncResultSharding`` holding its sharding."""
        term = None
        for op in block.ops:
            if op.name in TERMINATORS:
                term = op
                break
            self.lower(op)
        if term is None:
            self.conv.error("the region does not end with a return", block.parent.pos
                            if block.parent is not None else 0)
        self.cur_op = term
        rets = self.operands(term) + [self.get(v, term) for v in implicit_results]
        for i, sdy in enumerate(result_sdy):
            if sdy is not None and i < len(rets):
                rets[i] = self._func_result_sharding(rets[i], sdy)
        has_sharding = bool(ret_shardings) and any(s is not None for s in ret_shardings)
        if len(rets) != 1:
            sharding = None
            if has_sharding:
                sharding = "{" + ", ".join(s or "{replicated}" for s in ret_shardings) + "}"
            root = self.make("tuple", rets, name="tuple",
                             data={"sharding": sharding} if sharding else {})
        elif has_sharding:
            # one result with a sharding: a tuple and get-tuple-element carrying it, as XLA's
            # translation writes it (the returned value keeps its own sharding)
            tup = self.make("tuple", rets, name="tuple", data={})
            root = self.make("get-tuple-element", [tup], {"index": 0}, name="get-tuple-element",
                             data={"sharding": ret_shardings[0]})
        else:
            root = rets[0]
        self.comp.root = root

    def _func_result_sharding(self, value: Instruction, sdy: M.Attr) -> Instruction:
        per_value = "#sdy.sharding_per_value<[" + sdy.text[len("#sdy.sharding"):] + "]>"
        return self.make("custom-call", [value], {
            "custom_call_target": "xla.sdy.FuncResultSharding",
            "custom_call_has_side_effect": True}, shape=value.shape,
            data={"frontend_attributes": {"xla.sdy.sharding": per_value}})

    def lower(self, op: M.Op) -> None:
        from xlapy.stablehlo.lowerings import LOWERINGS

        self.cur_op = op
        rule = LOWERINGS.get(op.name)
        if rule is None and op.name.startswith("chlo."):
            from xlapy.stablehlo.chlo import lower_chlo

            try:
                lower_chlo(self, op)
            except LocatedError as e:
                self.conv.error(str(e), e.pos)
            return
        if rule is None:
            self.conv.error(unsupported_message(op.name), op.name_pos)
        try:
            rule(self, op)
        except LocatedError as e:
            self.conv.error(str(e), e.pos)
        except XlaError:
            raise
        except (KeyError, IndexError, TypeError, AttributeError, ValueError) as e:
            # An attribute of an unexpected kind or a malformed op the rule did not expect.
            self.conv.error(f"{op.name}: malformed op ({type(e).__name__}: {e})", op.pos)


def unsupported_message(name: str) -> str:
    from xlapy.stablehlo.lowerings import UNSUPPORTED

    reason = UNSUPPORTED.get(name)
    if reason:
        return f"'{name}' cannot be translated to HLO: {reason}"
    return f"'{name}' cannot be translated to HLO (unsupported op for export to XLA)"


# -- attributes ------------------------------------------------------------------------------


def read_hlo_attrs(opcode: str, texts: dict) -> dict:
    """Attribute values from their HLO text, read by the opcode's attribute kinds (the
    same readers as the HLO parser's), so each value has exactly HLO's meaning."""
    opdef = get_opdef(opcode)
    parts: dict[str, dict] = {}
    for key, text in texts.items():
        spec = opdef.attr_by_key.get(key)
        if spec is None:
            raise InvalidArgumentError(f"{opcode} has no attribute {key}")
        sc = Scanner(text, f"{opcode} {key}")
        parts.setdefault(spec.name, {})[key] = spec.kind.read_key(key, sc, None)
        if not sc.at_end():
            raise InvalidArgumentError(f"{opcode}: attribute {key}={text}: unexpected text "
                                       f"after the value")
    out = {}
    for spec_name, got in parts.items():
        spec = opdef.attr_by_name[spec_name]
        out[spec_name] = spec.kind.assemble(spec_name, got, f"{opcode}: attribute '{spec_name}'")
    return out


def frontend_dict(conv: Converter, a: M.Attr) -> dict:
    if not isinstance(a, M.DictAttr):
        conv.error("mhlo.frontend_attributes must be a dictionary", a.pos)
    out = {}
    for k, v in a.items.items():
        if isinstance(v, M.StrAttr):
            out[k] = v.value
        else:  # XLA keeps string values only; dictionaries print as their text
            out[k] = v.text
    return out


def attr(op: M.Op, key: str, default=_MISSING) -> M.Attr:
    a = op.attrs.get(key)
    if a is None:
        if default is _MISSING:
            raise LocatedError(f"{op.name}: missing attribute '{key}'", op.pos)
        return default
    return a


def a_int(op: M.Op, key: str, default=_MISSING) -> int:
    a = attr(op, key, None)
    if a is None:
        if default is _MISSING:
            raise LocatedError(f"{op.name}: missing attribute '{key}'", op.pos)
        return default
    if isinstance(a, M.IntAttr):
        return a.value
    raise LocatedError(f"{op.name}: attribute '{key}' must be an integer, got {a.text}", a.pos)


def a_float(op: M.Op, key: str, default=_MISSING) -> float:
    a = attr(op, key, None)
    if a is None:
        if default is _MISSING:
            raise LocatedError(f"{op.name}: missing attribute '{key}'", op.pos)
        return default
    if isinstance(a, (M.FloatAttr, M.IntAttr)):
        return float(a.value)
    raise LocatedError(f"{op.name}: attribute '{key}' must be a number, got {a.text}", a.pos)


def a_bool(op: M.Op, key: str, default=False) -> bool:
    a = op.attrs.get(key)
    if a is None:
        return default
    if isinstance(a, M.BoolAttr):
        return a.value
    if isinstance(a, M.UnitAttr):
        return True
    raise LocatedError(f"{op.name}: attribute '{key}' must be true or false, got {a.text}",
                       a.pos)


def a_str(op: M.Op, key: str, default=_MISSING) -> str:
    a = attr(op, key, None)
    if a is None:
        if default is _MISSING:
            raise LocatedError(f"{op.name}: missing attribute '{key}'", op.pos)
        return default
    if isinstance(a, M.StrAttr):
        return a.value
    raise LocatedError(f"{op.name}: attribute '{key}' must be a string, got {a.text}", a.pos)


def ints_of(a: M.Attr, what: str, resources=None) -> tuple:
    if isinstance(a, M.DenseArrayAttr):
        return tuple(int(v) for v in a.values)
    if isinstance(a, M.ArrayAttr):
        out = []
        for x in a.items:
            if not isinstance(x, M.IntAttr):
                raise LocatedError(f"{what} must be a list of integers, got {a.text}", a.pos)
            out.append(x.value)
        return tuple(out)
    if isinstance(a, M.DenseAttr):
        try:
            arr = dense_array(a, resources)
        except XlaError as e:
            raise LocatedError(f"{what}: {e}", a.pos) from None
        return tuple(int(v) for v in arr.reshape(-1))
    raise LocatedError(f"{what} must be a list of integers, got {a.text}", a.pos)


def a_ints(op: M.Op, key: str, default=_MISSING) -> tuple:
    a = attr(op, key, None)
    if a is None:
        if default is _MISSING:
            raise LocatedError(f"{op.name}: missing attribute '{key}'", op.pos)
        return default
    return ints_of(a, f"{op.name}: attribute '{key}'")


def a_bools(op: M.Op, key: str, default=_MISSING) -> tuple:
    a = attr(op, key, None)
    if a is None:
        if default is _MISSING:
            raise LocatedError(f"{op.name}: missing attribute '{key}'", op.pos)
        return default
    if isinstance(a, M.DenseArrayAttr):
        return tuple(bool(v) for v in a.values)
    if isinstance(a, M.ArrayAttr):
        return tuple(bool(getattr(x, "value", False)) for x in a.items)
    if isinstance(a, M.DenseAttr):
        return tuple(bool(v) for v in dense_array(a).reshape(-1))
    raise LocatedError(f"{op.name}: attribute '{key}' must be a list of booleans, got {a.text}",
                       a.pos)


def a_matrix(op: M.Op, key: str, rows: int) -> list:
    """An N x 2 integer attribute (padding, source_target_pairs); zeros when absent."""
    a = op.attrs.get(key)
    if a is None:
        return [(0, 0)] * rows
    if isinstance(a, M.DenseAttr):
        arr = dense_array(a)
        if arr.size == 0:
            return []
        if arr.ndim != 2 or arr.shape[1] != 2:
            raise LocatedError(f"{op.name}: attribute '{key}' must be an Nx2 tensor, got "
                               f"{a.type}", a.pos)
        return [tuple(int(x) for x in row) for row in arr]
    if isinstance(a, M.ArrayAttr):
        return [ints_of(x, f"{op.name}: attribute '{key}'") for x in a.items]
    raise LocatedError(f"{op.name}: attribute '{key}' must be an Nx2 integer tensor", a.pos)


def a_enum(op: M.Op, key: str, default=_MISSING) -> str:
    """``EQ`` from ``#stablehlo<comparison_direction EQ>`` or a bare ``EQ``."""
    a = op.attrs.get(key)
    if a is None:
        if default is _MISSING:
            raise LocatedError(f"{op.name}: missing attribute '{key}'", op.pos)
        return default
    return enum_of(a, f"{op.name}: attribute '{key}'")


def enum_of(a: M.Attr, what: str) -> str:
    if isinstance(a, M.EnumAttr):
        return a.value
    if isinstance(a, M.StrAttr):
        return a.value
    if isinstance(a, M.DialectAttr):
        words = a.body.split()
        if a.mnemonic and len(words) == 1:  # #stablehlo.result_accuracy_mode<DEFAULT>
            return words[0]
        if len(words) == 2:
            return words[1]
    raise LocatedError(f"{what} must be an enum value, got {a.text}", a.pos)


def struct_of(conv: Converter, a: M.Attr, what: str) -> dict:
    """The fields of a StructAttr or of a dialect attribute ``#d.name<key = value, ...>``:
    integers, lists of integers, booleans, types (as text) or nested attributes."""
    if isinstance(a, M.StructAttr):
        return dict(a.fields)
    if not isinstance(a, M.DialectAttr):
        raise LocatedError(f"{what} must be a structured attribute, got {a.text}", a.pos)
    sub = conv.p.sub_parser(a)
    if a.mnemonic == "conv":
        from xlapy.stablehlo.pretty import conv_dimension_numbers

        return dict(conv_dimension_numbers(sub).fields)
    out = {}
    while not sub.sc.at_end():
        kpos = sub.here()
        key = sub.read_key()
        if key in out:
            conv.error(f"{what}: '{key}' is given twice", kpos)
        sub.expect("=", f"after '{key}'")
        value = sub.parse_attr()
        if isinstance(value, M.IntAttr):
            out[key] = value.value
        elif isinstance(value, M.BoolAttr):
            out[key] = value.value
        elif isinstance(value, M.FloatAttr):
            out[key] = value.value
        elif isinstance(value, M.ArrayAttr):
            out[key] = ints_of(value, f"{what}: '{key}'")
        elif isinstance(value, M.TypeAttr):
            out[key] = str(value.type)
        else:
            out[key] = value
        if not sub.eat(","):
            break
    if not sub.sc.at_end():
        conv.error(f"{what}: expected ',' or the end of the attribute, found "
                   f"{sub.sc.describe_next()}", sub.here())
    return out


def sdy_to_hlo_sharding(conv: Converter, a: M.Attr) -> str | None:
    """The HLO sharding of a ``#sdy.sharding<@mesh, [{"x"}, {"y", "z"}, {}]>`` (GSPMD's
    tiled form: each dimension split by the product of its axes' sizes, the devices an iota
    over the mesh transposed to the axes' order, axes left over replicating the last tile
    dimension), ``{replicated}`` when nothing is split. None for what this does not read
    (sub-axes, explicit device ids, an unknown mesh): the Shardy text stays in the
    ``xla.sdy.sharding`` frontend attribute either way."""
    if not isinstance(a, M.DialectAttr):
        return None
    m = re.match(r'\s*@([A-Za-z0-9_$.\-]+)\s*,\s*\[(.*)\]\s*(.*)$', a.body, re.S)
    if not m:
        return None
    mesh = conv.meshes.get(m.group(1))
    dims = re.findall(r"\{([^{}]*)\}", m.group(2))
    if not any('"' in d for d in dims):
        return "{replicated}"
    if mesh is None or "device_ids" in mesh.attrs["mesh"].body or ":(" in m.group(2):
        return None
    axes = [(n, int(s)) for n, s in re.findall(r'"([^"]+)"\s*=\s*(\d+)', mesh.attrs["mesh"].body)]
    names = [n for n, _ in axes]
    size = dict(axes)
    used: list[str] = []
    tiles = []
    for d in dims:
        t = 1
        for n in re.findall(r'"([^"]+)"', d):
            if n not in size or n in used:
                return None
            used.append(n)
            t *= size[n]
        tiles.append(t)
    total = 1
    for _, s in axes:
        total *= s
    if total == 1 or all(t == 1 for t in tiles):
        return "{replicated}"
    rest = [n for n in names if n not in used]
    replicated = 1
    for n in rest:
        replicated *= size[n]
    perm = [names.index(n) for n in used + rest]
    shape = list(tiles) + ([replicated] if replicated > 1 else [])
    devices = "[" + ",".join(map(str, shape)) + "]<=[" + ",".join(str(s) for _, s in axes) + "]"
    if perm != sorted(perm):
        devices += "T(" + ",".join(map(str, perm)) + ")"
    elif len(axes) > 1:
        devices = "[" + ",".join(map(str, shape)) + f"]<=[{total}]"
    return "{devices=" + devices + (" last_tile_dim_replicate" if replicated > 1 else "") + "}"
