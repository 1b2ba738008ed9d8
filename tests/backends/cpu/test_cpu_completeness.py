"""Every opcode xlapy knows (hlo/opcodes.py: XLA's HLO opcodes, the Operation Semantics
page's operations among them) on f32, f64, bf16, s32, u32 and pred, wherever the op allows
the type (the parser's shape inference decides), has a compiled path on the CPU backend, or
is in ONE explicit list below with the reason it stays on the interpreter. The test fails
when an (opcode, type) runs interpreted without being listed (a silent fallback, also inside
a fusion the passes made of it), when a listed one compiles (the list must shrink as paths
are added), and when an opcode has no snippet. The planner's own record
(``CpuProgram.interpreted()``, the reasons of backends/cpu/emitters.py) is what is checked.

Each type's instructions go into one module (shared parameters, one root tuple), compiled
once."""

from __future__ import annotations

import pytest

from xlapy.backends.cpu import backend as be
from xlapy.backends.cpu import emitters
from xlapy.errors import XlaError
from xlapy.hlo.opcodes import OPCODE_NAMES
from xlapy.parser import parse_hlo_module

TYPES = ("f32", "f64", "bf16", "s32", "u32", "pred")


_TOKENS = "host transfers and tokens: the runtime's queues and channels, no data to compute"
_DYNAMIC = "dynamic shapes: the interpreter tracks runtime sizes"
_NOT_INT = "no generator computes it on this type (xlapy's shape inference accepts it; XLA's " \
    "elemental emitter has integer forms only)"

#: (opcode, type, "float" or "*") -> why it runs on the interpreter. THE list.
INTERPRETED = {
    ("convolution", "s32"): "integer convolutions: no integer GEMM path (BLAS has none; the "
                            "dots' NumPy integer matmul is not wired to convolution)",
    ("convolution", "u32"): "integer convolutions: as s32",
    ("convolution", "pred"): "pred convolutions: as integer convolutions",
    ("rng", "*"): "rng (RngUniform/RngNormal): the interpreter's generator state; no native "
                  "generator with its streams",
    ("rng-get-and-update-state", "*"): "the generator state lives in the interpreter",
    ("set-dimension-size", "*"): _DYNAMIC,
    ("dynamic-reshape", "*"): _DYNAMIC,
    ("shift-left", "float"): "shifts of floats: " + _NOT_INT,
    ("shift-right-arithmetic", "float"): "shifts of floats: " + _NOT_INT,
    ("shift-right-logical", "float"): "shifts of floats: " + _NOT_INT,
    ("mulhi", "float"): "mulhi of floats: " + _NOT_INT,
    ("mulhi", "pred"): "mulhi of preds: " + _NOT_INT,
    ("ragged-dot", "*"): "ragged-dot: no emitter (a grouped GEMM; the interpreter's kernel)",
    ("scaled-dot", "*"): "scaled-dot: no emitter (block-scaled operands; the interpreter's "
                         "kernel)",
    ("scan", "*"): "scan: no emitter plans the scan instruction (a loop over a called "
                   "computation)",
    ("async-start", "*"): "async wrappers: no emitter plans the wrapped computation as a call",
    ("async-update", "*"): "async wrappers: as async-start",
    ("async-done", "*"): "async wrappers: as async-start",
    ("copy-start", "*"): "copy-start/-done: no emitter (a copy between memory spaces; "
                         "XLA:CPU has one memory space)",
    ("copy-done", "*"): "copy-start/-done: as copy-start",
    ("add-dependency", "*"): "add-dependency: no emitter aliases its first operand (the "
                             "interpreter passes it through)",
    ("domain", "*"): "domain: no emitter aliases its operand (the interpreter passes it through)",
    ("ragged-all-to-all", "*"): "collectives: no native code for ragged-all-to-all (the "
                                "runtime's collectives)",
    ("all-gather-start", "*"): "collectives: native code for all-gather, not for its "
                               "-start form (the runtime's collectives)",
    ("collective-permute-start", "*"): "collectives: native code for collective-permute, not "
                                       "for its -start form (the runtime's collectives)",
    ("after-all", "*"): _TOKENS,
    ("infeed", "*"): _TOKENS,
    ("outfeed", "*"): _TOKENS,
    ("send", "*"): _TOKENS,
    ("send-done", "*"): _TOKENS,
    ("recv", "*"): _TOKENS,
    ("recv-done", "*"): _TOKENS,
}

