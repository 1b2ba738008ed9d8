"""The custom ("pretty") syntax of the ops StableHLO programs print that way.

Owns ``parse_custom``: for each op with an assembly format of its own - the ``stablehlo``
ops (``stablehlo.add %0, %1 : tensor<4xf32>``, ``stablehlo.dot_general ...,
contracting_dims = [1] x [0]``, ``stablehlo.reduce(%x init: %c) applies stablehlo.add
across dimensions = [0]``, ``stablehlo.while(%i = %c) : ... cond {...} do {...}``,
``stablehlo.convolution(...) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f],
window = {...}``, ...), ``chlo`` (``chlo.top_k(%x, k = 2)``, ``chlo.erf %x : t -> t``),
``func`` (``func.func``, ``return``, ``call``), ``arith.constant``, ``tensor.cast`` and
``sdy`` (``sdy.mesh``, ``sdy.sharding_constraint``, ``sdy.reshard``, ``sdy.sharding_group``,
``sdy.propagation_barrier``, ``sdy.manual_computation``, ``sdy.return``) - the reader that turns it into the op's
operands, regions and attributes under their generic names (``broadcast_dimensions``,
``comparison_direction``, ...), so the converter reads one form. Each reader follows the
op's assembly format in StableHLO's ODS (``StablehloOps.td``, ``ChloOps.td``) and
``AssemblyFormat.cpp``. Imports xlapy.stablehlo.mlir only.
"""

from __future__ import annotations

import re

from xlapy.stablehlo.mlir import (
    ArrayAttr,
    Block,
    DenseArrayAttr,
    DialectAttr,
    EnumAttr,
    FunctionType,
    IntAttr,
    MlirParser,
    Op,
    StrAttr,
    StructAttr,
    SymbolAttr,
    TensorType,
    TupleType,
    TypeAttr,
    DictAttr,
    types_match,
)

# -- type sections ---------------------------------------------------------------------------


def type_section(p: MlirParser):
    """After ``:``: a function type, a list of types, or ``t, t -> t`` / ``t -> (t, t)``
    (chlo's formats). Returns a FunctionType or a list of types."""
    first = p.parse_type()
    if isinstance(first, FunctionType):
        return first
    types = [first]
    while True:
        save = p.sc.pos
        if p.eat(",") and p.peek() not in ("", "%", "{"):
            m = p.peek_re(re.compile(r"[A-Za-z_!(]"))
            if m:
                types.append(p.parse_type())
                continue
        p.sc.pos = save
        break
    if p.eat("->"):
        if p.peek() == "(":
            results = []
            p.expect("(")
            if not p.eat(")"):
                while True:
                    results.append(p.parse_type())
                    if p.eat(")"):
                        break
                    p.expect(",", "or ')' in the result types")
        else:
            results = [p.parse_type()]
        return FunctionType(tuple(types), tuple(results))
    return types


def _check_inputs(p: MlirParser, op: Op, ftype: FunctionType, pos: int) -> None:
    if len(ftype.inputs) != len(op.operands):
        p.error(f"'{op.name}' has {len(op.operands)} operand"
                f"{'s' if len(op.operands) != 1 else ''} but its type lists "
                f"{len(ftype.inputs)}", pos)
    for v, t in zip(op.operands, ftype.inputs):
        if not types_match(v.type, t):
            p.error(f"operand %{v.name} has type {v.type}, but '{op.name}' says {t}", pos)


def _results(p: MlirParser, op: Op, n_names: int, kind: str = "last") -> list:
    """``attr-dict : types`` at the end of most formats. ``kind`` says how a plain type
    list maps to results: "last" (the last n types: SameOperandsAndResultType, select),
    "all" (pairwise, type(results))."""
    attr_dict(p, op)
    p.expect(":", f"and the type of '{op.name}'")
    pos = p.here()
    sec = type_section(p)
    if isinstance(sec, FunctionType):
        _check_inputs(p, op, sec, pos)
        return list(sec.results)
    if kind == "all":
        return sec
    if n_names == 0:
        return []
    if len(sec) < n_names:
        p.error(f"'{op.name}' gives {len(sec)} type{'s' if len(sec) != 1 else ''} for "
                f"{n_names} results", pos)
    return sec[-n_names:]


def attr_dict(p: MlirParser, op: Op) -> None:
    if p.peek() == "{":
        for k, v in p.parse_attr_dict_body().items():
            if k in op.attrs:
                p.error(f"attribute '{k}' is given twice", v.pos)
            op.attrs[k] = v


def _int_list(p: MlirParser) -> DenseArrayAttr:
    start = p.here()
    p.expect("[", "to start a list of integers")
    values = []
    if not p.eat("]"):
        while True:
            values.append(p.read_int())
            if p.eat("]"):
                break
            p.expect(",", "or ']' in a list of integers")
    return DenseArrayAttr("i64", tuple(values), pos=start, text=p.text[start:p.sc.pos])


def _int(p: MlirParser) -> IntAttr:
    start = p.here()
    return IntAttr(p.read_int(), pos=start, text=p.text[start:p.sc.pos])


def _enum(p: MlirParser, what: str) -> EnumAttr:
    start = p.here()
    return EnumAttr(p.read_bare_id(what), pos=start, text=p.text[start:p.sc.pos])


def _keyword_value(p: MlirParser, op: Op, key: str, attr: str, reader) -> None:
    p.expect_keyword(key, f"in '{op.name}'")
    p.expect("=", f"after '{key}'")
    op.attrs[attr] = reader(p)


# -- op formats -----------------------------------------------------------------------------


def _operands_only(kind="last"):
    def parse(p: MlirParser, op: Op, n: int):
        op.operands = p.use_list()
        return _results(p, op, n, kind)
    return parse


def _constant(p: MlirParser, op: Op, n: int):
    if p.eat("("):  # the generic form with an unquoted name
        p.expect(")")
        if p.peek(2) == "<{":
            p.expect("<")
            op.attrs.update(p.parse_attr_dict_body())
            p.expect(">")
        attr_dict(p, op)
        p.expect(":")
        t = p.parse_type()
        return list(t.results) if isinstance(t, FunctionType) else [t]
    attr_dict(p, op)
    pos = p.here()
    value = p.parse_attr()
    op.attrs["value"] = value
    typ = getattr(value, "type", None)
    if typ is None:
        p.error(f"'{op.name}' needs a typed value (dense<...> : tensor<...>)", pos)
    if not isinstance(typ, TensorType):  # arith.constant 1 : i32
        typ = TensorType((), str(typ))
    return [typ]


def _iota(p, op, n):
    _keyword_value(p, op, "dim", "iota_dimension", _int)
    return _results(p, op, n, "all")


def _dynamic_iota(p, op, n):
    op.operands = [p.use()]
    p.expect(",")
    _keyword_value(p, op, "dim", "iota_dimension", _int)
    return _results(p, op, n)


def _operands_then_keywords(*keys):
    """``%a, %b, key = value, ... attr-dict : type``: keys are (keyword, attr, reader)."""
    def parse(p: MlirParser, op: Op, n: int):
        op.operands = p.use_list()
        for key, attr, reader in keys:
            if op.operands or key is not keys[0][0]:
                p.expect(",", f"before '{key}' in '{op.name}'")
            _keyword_value(p, op, key, attr, reader)
        return _results(p, op, n)
    return parse


def _compare(p, op, n):
    op.attrs["comparison_direction"] = _enum(p, "a comparison direction (EQ, NE, ...)")
    p.expect(",")
    op.operands = [p.use()]
    p.expect(",")
    op.operands.append(p.use())
    if p.eat(","):
        op.attrs["compare_type"] = _enum(p, "a comparison type (FLOAT, TOTALORDER, ...)")
    return _results(p, op, n)


def _get_tuple_element(p, op, n):
    op.operands = [p.use()]
    p.expect("[", "before the tuple index")
    op.attrs["index"] = _int(p)
    p.expect("]")
    return _results(p, op, n)


def _tuple(p, op, n):
    op.operands = p.use_list()
    attr_dict(p, op)
    p.expect(":")
    pos = p.here()
    t = p.parse_type()
    if isinstance(t, FunctionType):
        _check_inputs(p, op, t, pos)
        return list(t.results)
    if not isinstance(t, TupleType):
        p.error(f"expected a tuple type for '{op.name}', found {t}", pos)
    return [t]


def _slice(p, op, n):
    op.operands = [p.use()]
    start = p.here()
    p.expect("[", "to start the slice ranges")
    starts, limits, strides = [], [], []
    if not p.eat("]"):
        while True:
            starts.append(p.read_int("a start index"))
            p.expect(":")
            limits.append(p.read_int("a limit index"))
            strides.append(p.read_int("a stride") if p.eat(":") else 1)
            if p.eat("]"):
                break
            p.expect(",", "or ']' in the slice ranges")
    for attr, values in (("start_indices", starts), ("limit_indices", limits),
                         ("strides", strides)):
        op.attrs[attr] = DenseArrayAttr("i64", tuple(values), pos=start)
    return _results(p, op, n)


def _dynamic_slice(p, op, n):
    op.operands = []
    while p.peek_value():
        op.operands.append(p.use())
        p.expect(",", "after an operand of dynamic_slice")
    _keyword_value(p, op, "sizes", "slice_sizes", _int_list)
    return _results(p, op, n)