# Snippets: lines using the entry's shared parameters (``_params``: a, b T[4,6], s T[],
# pr pred[4,6], k s32[], v T[6]...) and computations (``_aux``); the last instruction is the
# op under test, named after its opcode, the ones before it its helpers (their opcodes are
# tested by their own snippets). {T}: the element type, {W}: an integer type of its width,
# {U}: an unsigned one, {C}: the complex type, {V}: two values.
SNIPPETS = {
    "abs": "abs = {T}[4,6] abs(a)",
    "ceil": "ceil = {T}[4,6] ceil(a)",
    "cosine": "cosine = {T}[4,6] cosine(a)",
    "exponential": "exponential = {T}[4,6] exponential(a)",
    "floor": "floor = {T}[4,6] floor(a)",
    "imag": "imag = {T}[4,6] imag(a)",
    "real": "real = {T}[4,6] real(a)",
    "is-finite": "is-finite = pred[4,6] is-finite(a)",
    "log": "log = {T}[4,6] log(a)",
    "not": "not = {T}[4,6] not(a)",
    "logistic": "logistic = {T}[4,6] logistic(a)",
    "popcnt": "popcnt = {T}[4,6] popcnt(a)",
    "negate": "negate = {T}[4,6] negate(a)",
    "rsqrt": "rsqrt = {T}[4,6] rsqrt(a)",
    "sign": "sign = {T}[4,6] sign(a)",
    "sqrt": "sqrt = {T}[4,6] sqrt(a)",
    "cbrt": "cbrt = {T}[4,6] cbrt(a)",
    "sine": "sine = {T}[4,6] sine(a)",
    "tan": "tan = {T}[4,6] tan(a)",
    "acos": "acos = {T}[4,6] acos(a)",
    "asin": "asin = {T}[4,6] asin(a)",
    "atanh": "atanh = {T}[4,6] atanh(a)",
    "acosh": "acosh = {T}[4,6] acosh(a)",
    "asinh": "asinh = {T}[4,6] asinh(a)",
    "cosh": "cosh = {T}[4,6] cosh(a)",
    "sinh": "sinh = {T}[4,6] sinh(a)",
    "erf": "erf = {T}[4,6] erf(a)",
    "exponential-minus-one": "exponential-minus-one = {T}[4,6] exponential-minus-one(a)",
    "log-plus-one": "log-plus-one = {T}[4,6] log-plus-one(a)",
    "count-leading-zeros": "count-leading-zeros = {T}[4,6] count-leading-zeros(a)",
    "copy": "copy = {T}[4,6] copy(a)",
    "tanh": "tanh = {T}[4,6] tanh(a)",
    "round-nearest-afz": "round-nearest-afz = {T}[4,6] round-nearest-afz(a)",
    "round-nearest-even": "round-nearest-even = {T}[4,6] round-nearest-even(a)",
    "add": "add = {T}[4,6] add(a, b)",
    "subtract": "subtract = {T}[4,6] subtract(a, b)",
    "multiply": "multiply = {T}[4,6] multiply(a, b)",
    "divide": "divide = {T}[4,6] divide(a, b)",
    "remainder": "remainder = {T}[4,6] remainder(a, b)",
    "maximum": "maximum = {T}[4,6] maximum(a, b)",
    "minimum": "minimum = {T}[4,6] minimum(a, b)",
    "power": "power = {T}[4,6] power(a, b)",
    "atan2": "atan2 = {T}[4,6] atan2(a, b)",
    "mulhi": "mulhi = {T}[4,6] mulhi(a, b)",
    "complex": "complex = {C}[4,6] complex(a, b)",
    "and": "and = {T}[4,6] and(a, b)",
    "or": "or = {T}[4,6] or(a, b)",
    "xor": "xor = {T}[4,6] xor(a, b)",
    "shift-left": "shift-left = {T}[4,6] shift-left(a, b)",
    "shift-right-arithmetic": "shift-right-arithmetic = {T}[4,6] shift-right-arithmetic(a, b)",
    "shift-right-logical": "shift-right-logical = {T}[4,6] shift-right-logical(a, b)",
    "compare": "compare = pred[4,6] compare(a, b), direction=LT",
    "select": "select = {T}[4,6] select(pr, a, b)",
    "clamp": "clamp = {T}[4,6] clamp(s, a, s)",
    "convert": "convert = f32[4,6] convert(a)",
    "bitcast-convert": "bitcast-convert = {W}[4,6] bitcast-convert(a)",
    "stochastic-convert": "rb = {U}[4,6] bitcast-convert(a)\n"
                          "stochastic-convert = {W}[4,6] stochastic-convert(a, rb)",
    "reduce-precision": "reduce-precision = {T}[4,6] reduce-precision(a), exponent_bits=5, "
                        "mantissa_bits=2",
    "broadcast": "broadcast = {T}[3,4,6] broadcast(a), dimensions={1,2}",
    "concatenate": "concatenate = {T}[8,6] concatenate(a, b), dimensions={0}",
    "slice": "slice = {T}[2,3] slice(a), slice={[1:3], [0:6:2]}",
    "dynamic-slice": "dynamic-slice = {T}[2,3] dynamic-slice(a, k, k), dynamic_slice_sizes={2,3}",
    "dynamic-update-slice": "dynamic-update-slice = {T}[4,6] dynamic-update-slice(a, upd, k, k)",
    "pad": "pad = {T}[7,9] pad(a, s), padding=1_2x0_3",
    "reshape": "reshape = {T}[24] reshape(a)",
    "bitcast": "bitcast = {T}[6,4] bitcast(a)",
    "dynamic-reshape": "dynamic-reshape = {T}[<=24] dynamic-reshape(a, k)",
    "set-dimension-size": "set-dimension-size = {T}[4,<=6] set-dimension-size(a, k), "
                          "dimensions={1}",
    "transpose": "transpose = {T}[6,4] transpose(a), dimensions={1,0}",
    "reverse": "reverse = {T}[4,6] reverse(a), dimensions={1}",
    "iota": "iota = {T}[4,6] iota(), iota_dimension=1",
    "constant": "constant = {T}[2] constant({{V}})",
    "parameter": "parameter = {T}[2] parameter(19)",
    "tuple": "tuple = ({T}[4,6], {T}[]) tuple(a, s)",
    "get-tuple-element": "tp = ({T}[4,6], {T}[]) tuple(a, s)\n"
                         "get-tuple-element = {T}[] get-tuple-element(tp), index=1",
    "reduce": "reduce = {T}[4] reduce(a, s), dimensions={1}, to_apply=red",
    "reduce-window": "reduce-window = {T}[4,3] reduce-window(a, s), window={size=1x2 stride=1x2}, "
                     "to_apply=red",
    "gather": "gather = {T}[3,6] gather(a, ix), offset_dims={1}, collapsed_slice_dims={0}, "
              "start_index_map={0}, index_vector_dim=1, slice_sizes={1,6}",
    "scatter": "scatter = {T}[4,6] scatter(a, ix, u), update_window_dims={1}, "
               "inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, "
               "to_apply=red",
    "select-and-scatter": "select-and-scatter = {T}[4,6] select-and-scatter(a, src3, s), "
                          "window={size=1x2 stride=1x2}, select=sel, scatter=red",
    "dot": "dot = {T}[4,4] dot(a, m), lhs_contracting_dims={1}, rhs_contracting_dims={0}",
    "convolution": "cl = {T}[1,4,6,1] reshape(a)\ncr = {T}[2,2,1,1] slice(cl2), "
                   "slice={[0:2], [0:2], [0:1], [0:1]}\n"
                   "convolution = {T}[1,3,5,1] convolution(cl, cr), window={size=2x2}, "
                   "dim_labels=b01f_01io->b01f",
    "ragged-dot": "ragged-dot = {T}[4,4] ragged-dot(a, g3, gs), lhs_contracting_dims={1}, "
                  "rhs_contracting_dims={1}, lhs_ragged_dims={0}, rhs_group_dims={0}",
    "scaled-dot": "scaled-dot = {T}[4,4] scaled-dot(a, m, sl, sr), lhs_contracting_dims={1}, "
                  "rhs_contracting_dims={0}",
    "fft": "fft = {C}[4,4] fft(a), fft_type=RFFT, fft_length={6}",
    "sort": "sort = {T}[4,6] sort(a), dimensions={1}, is_stable=true, to_apply=cmp",
    "topk": "topk = ({T}[4,2], s32[4,2]) topk(a), k=2, largest=true",
    "map": "map = {T}[4,6] map(a, b), dimensions={0,1}, to_apply=red",
    "fusion": "fusion = {T}[4,6] fusion(a, b), kind=kLoop, calls=fz",
    "scan": "scan = ({T}[4,6], {T}[6]) scan(a, v), dimensions={0}, num_carries=1, to_apply=stp",
    "async-start": "async-start = (({T}[4,6], {T}[4,6]), {T}[4,6], u32[]) async-start(a, b), "
                   "calls=aw1",
    "async-update": "aus = (({T}[4,6], {T}[4,6]), {T}[4,6], u32[]) async-start(a, b), "
                    "calls=aw2\nasync-update = (({T}[4,6], {T}[4,6]), {T}[4,6], u32[]) "
                    "async-update(aus), calls=aw2",
    "async-done": "ads = (({T}[4,6], {T}[4,6]), {T}[4,6], u32[]) async-start(a, b), calls=aw3\n"
                  "async-done = {T}[4,6] async-done(ads), calls=aw3",
    "call": "call = {T}[4,6] call(a, b), to_apply=red2",
    "while": "wi = ({T}[4,6], s32[]) tuple(a, k)\n"
             "while = ({T}[4,6], s32[]) while(wi), condition=wc, body=wb",
    "conditional": "conditional = {T}[4,6] conditional(pr0, a, b), true_computation=br, "
                   "false_computation=br",
    "rng": "rng = {T}[4,6] rng(s, s), distribution=rng_uniform",
    "rng-get-and-update-state": "rng-get-and-update-state = u64[2] "
                                "rng-get-and-update-state(), delta=1",
    "rng-bit-generator": "rk = u64[2] constant({1, 2})\nrng-bit-generator = (u64[2], {T}[4,6]) "
                         "rng-bit-generator(rk), algorithm=rng_default",
    "cholesky": "cs = {T}[4,4] slice(a), slice={[0:4], [0:4]}\n"
                "cholesky = {T}[4,4] cholesky(cs), lower=true",
    "triangular-solve": "ts = {T}[4,4] slice(a), slice={[0:4], [0:4]}\n"
                        "triangular-solve = {T}[4,6] triangular-solve(ts, a), left_side=true, "
                        "lower=true, transpose_a=NO_TRANSPOSE",
    "all-gather": "all-gather = {T}[4,6] all-gather(a), dimensions={0}, replica_groups={}",
    "all-reduce": "all-reduce = {T}[4,6] all-reduce(a), replica_groups={}, to_apply=red",
    "all-to-all": "all-to-all = {T}[4,6] all-to-all(a), dimensions={0}, replica_groups={}",
    "collective-permute": "collective-permute = {T}[4,6] collective-permute(a), "
                          "source_target_pairs={}",
    "reduce-scatter": "reduce-scatter = {T}[4,6] reduce-scatter(a), dimensions={0}, "
                      "replica_groups={}, to_apply=red",
    "replica-id": "replica-id = u32[] replica-id()",
    "partition-id": "partition-id = u32[] partition-id()",
    "collective-broadcast": "collective-broadcast = {T}[4,6] collective-broadcast(a), "
                            "replica_groups={}",
    "ragged-all-to-all": "ragged-all-to-all = {T}[4,6] ragged-all-to-all(a, b, o1, o1, o1, o1), "
                         "replica_groups={}",
    "all-reduce-start": "all-reduce-start = {T}[4,6] all-reduce-start(a), replica_groups={}, "
                        "to_apply=red",
    "all-reduce-done": "ars = {T}[4,6] all-reduce-start(a), replica_groups={}, to_apply=red\n"
                       "all-reduce-done = {T}[4,6] all-reduce-done(ars)",
    "all-gather-start": "all-gather-start = ({T}[4,6], {T}[4,6]) all-gather-start(a), "
                        "replica_groups={}, dimensions={0}",
    "all-gather-done": "ags = ({T}[4,6], {T}[4,6]) all-gather-start(a), replica_groups={}, "
                       "dimensions={0}\nall-gather-done = {T}[4,6] all-gather-done(ags)",
    "collective-permute-start": "collective-permute-start = ({T}[4,6], {T}[4,6]) "
                                "collective-permute-start(a), source_target_pairs={}",
    "collective-permute-done": "cps = ({T}[4,6], {T}[4,6]) collective-permute-start(a), "
                               "source_target_pairs={}\ncollective-permute-done = {T}[4,6] "
                               "collective-permute-done(cps)",
    "copy-start": "copy-start = ({T}[4,6], {T}[4,6], u32[]) copy-start(a)",
    "copy-done": "cst = ({T}[4,6], {T}[4,6], u32[]) copy-start(a)\n"
                 "copy-done = {T}[4,6] copy-done(cst)",
    "batch-norm-training": "batch-norm-training = ({T}[4,6], {T}[6], {T}[6]) "
                           "batch-norm-training(a, v, v), epsilon=0.001, feature_index=1",
    "batch-norm-grad": "batch-norm-grad = ({T}[4,6], {T}[6], {T}[6]) batch-norm-grad(a, v, v, "
                       "v, b), epsilon=0.001, feature_index=1",
    "batch-norm-inference": "sc = {T}[1,6] slice(u), slice={[0:1], [0:6]}\n"
                            "sc1 = {T}[6] reshape(sc)\n"
                            "batch-norm-inference = {T}[4,6] batch-norm-inference(a, sc1, sc1, "
                            "sc1, sc1), epsilon=0.001, feature_index=1",
    "get-dimension-size": "get-dimension-size = s32[] get-dimension-size(a), dimensions={1}",
    "opt-barrier": "opt-barrier = {T}[4,6] opt-barrier(a)",
    "after-all": "after-all = token[] after-all()",
    "add-dependency": "adt = token[] after-all()\nadd-dependency = {T}[4,6] add-dependency(a, adt)",
    "domain": "domain = {T}[4,6] domain(a), domain={kind=\"sharding\", entry={maximal device=0}, "
              "exit={maximal device=1}}",
    "infeed": "ift = token[] after-all()\ninfeed = ({T}[4,6], token[]) infeed(ift)",
    "outfeed": "oft = token[] after-all()\noutfeed = token[] outfeed(a, oft)",
    "send": "sdt = token[] after-all()\nsend = ({T}[4,6], u32[], token[]) send(a, sdt), "
            "channel_id=7",
    "send-done": "sdt2 = token[] after-all()\nsds = ({T}[4,6], u32[], token[]) send(a, sdt2), "
                 "channel_id=8\nsend-done = token[] send-done(sds), channel_id=8",
    "recv": "rvt = token[] after-all()\nrecv = ({T}[4,6], u32[], token[]) recv(rvt), channel_id=9",
    "recv-done": "rvt2 = token[] after-all()\nrvs = ({T}[4,6], u32[], token[]) recv(rvt2), "
                 "channel_id=10\nrecv-done = ({T}[4,6], token[]) recv-done(rvs), channel_id=10",
    "custom-call": None,  # a user's function: not an op of its own
}
# ops in the table above that are only the same instruction under another builder name
SPEC_NAMES_COVERED = ("Broadcast", "BroadcastInDim", "ConcatInDim", "Conv",
                      "ConvWithGeneralPadding", "ConvertElementType", "BitcastConvertType",
                      "DotGeneral", "Eq", "Rev", "RngNormal", "RngUniform", "Sort", "Select")

UNSIGNED = {"f32": "u32", "f64": "u64", "bf16": "u16", "s32": "u32", "u32": "u32",
            "pred": "u8"}
WIDTH = {"f32": "s32", "f64": "s64", "bf16": "s16", "s32": "f32", "u32": "s32", "pred": "s8"}


def _aux(t):
    op = "or" if t == "pred" else "add"
    ctype = ", type=TOTALORDER" if t in ("f32", "f64", "bf16") else ""
    return f"""red {{
  x = {t}[] parameter(0)
  y = {t}[] parameter(1)
  ROOT r = {t}[] {op}(x, y)
}}
red2 {{
  x = {t}[4,6] parameter(0)
  y = {t}[4,6] parameter(1)
  ROOT r = {t}[4,6] {op}(x, y)
}}
sel {{
  x = {t}[] parameter(0)
  y = {t}[] parameter(1)
  ROOT r = pred[] compare(x, y), direction=GE
}}
cmp {{
  x = {t}[] parameter(0)
  y = {t}[] parameter(1)
  ROOT r = pred[] compare(x, y), direction=LT{ctype}
}}
wc {{
  w = ({t}[4,6], s32[]) parameter(0)
  i = s32[] get-tuple-element(w), index=1
  n = s32[] constant(2)
  ROOT c = pred[] compare(i, n), direction=LT
}}
wb {{
  w = ({t}[4,6], s32[]) parameter(0)
  x = {t}[4,6] get-tuple-element(w), index=0
  i = s32[] get-tuple-element(w), index=1
  one = s32[] constant(1)
  j = s32[] add(i, one)
  y = {t}[4,6] {op}(x, x)
  ROOT r = ({t}[4,6], s32[]) tuple(y, j)
}}
fz {{
  x = {t}[4,6] parameter(0)
  y = {t}[4,6] parameter(1)
  ROOT r = {t}[4,6] {op}(x, y)
}}
aw1 {{
  x = {t}[4,6] parameter(0)
  y = {t}[4,6] parameter(1)
  ROOT r = {t}[4,6] {op}(x, y)
}}
aw2 {{
  x = {t}[4,6] parameter(0)
  y = {t}[4,6] parameter(1)
  ROOT r = {t}[4,6] {op}(x, y)
}}
aw3 {{
  x = {t}[4,6] parameter(0)
  y = {t}[4,6] parameter(1)
  ROOT r = {t}[4,6] {op}(x, y)
}}
stp {{
  x = {t}[6] parameter(0)
  c = {t}[6] parameter(1)
  y = {t}[6] {op}(x, c)
  ROOT r = ({t}[6], {t}[6]) tuple(y, y)
}}
br {{
  x = {t}[4,6] parameter(0)
  ROOT y = {t}[4,6] {op}(x, x)
}}
"""