def _concatenate(p, op, n):
    op.operands = []
    while p.peek_value():
        op.operands.append(p.use())
        p.expect(",", "after an operand of concatenate")
    _keyword_value(p, op, "dim", "dimension", _int)
    return _results(p, op, n)


def _dynamic_broadcast_in_dim(p, op, n):
    op.operands = [p.use()]
    p.expect(",")
    op.operands.append(p.use())
    p.expect(",")
    _keyword_value(p, op, "dims", "broadcast_dimensions", _int_list)
    return _results(p, op, n)


def _cholesky(p, op, n):
    op.operands = [p.use()]
    if p.eat(","):
        _keyword_value(p, op, "lower", "lower", lambda p: p.parse_attr(typed=False))
    return _results(p, op, n)


def _exponent_mantissa(p):
    pos = p.here()
    word = p.read_bare_id("e#m# (exponent and mantissa bits)")
    m = re.fullmatch(r"e(\d+)m(\d+)", word)
    if not m:
        p.error(f"expected exponent mantissa in format e#m#, saw {word}", pos)
    return StructAttr({"exponent_bits": int(m.group(1)), "mantissa_bits": int(m.group(2))},
                      pos=pos, text=word)


def _reduce_precision(p, op, n):
    op.operands = [p.use()]
    p.expect(",")
    _keyword_value(p, op, "format", "format", _exponent_mantissa)
    fmt = op.attrs.pop("format")
    op.attrs["exponent_bits"] = IntAttr(fmt.fields["exponent_bits"], pos=fmt.pos)
    op.attrs["mantissa_bits"] = IntAttr(fmt.fields["mantissa_bits"], pos=fmt.pos)
    return _results(p, op, n)


def _optimization_barrier(p, op, n):
    if p.peek() == "(":
        p.expect("(")
        p.expect(")")
        attr_dict(p, op)
        return []
    attr_dict(p, op)
    op.operands = p.use_list()
    if not op.operands:
        return []
    p.expect(":")
    pos = p.here()
    sec = type_section(p)
    if isinstance(sec, FunctionType):
        _check_inputs(p, op, sec, pos)
        return list(sec.results)
    return sec


def _return(p, op, n):
    op.operands = p.use_list()
    attr_dict(p, op)
    if op.operands:
        p.expect(":", "and the types of the returned values")
        pos = p.here()
        types = type_section(p)
        if isinstance(types, FunctionType) or len(types) != len(op.operands):
            p.error(f"'{op.name}' returns {len(op.operands)} values; give one type each", pos)
        for v, t in zip(op.operands, types):
            if not types_match(v.type, t):
                p.error(f"%{v.name} has type {v.type}, not {t}", pos)
    return []


def _precision_list(p):
    start = p.here()
    p.expect("[")
    items = []
    if not p.eat("]"):
        while True:
            items.append(_enum(p, "a precision (DEFAULT, HIGH, HIGHEST)"))
            if p.eat("]"):
                break
            p.expect(",")
    return ArrayAttr(items, pos=start, text=p.text[start:p.sc.pos])


def _dot(p, op, n):
    op.operands = [p.use()]
    p.expect(",")
    op.operands.append(p.use())
    if p.eat(","):
        _keyword_value(p, op, "precision", "precision_config", _precision_list)
    return _results(p, op, n)


def _dims_pair(p):
    lhs = _int_list(p)
    p.expect_keyword("x", "between the lhs and rhs dimensions")
    rhs = _int_list(p)
    return lhs.values, rhs.values


def _dot_general(p, op, n):
    op.operands = [p.use()]
    p.expect(",")
    op.operands.append(p.use())
    p.expect(",")
    start = p.here()
    fields = {"lhs_batching_dimensions": (), "rhs_batching_dimensions": (),
              "lhs_contracting_dimensions": (), "rhs_contracting_dimensions": ()}
    if p.eat_keyword("batching_dims"):
        p.expect("=")
        fields["lhs_batching_dimensions"], fields["rhs_batching_dimensions"] = _dims_pair(p)
        p.expect(",")
    p.expect_keyword("contracting_dims", "in dot_general")
    p.expect("=")
    fields["lhs_contracting_dimensions"], fields["rhs_contracting_dimensions"] = _dims_pair(p)
    op.attrs["dot_dimension_numbers"] = StructAttr(fields, pos=start,
                                                   text=p.text[start:p.sc.pos])
    while p.eat(","):
        if p.eat_keyword("precision"):
            p.expect("=")
            op.attrs["precision_config"] = _precision_list(p)
        elif p.eat_keyword("algorithm"):
            p.expect("=")
            apos = p.here()
            body = p.skip_balanced("<", ">")
            op.attrs["algorithm"] = DialectAttr("stablehlo", "dot_algorithm", body, apos + 1,
                                                pos=apos, text=p.text[apos:p.sc.pos])
        else:
            p.error(f"expected 'precision' or 'algorithm' in dot_general, found "
                    f"{p.sc.describe_next()}")
    return _results(p, op, n)