def _params(t):
    return (f"  a = {t}[4,6] parameter(0)\n  b = {t}[4,6] parameter(1)\n"
            f"  s = {t}[] parameter(2)\n  f = f32[4,6] parameter(3)\n"
            f"  pr = pred[4,6] parameter(4)\n  k = s32[] parameter(5)\n"
            f"  ix = s32[3,1] parameter(6)\n  u = {t}[3,6] parameter(7)\n"
            f"  m = {t}[6,4] parameter(8)\n  pr0 = pred[] parameter(9)\n"
            f"  upd = {t}[2,3] parameter(10)\n  src3 = {t}[4,3] parameter(11)\n"
            f"  cl2 = {t}[2,2,1,1] parameter(12)\n  v = {t}[6] parameter(13)\n"
            f"  g3 = {t}[2,6,4] parameter(14)\n  gs = s32[2] parameter(15)\n"
            f"  sl = {t}[4,1] parameter(16)\n  sr = {t}[1,4] parameter(17)\n"
            f"  o1 = s64[1] parameter(18)\n")


def _name(opcode):
    return "op_" + opcode.replace("-", "_")


def _lines(opcode, t):
    text = SNIPPETS[opcode].replace("{T}", t).replace("{W}", WIDTH[t]).replace(
        "{U}", UNSIGNED[t]).replace(
        "{V}", "true, false" if t == "pred" else "1, 0").replace(
        "{C}", "c128" if t == "f64" else "c64")
    lines = text.split("\n")
    head, rest = lines[-1].split(" = ", 1)
    assert head == opcode
    lines[-1] = f"{_name(opcode)} = {rest}"
    return "\n".join(f"  {line}" for line in lines)