def conv_dimension_numbers(p: MlirParser) -> StructAttr:
    """``[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]`` (also the body of ``#stablehlo.conv``,
    where ``raw input_batch_dimension = 0, ...`` is the other spelling)."""
    start = p.here()
    if p.eat_keyword("raw"):
        fields = {}
        while not p.sc.at_end() and p.peek() != ">":
            key = p.read_key()
            p.expect("=")
            fields[key] = _int_list(p).values if p.peek() == "[" else p.read_int()
            if not p.eat(","):
                break
        return StructAttr(fields, pos=start, text=p.text[start:p.sc.pos])

    def one(labels: str, what: str):
        pos = p.here()
        p.expect("[", f"to start the {what} dimensions")
        items = []
        if not p.eat("]"):
            while True:
                ipos = p.here()
                m = p.peek_re(re.compile(r"\d+|[A-Za-z]"))
                if not m:
                    p.error(f"expected a dimension label in the {what} dimensions, found "
                            f"{p.sc.describe_next()}")
                p.sc.pos = m.end()
                items.append((m.group(0), ipos))
                if p.eat("]"):
                    break
                p.expect(",")
        special = {}
        spatial = {}
        for dim, (label, ipos) in enumerate(items):
            if label.isdigit():
                if int(label) in spatial:
                    p.error(f"spatial dimension {label} appears twice", ipos)
                spatial[int(label)] = dim
            elif label in labels:
                if label in special:
                    p.error(f"'{label}' appears twice in the {what} dimensions", ipos)
                special[label] = dim
            else:
                p.error(f"unexpected dimension label '{label}' in the {what} dimensions "
                        f"(expected {', '.join(labels)} or a spatial index)", ipos)
        for label in labels:
            if label not in special:
                p.error(f"the {what} dimensions have no '{label}'", pos)
        if sorted(spatial) != list(range(len(spatial))):
            p.error(f"the spatial dimensions of the {what} are not 0..{len(spatial) - 1}", pos)
        return special, tuple(spatial[i] for i in range(len(spatial)))

    lhs, lhs_sp = one("bf", "input")
    p.expect_keyword("x", "between the input and kernel dimensions")
    rhs, rhs_sp = one("io", "kernel")
    p.expect("->", "before the output dimensions")
    out, out_sp = one("bf", "output")
    fields = {
        "input_batch_dimension": lhs["b"], "input_feature_dimension": lhs["f"],
        "input_spatial_dimensions": lhs_sp,
        "kernel_input_feature_dimension": rhs["i"], "kernel_output_feature_dimension": rhs["o"],
        "kernel_spatial_dimensions": rhs_sp,
        "output_batch_dimension": out["b"], "output_feature_dimension": out["f"],
        "output_spatial_dimensions": out_sp,
    }
    return StructAttr(fields, pos=start, text=p.text[start:p.sc.pos])


def _window(p, op):
    p.expect("{", "to start the window")
    names = {"stride": "window_strides", "lhs_dilate": "lhs_dilation",
             "rhs_dilate": "rhs_dilation", "pad": "padding", "reverse": "window_reversal"}
    if p.eat("}"):
        return
    while True:
        kpos = p.here()
        key = p.read_bare_id("a window attribute (stride, pad, lhs_dilate, rhs_dilate, "
                             "reverse)")
        if key not in names:
            p.error(f"unknown window attribute '{key}'", kpos)
        p.expect("=")
        op.attrs[names[key]] = p.parse_attr()
        if p.eat("}"):
            return
        p.expect(",", "or '}' in the window")


def _convolution(p, op, n):
    p.expect("(")
    op.operands = p.use_list()
    p.expect(")")
    p.expect_keyword("dim_numbers")
    p.expect("=")
    op.attrs["dimension_numbers"] = conv_dimension_numbers(p)
    p.expect(",")
    p.expect_keyword("window")
    p.expect("=")
    _window(p, op)
    return _results(p, op, n)


def _custom_call(p, op, n):
    pos = p.here()
    op.attrs["call_target_name"] = StrAttr(p.read_symbol("the custom call target (@name)"),
                                           pos=pos)
    p.expect("(")
    op.operands = p.use_list()
    p.expect(")")
    return _results(p, op, n)


def _composite(p, op, n):
    pos = p.here()
    op.attrs["name"] = StrAttr(p.read_string("the composite's name"), pos=pos)
    op.operands = p.use_list()
    if p.peek() == "(":
        p.error("composites with regions cannot be translated to HLO (XLA rejects them too)")
    return _results(p, op, n)