def _module(t, ops):
    body = "\n".join(_lines(op, t) for op in ops)
    root = ", ".join(_name(op) for op in ops)
    return (f"HloModule complete_{t}\n{_aux(t)}\nENTRY e {{\n{_params(t)}{body}\n"
            f"  ROOT result = tuple({root})\n}}\n")


def _valid(t, op) -> bool:
    """The op allows the type: its one-op module parses (shape inference, the verifier)."""
    try:
        parse_hlo_module(_module(t, [op]))
    except XlaError:
        return False
    return True


def _listed(op, t):
    cls = "float" if t in ("f32", "f64", "bf16") else None
    return INTERPRETED.get((op, t)) or INTERPRETED.get((op, cls)) or \
        INTERPRETED.get((op, "*"))


OPS = [op for op, snippet in SNIPPETS.items() if snippet is not None]


def _base(name):
    """An instruction's name without the suffix the passes give clones (``x.1``)."""
    head, _, tail = name.rpartition(".")
    return head if head and tail.isdigit() else name


def _helpers(ops, t):
    """The names of the snippets' helper instructions (lines before the op's own)."""
    return {line.split(" = ", 1)[0].strip() for op in ops
            for line in _lines(op, t).split("\n")[:-1]}


def _interpreted_ops(program, ops, t):
    """op -> the interpreted() rows it is behind: the op itself, or a fusion the passes
    made of it (its fused instructions are looked up by name). A row that is neither, nor
    a snippet's helper (tested as its own op), nor the root tuple, fails: nothing runs on
    the interpreter unaccounted for."""
    by_name = {_name(op): op for op in ops}
    helpers = _helpers(ops, t)
    fused = {i.name: i for c in program.module.computations for i in c.instructions
             if i.opcode == "fusion"}
    out, stray = {}, []
    for name, opcode, reason in program.interpreted():
        names = [name]
        if opcode == "fusion" and name in fused:
            names = [i.name for i in fused[name].attrs["calls"].instructions]
        found = {by_name[_base(n)] for n in names if _base(n) in by_name}
        for op in found:
            out.setdefault(op, []).append((name, opcode, reason))
        if not found and _base(name) not in helpers and name != "result":
            stray.append((name, opcode, reason))
    assert not stray, f"{t}: interpreted, from no snippet: {stray}"
    return out


@pytest.mark.parametrize("t", TYPES)
def test_every_op_compiles_or_is_listed(t):
    ops = [op for op in OPS if _valid(t, op)]
    assert len(ops) >= 25, ops  # the snippets parse: the test checks something
    program = be.compile_module(parse_hlo_module(_module(t, ops)))
    interpreted = _interpreted_ops(program, ops, t)
    silent = {op: rows for op, rows in interpreted.items() if not _listed(op, t)}
    assert not silent, f"{t}: interpreted without a listed reason: {silent}"
    stale = [op for op in ops if _listed(op, t) and op not in interpreted]
    assert not stale, f"{t}: listed as interpreted but compiled (update INTERPRETED): {stale}"
    for op, rows in interpreted.items():
        for _, _, reason in rows:
            assert reason, f"{t}: %{op} interpreted with no reason recorded"


def test_every_opcode_has_a_snippet():
    """Every opcode xlapy knows is covered (custom-call by the tests below)."""
    assert set(SNIPPETS) == OPCODE_NAMES, sorted(OPCODE_NAMES ^ set(SNIPPETS))


def test_every_snippet_parses_on_some_type():
    """An op valid on none of the types is a broken snippet, not an op left out."""
    broken = [op for op in OPS if not any(_valid(t, op) for t in TYPES)]
    assert not broken, broken