def _while(p, op, n):
    p.expect("(")
    pairs = []
    if not p.eat(")"):
        while True:
            apos = p.here()
            m = p.peek_re(re.compile(r"%([A-Za-z0-9_$.\-]+)"))
            if not m:
                p.error(f"expected '%iterArg = %value', found {p.sc.describe_next()}")
            p.sc.pos = m.end()
            p.expect("=")
            pairs.append((m.group(1), apos, p.use()))
            if p.eat(")"):
                break
            p.expect(",")
    op.operands = [v for _, _, v in pairs]
    types = []
    if pairs:
        p.expect(":", "and the types of the loop values")
        tpos = p.here()
        types = type_section(p)
        if isinstance(types, FunctionType) or len(types) != len(pairs):
            p.error(f"'{op.name}' has {len(pairs)} loop values; give one type each", tpos)
        for v, t in zip(op.operands, types):
            if not types_match(v.type, t):
                p.error(f"%{v.name} has type {v.type}, not {t}", tpos)
    if p.eat_keyword("attributes"):
        op.attrs.update(p.parse_attr_dict_body())
    args = [(name, t, apos) for (name, apos, _), t in zip(pairs, types)]
    p.expect_keyword("cond", "before the loop condition")
    op.regions.append(p.region(op, args))
    p.expect_keyword("do", "before the loop body")
    op.regions.append(p.region(op, args))
    return list(types)


def _reduce(p, op, n):
    inputs, inits = [], []
    while True:
        p.expect("(", "to start '(%input init: %value)'")
        inputs.append(p.use())
        p.expect_keyword("init")
        p.expect(":")
        inits.append(p.use())
        p.expect(")")
        if not p.eat(","):
            break
    op.operands = inputs + inits
    compact = None
    if p.eat_keyword("applies"):
        npos = p.here()
        compact = (p.read_key("the reducing op"), npos)
    p.expect_keyword("across")
    p.expect_keyword("dimensions")
    p.expect("=")
    op.attrs["dimensions"] = _int_list(p)
    attr_dict(p, op)
    p.expect(":")
    tpos = p.here()
    ftype = p.parse_type()
    if not isinstance(ftype, FunctionType):
        p.error(f"expected a function type for '{op.name}', found {ftype}", tpos)
    _check_inputs(p, op, ftype, tpos)
    if compact is not None:
        inner, npos = compact
        elem = inputs[0].type.elem if isinstance(inputs[0].type, TensorType) else None
        scalar = TensorType((), elem)
        block = Block(parent=op)
        from xlapy.stablehlo.mlir import Value

        a = Value("lhs", scalar, npos, block, 0)
        b = Value("rhs", scalar, npos, block, 1)
        block.args = [a, b]
        inner_op = Op(inner, operands=[a, b], pos=npos, name_pos=npos, parent=block)
        inner_op.results = [Value(inner, scalar, npos, inner_op, 0)]
        ret = Op("stablehlo.return", operands=list(inner_op.results), pos=npos, name_pos=npos,
                 parent=block)
        block.ops = [inner_op, ret]
        op.regions.append([block])
        return list(ftype.results)
    p.expect_keyword("reducer", "before the reduce body")
    elems, accs = [], []
    while p.peek() == "(":
        p.expect("(")
        for group in (elems, accs):
            apos = p.here()
            m = p.peek_re(re.compile(r"%([A-Za-z0-9_$.\-]+)"))
            if not m:
                p.error(f"expected a reducer argument (%name: type), found "
                        f"{p.sc.describe_next()}")
            p.sc.pos = m.end()
            p.expect(":")
            group.append((m.group(1), p.parse_type(), apos))
            p.opt_loc()
            if group is elems:
                p.expect(",")
        p.expect(")")
    op.regions.append(p.region(op, elems + accs))
    return list(ftype.results)


def _func(p: MlirParser, op: Op, n: int):
    if p.peek_re(re.compile(r"(public|private|nested)\b")):
        op.attrs["sym_visibility"] = StrAttr(p.read_bare_id("visibility"))
    pos = p.here()
    op.attrs["sym_name"] = StrAttr(p.read_symbol("the function name (@name)"), pos=pos)
    p.expect("(", "to start the function's arguments")
    args, arg_attrs = [], []
    if not p.eat(")"):
        while True:
            apos = p.here()
            m = p.peek_re(re.compile(r"%([A-Za-z0-9_$.\-]+)"))
            if m:
                p.sc.pos = m.end()
                p.expect(":", "after an argument name")
                name = m.group(1)
            else:
                name = None  # a declaration: types only
            typ = p.parse_type()
            attrs = DictAttr(p.parse_attr_dict_body()) if p.peek() == "{" else DictAttr({})
            loc = p.opt_loc()
            args.append((name, typ, apos, loc))
            arg_attrs.append(attrs)
            if p.eat(")"):
                break
            p.expect(",", "or ')' in the function's arguments")
    results, res_attrs = [], []
    if p.eat("->"):
        if p.peek() == "(" and not _looks_like_function_type(p):
            p.expect("(")
            if not p.eat(")"):
                while True:
                    results.append(p.parse_type())
                    res_attrs.append(DictAttr(p.parse_attr_dict_body()) if p.peek() == "{"
                                     else DictAttr({}))
                    if p.eat(")"):
                        break
                    p.expect(",", "or ')' in the function's results")
        else:
            results.append(p.parse_type())
            res_attrs.append(DictAttr({}))
    op.attrs["function_type"] = TypeAttr(FunctionType(tuple(a[1] for a in args),
                                                       tuple(results)))
    op.attrs["arg_attrs"] = ArrayAttr(arg_attrs)
    op.attrs["res_attrs"] = ArrayAttr(res_attrs)
    if p.eat_keyword("attributes"):
        op.attrs.update(p.parse_attr_dict_body())
    if p.peek() == "{":
        if any(a[0] is None for a in args):
            p.error("a function with a body names its arguments (%arg0: type)", pos)
        saved = p.scopes
        p.scopes = []
        try:
            op.regions.append(p.region(op, [(a[0], a[1], a[2]) for a in args]))
        finally:
            p.scopes = saved
        for v, a in zip(op.regions[0][0].args, args):
            v.loc = a[3]
    return []


def _looks_like_function_type(p: MlirParser) -> bool:
    """``-> (t) -> t`` returns a function; ``-> (t {a}, t)`` lists results."""
    save = p.sc.pos
    try:
        p.skip_balanced("(", ")")
        return p.peek(2) == "->"
    finally:
        p.sc.pos = save


def _call(p, op, n):
    pos = p.here()
    op.attrs["callee"] = SymbolAttr(p.read_symbol("the callee (@name)"), pos=pos)
    p.expect("(")
    op.operands = p.use_list()
    p.expect(")")
    return _results(p, op, n)


def _tensor_cast(p, op, n):
    op.operands = [p.use()]
    attr_dict(p, op)
    p.expect(":")
    p.parse_type()
    p.expect_keyword("to")
    return [p.parse_type()]


def _sdy_mesh(p, op, n):
    pos = p.here()
    op.attrs["sym_name"] = StrAttr(p.read_symbol("the mesh name"), pos=pos)
    p.expect("=")
    mpos = p.here()
    body = p.skip_balanced("<", ">")
    op.attrs["mesh"] = DialectAttr("sdy", "mesh", body, mpos + 1, pos=mpos,
                                   text="#sdy.mesh" + p.text[mpos:p.sc.pos])
    attr_dict(p, op)
    return []


def _sdy_sharding_constraint(p, op, n):
    """``sdy.sharding_constraint`` and ``sdy.reshard``: ``%x <@mesh, [...]> : type``."""
    op.operands = [p.use()]
    spos = p.here()
    body = p.skip_balanced("<", ">")
    op.attrs["sharding"] = DialectAttr("sdy", "sharding", body, spos + 1, pos=spos,
                                       text="#sdy.sharding" + p.text[spos:p.sc.pos])
    return _results(p, op, n)


def _sdy_keyword_operand(key: str, reader):
    """``sdy.sharding_group %x group_id=0 : type`` and ``sdy.propagation_barrier %x
    allowed_direction=BACKWARD : type``."""
    def parse(p, op, n):
        op.operands = [p.use()]
        _keyword_value(p, op, key, key, reader)
        return _results(p, op, n)
    return parse


def _sdy_shardings(p: MlirParser) -> DialectAttr:
    """A stripped list of shardings ``[<@mesh, [...]>, ...]`` as the
    ``#sdy.sharding_per_value<[...]>`` attribute the generic form holds."""
    pos = p.here()
    p.skip_balanced("[", "]")
    body = p.text[pos:p.sc.pos]
    return DialectAttr("sdy", "sharding_per_value", body, pos, pos=pos,
                       text=f"#sdy.sharding_per_value<{body}>")


def _sdy_manual_axes(p: MlirParser) -> DialectAttr:
    """``{"x", "y"}`` as the ``#sdy<manual_axes{...}>`` attribute."""
    pos = p.here()
    p.skip_balanced("{", "}")
    body = "manual_axes" + p.text[pos:p.sc.pos]
    return DialectAttr("sdy", "", body, pos, pos=pos, text=f"#sdy<{body}>")