def test_the_list_is_keyed_by_known_opcodes_and_types():
    for (op, t), reason in INTERPRETED.items():
        assert op in SNIPPETS and (t in ("*", "float") or t in TYPES) and reason
    for (op, t) in INTERPRETED:  # a row for an (op, type) no snippet is valid on is stale
        types = TYPES if t == "*" else ("f32", "f64", "bf16") if t == "float" else (t,)
        assert any(_valid(ty, op) for ty in types), (op, t)


def test_reasons_name_the_emitter():
    text = _module("f32", ["ragged-dot"])
    program = be.compile_module(parse_hlo_module(text))
    ((_, _, reason),) = [r for r in program.interpreted() if r[1] == "ragged-dot"]
    assert reason == "no emitter has an entry for (ragged-dot, float)"
    table = {t.name: t for t in emitters.tables()}
    assert table["elemental"].has("add", "float") and not table["elemental"].has("scatter",
                                                                                 "float")
    # a gather alone is the gather kernel's (its table comes first); fused, the elemental
    # generator computes its elements
    assert table["gather_scatter"].has("gather", "float")
    assert table["elemental"].has("gather", "float")
    names = [t.name for t in emitters.tables()]
    assert names.index("gather_scatter") < names.index("elemental")
    assert table["sort"].has("sort", "pred")


#: jaxlib's LAPACK custom-call targets (``lapack_<t><routine>_ffi``, the ones the interpreter
#: runs) that stay interpreted: routine -> why. THE list for custom calls.
INTERPRETED_LAPACK: dict[str, str] = {}