def _sdy_manual_computation(p, op, n):
    """``sdy.manual_computation(%x, ...) in_shardings=[...] out_shardings=[...]
    manual_axes={...} (%arg: type, ...) {body} : (types) -> types``: the body is isolated
    from the values around it (its own name scope, as a function's)."""
    p.expect("(")
    op.operands = p.use_list()
    p.expect(")")
    _keyword_value(p, op, "in_shardings", "in_shardings", _sdy_shardings)
    _keyword_value(p, op, "out_shardings", "out_shardings", _sdy_shardings)
    _keyword_value(p, op, "manual_axes", "manual_axes", _sdy_manual_axes)
    p.expect("(", "to start the body's arguments")
    args = []
    if not p.eat(")"):
        while True:
            apos = p.here()
            m = p.peek_re(re.compile(r"%([A-Za-z0-9_$.\-]+)"))
            if not m:
                p.error(f"expected a body argument (%name: type), found {p.sc.describe_next()}")
            p.sc.pos = m.end()
            p.expect(":", "after a body argument name")
            args.append((m.group(1), p.parse_type(), apos))
            if p.eat(")"):
                break
            p.expect(",", "or ')' in the body's arguments")
    saved = p.scopes
    p.scopes = []
    try:
        op.regions.append(p.region(op, args))
    finally:
        p.scopes = saved
    attr_dict(p, op)
    p.expect(":", f"and the type of '{op.name}'")
    pos = p.here()
    ftype = p.parse_type()
    if not isinstance(ftype, FunctionType):
        p.error(f"expected a function type for '{op.name}', found {ftype}", pos)
    _check_inputs(p, op, ftype, pos)
    return list(ftype.results)


def _chlo_top_k(p, op, n):
    p.expect("(")
    op.operands = [p.use()]
    p.expect(",")
    _keyword_value(p, op, "k", "k", _int)
    if p.eat(","):
        _keyword_value(p, op, "is_stable", "is_stable", lambda p: p.parse_attr(typed=False))
    p.expect(")")
    return _results(p, op, n)


def _chlo_scan(p, op, n):
    """``chlo.scan(%inputs) inits(%inits) dimension=0 attributes? {region} : type``."""
    p.expect("(")
    inputs = p.use_list()
    p.expect(")")
    p.expect_keyword("inits")
    p.expect("(")
    inits = p.use_list()
    p.expect(")")
    op.operands = inputs + inits
    op.attrs["num_inputs"] = IntAttr(len(inputs))
    _keyword_value(p, op, "dimension", "dimension", _int)
    if p.eat_keyword("attributes"):
        op.attrs.update(p.parse_attr_dict_body())
    op.regions.append(p.region(op))
    p.expect(":")
    pos = p.here()
    ftype = p.parse_type()
    if not isinstance(ftype, FunctionType):
        p.error(f"expected a function type for '{op.name}', found {ftype}", pos)
    _check_inputs(p, op, ftype, pos)
    return list(ftype.results)


_UNARY = (
    "abs cbrt ceil convert count_leading_zeros cosine exponential exponential_minus_one "
    "floor imag is_finite log log_plus_one logistic not negate popcnt real round_nearest_afz "
    "round_nearest_even rsqrt sign sine sqrt tan tanh uniform_quantize uniform_dequantize"
).split()
_BINARY = (
    "add atan2 complex divide maximum minimum multiply power remainder shift_left "
    "shift_right_arithmetic shift_right_logical subtract and or xor"
).split()
_OPERANDS_ONLY = _UNARY + _BINARY + [
    "select", "clamp", "after_all", "dynamic_update_slice", "bitcast_convert", "reshape",
    "dynamic_reshape", "real_dynamic_slice", "dynamic_pad",
]
_CHLO = (
    "acos acosh asin asinh atan atanh bessel_i1e conj cosh sinh tan digamma erf erf_inv erfc "
    "is_inf is_neg_inf is_pos_inf lgamma square broadcast_add broadcast_atan2 broadcast_divide "
    "broadcast_maximum broadcast_minimum broadcast_multiply broadcast_next_after "
    "broadcast_polygamma broadcast_power broadcast_remainder broadcast_shift_left "
    "broadcast_shift_right_arithmetic broadcast_shift_right_logical broadcast_subtract "
    "broadcast_zeta broadcast_and broadcast_or broadcast_xor broadcast_complex "
    "broadcast_compare broadcast_select next_after polygamma zeta mulhi _asin_acos_kernel"
).split()