_R = {"s": "f32", "d": "f64", "c": "f32", "z": "f64"}
_C = {"s": "c64", "d": "c128", "c": "c64", "z": "c128"}
# routine -> (operands, result) of a 3x3 call, {T}: the element type, {R}: its real type,
# {C}: the complex type of its eigenvectors
LAPACK_CALLS = {
    "potrf": (["{T}[3,3]"], "({T}[3,3], s32[])", "{uplo = 76 : ui8}"),
    "trsm": (["{T}[3,3]", "{T}[3,2]"], "{T}[3,2]",
             "{diag = 78 : ui8, side = 76 : ui8, trans_x = 78 : ui8, uplo = 76 : ui8}"),
    "getrf": (["{T}[3,3]"], "({T}[3,3], s32[3], s32[])", "{}"),
    "geqrf": (["{T}[3,3]"], "({T}[3,3], {T}[3])", "{}"),
    "orgqr": (["{T}[3,3]", "{T}[3]"], "{T}[3,3]", "{}"),
    "ungqr": (["{T}[3,3]", "{T}[3]"], "{T}[3,3]", "{}"),
    "syevd": (["{T}[3,3]"], "({T}[3,3], {R}[3], s32[])", "{mode = 86 : ui8, uplo = 76 : ui8}"),
    "heevd": (["{T}[3,3]"], "({T}[3,3], {R}[3], s32[])", "{mode = 86 : ui8, uplo = 76 : ui8}"),
    "gesdd": (["{T}[3,3]"], "({T}[3,3], {R}[3], {T}[3,3], {T}[3,3], s32[])",
              "{mode = 65 : ui8}"),
    "gesvd": (["{T}[3,3]"], "({T}[3,3], {R}[3], {T}[3,3], {T}[3,3], s32[])",
              "{mode = 65 : ui8}"),
    "geev": (["{T}[3,3]"], "({T}[3], {T}[3], {C}[3,3], {C}[3,3], s32[])",
             "{compute_left = 78 : ui8, compute_right = 86 : ui8}"),
}


def _lapack_module(p, routine):
    t = {"s": "f32", "d": "f64", "c": "c64", "z": "c128"}[p]
    ops, result, config = LAPACK_CALLS[routine]
    if routine == "geev" and p in "cz":
        result = "({T}[3], {T}[3,3], {T}[3,3], s32[])"

    def fill(s):
        return s.replace("{T}", t).replace("{R}", _R[p]).replace("{C}", _C[p])

    params = "\n".join(f"  p{i} = {fill(s)} parameter({i})" for i, s in enumerate(ops))
    names = ", ".join(f"p{i}" for i in range(len(ops)))
    return (f"HloModule m\nENTRY e {{\n{params}\n  ROOT r = {fill(result)} custom-call({names}), "
            f'custom_call_target="lapack_{p}{routine}_ffi", '
            f"api_version=API_VERSION_TYPED_FFI, backend_config={config}\n}}\n")


def test_every_lapack_target_compiles_or_is_listed():
    import re

    from xlapy.interpreter.custom_calls import registered_custom_calls

    targets = [n for n in registered_custom_calls() if re.fullmatch(r"lapack_[sdcz]\w+_ffi", n)]
    assert len(targets) >= 30, targets
    for target in targets:
        p, routine = target[len("lapack_")], target[len("lapack_") + 1:-len("_ffi")]
        assert routine in LAPACK_CALLS, f"{target}: add a 3x3 call to LAPACK_CALLS"
        program = be.compile_module(parse_hlo_module(_lapack_module(p, routine)))
        rows = program.interpreted()
        if routine in INTERPRETED_LAPACK:
            assert len(rows) == 1 and target in rows[0][2], (target, rows)
        else:
            assert rows == [], f"{target}: interpreted without a listed reason: {rows}"


def test_custom_call_reasons_name_the_target():
    text = ("HloModule m\nENTRY e {\n  a = f32[3] parameter(0)\n  ROOT r = f32[3] "
            'custom-call(a), custom_call_target="my_function"\n}\n')
    program = be.compile_module(parse_hlo_module(text))
    ((_, _, reason),) = program.interpreted()
    assert "'my_function'" in reason and "top-k" not in reason