FORMATS = {f"stablehlo.{name}": _operands_only() for name in _OPERANDS_ONLY}
FORMATS.update({f"chlo.{name}": _operands_only() for name in _CHLO})
FORMATS.update({
    "stablehlo.constant": _constant,
    "stablehlo.iota": _iota,
    "stablehlo.dynamic_iota": _dynamic_iota,
    "stablehlo.create_token": _operands_only("all"),
    "stablehlo.replica_id": _operands_only("all"),
    "stablehlo.partition_id": _operands_only("all"),
    "stablehlo.get_tuple_element": _get_tuple_element,
    "stablehlo.tuple": _tuple,
    "stablehlo.compare": _compare,
    "stablehlo.slice": _slice,
    "stablehlo.dynamic_slice": _dynamic_slice,
    "stablehlo.broadcast": _operands_then_keywords(("sizes", "broadcast_sizes", _int_list)),
    "stablehlo.broadcast_in_dim": _operands_then_keywords(
        ("dims", "broadcast_dimensions", _int_list)),
    "stablehlo.dynamic_broadcast_in_dim": _dynamic_broadcast_in_dim,
    "stablehlo.cholesky": _cholesky,
    "stablehlo.concatenate": _concatenate,
    "stablehlo.composite": _composite,
    "stablehlo.convolution": _convolution,
    "stablehlo.custom_call": _custom_call,
    "stablehlo.dot": _dot,
    "stablehlo.dot_general": _dot_general,
    "stablehlo.einsum": _operands_then_keywords(("config", "einsum_config",
                                                 lambda p: p.parse_attr(typed=False))),
    "stablehlo.unary_einsum": _operands_then_keywords(("config", "einsum_config",
                                                       lambda p: p.parse_attr(typed=False))),
    "stablehlo.fft": _operands_then_keywords(
        ("type", "fft_type", lambda p: _enum(p, "an FFT type")),
        ("length", "fft_length", _int_list)),
    "stablehlo.get_dimension_size": _operands_then_keywords(("dim", "dimension", _int)),
    "stablehlo.set_dimension_size": _operands_then_keywords(("dim", "dimension", _int)),
    "stablehlo.reverse": _operands_then_keywords(("dims", "dimensions", _int_list)),
    "stablehlo.pad": _operands_then_keywords(
        ("low", "edge_padding_low", _int_list), ("high", "edge_padding_high", _int_list),
        ("interior", "interior_padding", _int_list)),
    "stablehlo.transpose": _operands_then_keywords(("dims", "permutation", _int_list)),
    "stablehlo.rng": _operands_then_keywords(
        ("distribution", "rng_distribution", lambda p: _enum(p, "an RNG distribution"))),
    "stablehlo.rng_bit_generator": _operands_then_keywords(
        ("algorithm", "rng_algorithm", lambda p: _enum(p, "an RNG algorithm"))),
    "stablehlo.reduce_precision": _reduce_precision,
    "stablehlo.optimization_barrier": _optimization_barrier,
    "stablehlo.return": _return,
    "stablehlo.while": _while,
    "stablehlo.reduce": _reduce,
    "func.func": _func,
    "func.return": _return,
    "func.call": _call,
    "arith.constant": _constant,
    "tensor.cast": _tensor_cast,
    "chlo.constant": _constant,
    "chlo.top_k": _chlo_top_k,
    "chlo.scan": _chlo_scan,
    "sdy.mesh": _sdy_mesh,
    "sdy.sharding_constraint": _sdy_sharding_constraint,
    "sdy.reshard": _sdy_sharding_constraint,
    "sdy.sharding_group": _sdy_keyword_operand("group_id", _int),
    "sdy.propagation_barrier": _sdy_keyword_operand(
        "allowed_direction", lambda p: _enum(p, "a propagation direction")),
    "sdy.manual_computation": _sdy_manual_computation,
    "sdy.return": _return,
})

#: Ops of the func dialect may be written without the prefix inside a function.
_DEFAULT_DIALECT = {"return": "func.return", "call": "func.call", "func": "func.func",
                    "constant": "func.constant"}


def parse_custom(p: MlirParser, name: str, start: int, name_pos: int, block: Block,
                 n_names: int):
    """Read an op in its custom syntax after its name. Returns (op, result types)."""
    name = _DEFAULT_DIALECT.get(name, name)
    op = Op(name, pos=start, name_pos=name_pos, parent=block)
    fmt = FORMATS.get(name)
    if fmt is None:
        dialect = name.split(".", 1)[0]
        if dialect in ("stablehlo", "chlo", "func", "mhlo", "sdy", "arith", "tensor", "check",
                       "interpreter"):
            if p.peek() == "(" and name.startswith("stablehlo."):
                p.error(f"'{name}' has no custom syntax: write it in the generic form "
                        f"\"{name}\"(...) : (...) -> ...", name_pos)
            p.error(f"unknown op '{name}' (or one whose custom syntax xlapy does not read: "
                    f"write it in the generic form \"{name}\"(...) {{...}} : (...) -> ...)",
                    name_pos)
        p.error(f"unknown op '{name}'", name_pos)
    return op, fmt(p, op, n_names)

