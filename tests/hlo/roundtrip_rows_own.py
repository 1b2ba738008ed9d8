"""Round-trip rows of xlapy's own, so that every opcode of xlapy.hlo.opcodes and every
attribute key of its schema appears in the table (test_roundtrip_table.py checks it).

Each text is XLA's own print of the module (made with jax's XLA, HloModule.to_string with
ShortParsable() or the long form, printed twice so it is a fixed point); attributes newer than
that XLA (has_dynamic_root=, convolution_kind=, a convolution's algorithm= and sparsity
operand, async-update aliasing) were added by hand as XLA's main branch prints them.
"""

OWN_SHORT_ROWS = [
    # every unary floating-point opcode
    ("UnaryFloatOps", r"""HloModule unary_float_ops, entry_computation_layout={(f32[4]{0})->(f32[4]{0}, f32[4]{0}, f32[4]{0}, f32[4]{0}, f32[4]{0}, /*index=5*/f32[4]{0}, f32[4]{0}, f32[4]{0}, f32[4]{0}, f32[4]{0}, /*index=10*/f32[4]{0}, f32[4]{0}, f32[4]{0}, f32[4]{0}, f32[4]{0}, /*index=15*/f32[4]{0}, f32[4]{0}, f32[4]{0}, f32[4]{0}, f32[4]{0}, /*index=20*/f32[4]{0}, f32[4]{0}, f32[4]{0}, f32[4]{0}, f32[4]{0}, /*index=25*/f32[4]{0}, f32[4]{0})}

ENTRY unary {
  p = f32[4]{0} parameter(0)
  abs = f32[4]{0} abs(p)
  acos = f32[4]{0} acos(p)
  acosh = f32[4]{0} acosh(p)
  asin = f32[4]{0} asin(p)
  asinh = f32[4]{0} asinh(p)
  atanh = f32[4]{0} atanh(p)
  cbrt = f32[4]{0} cbrt(p)
  ceil = f32[4]{0} ceil(p)
  cosine = f32[4]{0} cosine(p)
  cosh = f32[4]{0} cosh(p)
  erf = f32[4]{0} erf(p)
  exponential = f32[4]{0} exponential(p)
  expm1 = f32[4]{0} exponential-minus-one(p)
  floor = f32[4]{0} floor(p)
  log = f32[4]{0} log(p)
  log1p = f32[4]{0} log-plus-one(p)
  logistic = f32[4]{0} logistic(p)
  negate = f32[4]{0} negate(p)
  round = f32[4]{0} round-nearest-afz(p)
  round-even = f32[4]{0} round-nearest-even(p)
  rsqrt = f32[4]{0} rsqrt(p)
  sign = f32[4]{0} sign(p)
  sine = f32[4]{0} sine(p)
  sinh = f32[4]{0} sinh(p)
  sqrt = f32[4]{0} sqrt(p)
  tan = f32[4]{0} tan(p)
  tanh = f32[4]{0} tanh(p)
  ROOT t = (f32[4]{0}, f32[4]{0}, f32[4]{0}, f32[4]{0}, f32[4]{0}, /*index=5*/f32[4]{0}, f32[4]{0}, f32[4]{0}, f32[4]{0}, f32[4]{0}, /*index=10*/f32[4]{0}, f32[4]{0}, f32[4]{0}, f32[4]{0}, f32[4]{0}, /*index=15*/f32[4]{0}, f32[4]{0}, f32[4]{0}, f32[4]{0}, f32[4]{0}, /*index=20*/f32[4]{0}, f32[4]{0}, f32[4]{0}, f32[4]{0}, f32[4]{0}, /*index=25*/f32[4]{0}, f32[4]{0}) tuple(abs, acos, acosh, asin, asinh, atanh, cbrt, ceil, cosine, cosh, erf, exponential, expm1, floor, log, log1p, logistic, negate, round, round-even, rsqrt, sign, sine, sinh, sqrt, tan, tanh)
}

"""),
    # every binary floating-point opcode
    ("BinaryFloatOps", r"""HloModule binary_float_ops, entry_computation_layout={(f32[2,3]{1,0}, f32[2,3]{1,0})->(f32[2,3]{1,0}, f32[2,3]{1,0}, f32[2,3]{1,0}, f32[2,3]{1,0}, f32[2,3]{1,0}, /*index=5*/f32[2,3]{1,0}, f32[2,3]{1,0}, f32[2,3]{1,0}, f32[2,3]{1,0})}

ENTRY binary {
  x = f32[2,3]{1,0} parameter(0)
  y = f32[2,3]{1,0} parameter(1)
  add = f32[2,3]{1,0} add(x, y)
  atan2 = f32[2,3]{1,0} atan2(x, y)
  divide = f32[2,3]{1,0} divide(x, y)
  maximum = f32[2,3]{1,0} maximum(x, y)
  minimum = f32[2,3]{1,0} minimum(x, y)
  multiply = f32[2,3]{1,0} multiply(x, y)
  power = f32[2,3]{1,0} power(x, y)
  remainder = f32[2,3]{1,0} remainder(x, y)
  subtract = f32[2,3]{1,0} subtract(x, y)
  ROOT t = (f32[2,3]{1,0}, f32[2,3]{1,0}, f32[2,3]{1,0}, f32[2,3]{1,0}, f32[2,3]{1,0}, /*index=5*/f32[2,3]{1,0}, f32[2,3]{1,0}, f32[2,3]{1,0}, f32[2,3]{1,0}) tuple(add, atan2, divide, maximum, minimum, multiply, power, remainder, subtract)
}

"""),
    # complex, real, imag; abs and sqrt of a complex value
    ("ComplexParts", r"""HloModule complex_parts, entry_computation_layout={(f64[3]{0}, f64[3]{0})->(f64[3]{0}, f64[3]{0}, f64[3]{0}, c128[3]{0})}

ENTRY complex_parts {
  re = f64[3]{0} parameter(0)
  im = f64[3]{0} parameter(1)
  c = c128[3]{0} complex(re, im)
  real = f64[3]{0} real(c)
  imag = f64[3]{0} imag(c)
  abs = f64[3]{0} abs(c)
  sqrt = c128[3]{0} sqrt(c)
  ROOT t = (f64[3]{0}, f64[3]{0}, f64[3]{0}, c128[3]{0}) tuple(real, imag, abs, sqrt)
}

"""),
    # bitwise and integer opcodes (mulhi, shifts, popcnt, count-leading-zeros)
    ("IntegerAndBitOps", r"""HloModule integer_and_bit_ops, entry_computation_layout={(s32[8]{0}, s32[8]{0}, u32[8]{0})->(s32[8]{0}, s32[8]{0}, s32[8]{0}, s32[8]{0}, s32[8]{0}, /*index=5*/s32[8]{0}, s32[8]{0}, s32[8]{0}, u32[8]{0}, s32[8]{0}, /*index=10*/u32[8]{0}, s32[8]{0}, s32[8]{0}, s32[8]{0}, u32[8]{0})}

ENTRY bits {
  x = s32[8]{0} parameter(0)
  y = s32[8]{0} parameter(1)
  and = s32[8]{0} and(x, y)
  or = s32[8]{0} or(x, y)
  xor = s32[8]{0} xor(x, y)
  not = s32[8]{0} not(x)
  popcnt = s32[8]{0} popcnt(x)
  clz = s32[8]{0} count-leading-zeros(x)
  shl = s32[8]{0} shift-left(x, y)
  sra = s32[8]{0} shift-right-arithmetic(x, y)
  u = u32[8]{0} parameter(2)
  srl = u32[8]{0} shift-right-logical(u, u)
  mulhi = s32[8]{0} mulhi(x, y)
  mulhi.u = u32[8]{0} mulhi(u, u)
  abs = s32[8]{0} abs(x)
  sign = s32[8]{0} sign(x)
  divide = s32[8]{0} divide(x, y)
  remainder = u32[8]{0} remainder(u, u)
  ROOT t = (s32[8]{0}, s32[8]{0}, s32[8]{0}, s32[8]{0}, s32[8]{0}, /*index=5*/s32[8]{0}, s32[8]{0}, s32[8]{0}, u32[8]{0}, s32[8]{0}, /*index=10*/u32[8]{0}, s32[8]{0}, s32[8]{0}, s32[8]{0}, u32[8]{0}) tuple(and, or, xor, not, popcnt, clz, shl, sra, srl, mulhi, mulhi.u, abs, sign, divide, remainder)
}

"""),
    # and/or/xor/not on pred
    ("PredLogic", r"""HloModule pred_logic, entry_computation_layout={(pred[5]{0}, pred[5]{0})->pred[5]{0}}

ENTRY logic {
  a = pred[5]{0} parameter(0)
  b = pred[5]{0} parameter(1)
  xor = pred[5]{0} xor(a, b)
  and = pred[5]{0} and(a, b)
  or = pred[5]{0} or(a, b)
  not = pred[5]{0} not(a)
  ROOT select = pred[5]{0} select(and, or, not)
}

"""),
    # all six directions; type= is printed only when it is not the element type's default (TOTALORDER here)
    ("CompareDirectionsAndTypes", r"""HloModule compare_variants, entry_computation_layout={(f32[3]{0}, f32[3]{0}, s32[3]{0}, u32[3]{0})->(pred[3]{0}, pred[3]{0}, pred[3]{0}, pred[3]{0}, pred[3]{0}, /*index=5*/pred[3]{0})}

ENTRY compares {
  f = f32[3]{0} parameter(0)
  g = f32[3]{0} parameter(1)
  eq = pred[3]{0} compare(f, g), direction=EQ
  ne = pred[3]{0} compare(f, g), direction=NE
  lt = pred[3]{0} compare(f, g), direction=LT, type=TOTALORDER
  s = s32[3]{0} parameter(2)
  le = pred[3]{0} compare(s, s), direction=LE
  u = u32[3]{0} parameter(3)
  gt = pred[3]{0} compare(u, u), direction=GT
  ge = pred[3]{0} compare(f, g), direction=GE
  ROOT t = (pred[3]{0}, pred[3]{0}, pred[3]{0}, pred[3]{0}, pred[3]{0}, /*index=5*/pred[3]{0}) tuple(eq, ne, lt, le, gt, ge)
}

"""),
    # convert, bitcast-convert (also to a narrower type), reduce-precision, bitcast with a layout, stochastic-convert, clamp
    ("Conversions", r"""HloModule conversions, entry_computation_layout={(f32[2,3]{1,0}, u32[2,3]{1,0}, f32[], f32[])->(s32[2,3]{1,0}, bf16[2,3]{1,0}, u32[2,3]{1,0}, u16[2,3,2]{2,1,0}, f32[2,3]{1,0}, /*index=5*/f32[3,2]{0,1}, s8[2,3]{1,0}, f32[2,3]{1,0})}

ENTRY conversions {
  p = f32[2,3]{1,0} parameter(0)
  convert = s32[2,3]{1,0} convert(p)
  convert.bf16 = bf16[2,3]{1,0} convert(p)
  bitcast-convert = u32[2,3]{1,0} bitcast-convert(p)
  bitcast-convert.narrow = u16[2,3,2]{2,1,0} bitcast-convert(p)
  reduce-precision = f32[2,3]{1,0} reduce-precision(p), exponent_bits=5, mantissa_bits=10
  bitcast = f32[3,2]{0,1} bitcast(p)
  random = u32[2,3]{1,0} parameter(1)
  stochastic-convert = s8[2,3]{1,0} stochastic-convert(p, random)
  lo = f32[] parameter(2)
  hi = f32[] parameter(3)
  clamp = f32[2,3]{1,0} clamp(lo, p, hi)
  ROOT t = (s32[2,3]{1,0}, bf16[2,3]{1,0}, u32[2,3]{1,0}, u16[2,3,2]{2,1,0}, f32[2,3]{1,0}, /*index=5*/f32[3,2]{0,1}, s8[2,3]{1,0}, f32[2,3]{1,0}) tuple(convert, convert.bf16, bitcast-convert, bitcast-convert.narrow, reduce-precision, bitcast, stochastic-convert, clamp)
}

"""),
    # cholesky with and without lower=true
    ("Cholesky", r"""HloModule cholesky, entry_computation_layout={(f32[3,4,4]{2,1,0})->(f32[3,4,4]{2,1,0}, f32[3,4,4]{2,1,0})}

ENTRY cholesky {
  a = f32[3,4,4]{2,1,0} parameter(0)
  upper = f32[3,4,4]{2,1,0} cholesky(a)
  lower = f32[3,4,4]{2,1,0} cholesky(a), lower=true
  ROOT t = (f32[3,4,4]{2,1,0}, f32[3,4,4]{2,1,0}) tuple(upper, lower)
}

"""),
    # left_side, lower, unit_diagonal and the three transpose_a values
    ("TriangularSolveVariants", r"""HloModule triangular_solve_variants, entry_computation_layout={(f32[4,4]{1,0}, f32[4,3]{1,0}, f32[3,4]{1,0})->(f32[4,3]{1,0}, f32[4,3]{1,0}, f32[3,4]{1,0})}

ENTRY triangular_solve {
  a = f32[4,4]{1,0} parameter(0)
  b = f32[4,3]{1,0} parameter(1)
  ts.0 = f32[4,3]{1,0} triangular-solve(a, b), left_side=true, transpose_a=NO_TRANSPOSE
  ts.1 = f32[4,3]{1,0} triangular-solve(a, b), left_side=true, lower=true, unit_diagonal=true, transpose_a=TRANSPOSE
  c = f32[3,4]{1,0} parameter(2)
  ts.2 = f32[3,4]{1,0} triangular-solve(a, c), transpose_a=ADJOINT
  ROOT t = (f32[4,3]{1,0}, f32[4,3]{1,0}, f32[3,4]{1,0}) tuple(ts.0, ts.1, ts.2)
}

"""),
    # get-dimension-size, set-dimension-size, dynamic-reshape
    ("DynamicDimensions", r"""HloModule dynamic_dimensions, entry_computation_layout={(f32[4,<=8]{1,0}, f32[4,8]{1,0}, s32[])->(s32[], f32[4,<=8]{1,0}, f32[2,<=16]{1,0})}

ENTRY dynamic {
  p = f32[4,<=8]{1,0} parameter(0)
  size = s32[] get-dimension-size(p), dimensions={1}
  static = f32[4,8]{1,0} parameter(1)
  n = s32[] parameter(2)
  set = f32[4,<=8]{1,0} set-dimension-size(static, n), dimensions={1}
  rows = s32[] constant(2)
  reshaped = f32[2,<=16]{1,0} dynamic-reshape(p, rows, size)
  ROOT t = (s32[], f32[4,<=8]{1,0}, f32[2,<=16]{1,0}) tuple(size, set, reshaped)
}

"""),
    # opt-barrier of a tuple
    ("OptBarrier", r"""HloModule opt_barrier, entry_computation_layout={(f32[2]{0}, s32[])->f32[2]{0}}

ENTRY barrier {
  a = f32[2]{0} parameter(0)
  b = s32[] parameter(1)
  t = (f32[2]{0}, s32[]) tuple(a, b)
  opt-barrier = (f32[2]{0}, s32[]) opt-barrier(t)
  ROOT gte = f32[2]{0} get-tuple-element(opt-barrier), index=0
}

"""),
    # all-gather-start / all-gather-done (real opcodes, not async sugar) with every attribute
    ("AllGatherStartDone", r"""HloModule all_gather_start_done, entry_computation_layout={(f32[8,4]{1,0})->f32[16,4]{1,0}}, replica_count=4

ENTRY all_gather {
  p = f32[8,4]{1,0} parameter(0)
  start = (f32[8,4]{1,0}, f32[16,4]{1,0}) all-gather-start(p), channel_id=3, replica_groups={{0,1},{2,3}}, constrain_layout=true, dimensions={0}, use_global_device_ids=true
  ROOT done = f32[16,4]{1,0} all-gather-done(start)
}

"""),
    # ragged-dot: ragged non-contracting lhs dimension
    ("RaggedDot", r"""HloModule ragged_dot, entry_computation_layout={(f32[11,5]{1,0}, f32[3,5,7]{2,1,0}, s64[3]{0})->f32[11,7]{1,0}}

ENTRY ragged_dot {
  lhs = f32[11,5]{1,0} parameter(0)
  rhs = f32[3,5,7]{2,1,0} parameter(1)
  group_sizes = s64[3]{0} parameter(2)
  ROOT ragged-dot = f32[11,7]{1,0} ragged-dot(lhs, rhs, group_sizes), lhs_contracting_dims={1}, rhs_contracting_dims={1}, lhs_ragged_dims={0}, rhs_group_dims={0}
}

"""),
    # ragged-dot: batch and ragged contracting dimensions, operand_precision
    ("RaggedDotBatchAndPrecision", r"""HloModule ragged_dot_batch, entry_computation_layout={(f32[2,11,5]{2,1,0}, f32[2,5,7]{2,1,0}, s32[3]{0})->f32[3,2,11,7]{3,2,1,0}}

ENTRY ragged_dot {
  lhs = f32[2,11,5]{2,1,0} parameter(0)
  rhs = f32[2,5,7]{2,1,0} parameter(1)
  group_sizes = s32[3]{0} parameter(2)
  ROOT ragged-dot = f32[3,2,11,7]{3,2,1,0} ragged-dot(lhs, rhs, group_sizes), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}, lhs_ragged_dims={2}, operand_precision={highest,high}
}

"""),
    # scaled-dot with batch dimensions, operand_precision and algorithm
    ("ScaledDot", r"""HloModule scaled_dot, entry_computation_layout={(f8e4m3fn[4,16,64]{2,1,0}, f8e4m3fn[4,64,32]{2,1,0}, f8e8m0fnu[4,16,2]{2,1,0}, f8e8m0fnu[4,2,32]{2,1,0})->bf16[4,16,32]{2,1,0}}

ENTRY scaled_dot {
  lhs = f8e4m3fn[4,16,64]{2,1,0} parameter(0)
  rhs = f8e4m3fn[4,64,32]{2,1,0} parameter(1)
  lhs_scale = f8e8m0fnu[4,16,2]{2,1,0} parameter(2)
  rhs_scale = f8e8m0fnu[4,2,32]{2,1,0} parameter(3)
  ROOT scaled-dot = bf16[4,16,32]{2,1,0} scaled-dot(lhs, rhs, lhs_scale, rhs_scale), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}, operand_precision={high,highest}, algorithm=dot_bf16_bf16_f32
}

"""),
    # dot operand_precision and algorithm
    ("DotPrecisionAndAlgorithm", r"""HloModule dot_precision, entry_computation_layout={(f32[2,3]{1,0}, f32[3,4]{1,0})->(f32[2,4]{1,0}, f32[2,4]{1,0})}

ENTRY dot {
  a = f32[2,3]{1,0} parameter(0)
  b = f32[3,4]{1,0} parameter(1)
  dot.0 = f32[2,4]{1,0} dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}, operand_precision={high,highest}
  dot.1 = f32[2,4]{1,0} dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}, algorithm=dot_bf16_bf16_f32_x3
  ROOT t = (f32[2,4]{1,0}, f32[2,4]{1,0}) tuple(dot.0, dot.1)
}

"""),
    # convolution feature_group_count, batch_group_count, operand_precision
    ("ConvolutionGroupsAndPrecision", r"""HloModule convolution_groups, entry_computation_layout={(f32[8,5,5,6]{3,2,1,0}, f32[3,3,2,12]{3,2,1,0}, f32[8,5,5,4]{3,2,1,0}, f32[3,3,4,4]{3,2,1,0})->(f32[8,3,3,12]{3,2,1,0}, f32[2,3,3,4]{3,2,1,0})}

ENTRY convolution {
  input = f32[8,5,5,6]{3,2,1,0} parameter(0)
  filter = f32[3,3,2,12]{3,2,1,0} parameter(1)
  grouped = f32[8,3,3,12]{3,2,1,0} convolution(input, filter), window={size=3x3}, dim_labels=b01f_01io->b01f, feature_group_count=3, operand_precision={high,default}
  input.1 = f32[8,5,5,4]{3,2,1,0} parameter(2)
  filter.1 = f32[3,3,4,4]{3,2,1,0} parameter(3)
  batch_grouped = f32[2,3,3,4]{3,2,1,0} convolution(input.1, filter.1), window={size=3x3}, dim_labels=b01f_01io->b01f, batch_group_count=4
  ROOT t = (f32[8,3,3,12]{3,2,1,0}, f32[2,3,3,4]{3,2,1,0}) tuple(grouped, batch_grouped)
}

"""),
    # channel_id, constrain_layout, use_global_device_ids on every collective; has_dynamic_root=false not printed (as jaxlib 0.10.2's XLA,
    # which has no such key)
    ("CollectiveAttributes", r"""HloModule collective_attributes, entry_computation_layout={(f32[8,4]{1,0})->(f32[16,4]{1,0}, f32[8,4]{1,0}, f32[2,4]{1,0}, f32[8,4]{1,0}, f32[8,4]{1,0}, /*index=5*/f32[8,4]{1,0}, f32[8,4]{1,0})}, replica_count=2, num_partitions=2

add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT add = f32[] add(x, y)
}

ENTRY collectives {
  p = f32[8,4]{1,0} parameter(0)
  all-gather = f32[16,4]{1,0} all-gather(p), channel_id=1, replica_groups={{0,1},{2,3}}, dimensions={0}, use_global_device_ids=true
  all-reduce-start = f32[8,4]{1,0} all-reduce-start(p), channel_id=2, replica_groups={{0,1,2,3}}, constrain_layout=true, use_global_device_ids=true, to_apply=add
  all-reduce-done = f32[8,4]{1,0} all-reduce-done(all-reduce-start)
  reduce-scatter = f32[2,4]{1,0} reduce-scatter(p), channel_id=3, replica_groups={{0,1,2,3}}, constrain_layout=true, use_global_device_ids=true, dimensions={0}, to_apply=add
  all-to-all = f32[8,4]{1,0} all-to-all(p), channel_id=4, replica_groups={{0,1},{2,3}}, constrain_layout=true, dimensions={0}
  collective-broadcast = f32[8,4]{1,0} collective-broadcast(p), channel_id=5, replica_groups={{0,1},{2,3}}
  collective-permute = f32[8,4]{1,0} collective-permute(p), channel_id=6, source_target_pairs={{0,1},{1,0}}
  collective-permute-start = (f32[8,4]{1,0}, f32[8,4]{1,0}) collective-permute-start(p), channel_id=7, source_target_pairs={{0,1},{1,0}}
  collective-permute-done = f32[8,4]{1,0} collective-permute-done(collective-permute-start)
  ROOT t = (f32[16,4]{1,0}, f32[8,4]{1,0}, f32[2,4]{1,0}, f32[8,4]{1,0}, f32[8,4]{1,0}, /*index=5*/f32[8,4]{1,0}, f32[8,4]{1,0}) tuple(all-gather, all-reduce-done, reduce-scatter, all-to-all, collective-broadcast, collective-permute, collective-permute-done)
}

"""),
    # ragged-all-to-all with channel_id
    ("RaggedAllToAllChannel", r"""HloModule ragged_all_to_all_channel, entry_computation_layout={(bf16[16]{0}, bf16[16]{0}, s32[2]{0}, s32[2]{0}, s32[2]{0}, /*index=5*/s32[2]{0})->bf16[16]{0}}, replica_count=2

ENTRY ragged_all_to_all {
  input = bf16[16]{0} parameter(0)
  output = bf16[16]{0} parameter(1)
  input_offsets = s32[2]{0} parameter(2)
  send_sizes = s32[2]{0} parameter(3)
  output_offsets = s32[2]{0} parameter(4)
  recv_sizes = s32[2]{0} parameter(5)
  ROOT ragged-all-to-all = bf16[16]{0} ragged-all-to-all(input, output, input_offsets, send_sizes, output_offsets, recv_sizes), channel_id=9, replica_groups={{0,1}}
}

"""),
    # XLA's CollectiveBroadcastDynamicRoot with an s32[1] root (see LEFT_OUT)
    ("CollectiveBroadcastDynamicRootS32", r"""HloModule CollectiveBroadcast, entry_computation_layout={(f32[128,32]{0,1}, s32[1]{0})->f32[128,32]{0,1}}, replica_count=4

ENTRY CollectiveBroadcast {
  input = f32[128,32]{0,1} parameter(0)
  root = s32[1]{0} parameter(1)
  ROOT cb = f32[128,32]{0,1} collective-broadcast(input, root), replica_groups={{1,0},{2,3}}, has_dynamic_root=true
}

"""),
    # infeed_config (with escapes), outfeed_shape and outfeed_config
    ("InfeedOutfeedConfig", r"""HloModule infeed_outfeed_config, entry_computation_layout={()->token[]}

ENTRY feeds {
  token0 = token[] after-all()
  infeed = ((f32[3]{0}, s32[]), token[]) infeed(token0), infeed_config="config \"a\""
  data = (f32[3]{0}, s32[]) get-tuple-element(infeed), index=0
  token1 = token[] get-tuple-element(infeed), index=1
  ROOT outfeed = token[] outfeed(data, token1), outfeed_shape=(f32[3]{0}, s32[]), outfeed_config="out"
}

"""),
    # reshape of a dynamic dimension with inferred_dimension
    ("ReshapeInferredDimension", r"""HloModule reshape_inferred, entry_computation_layout={(f32[<=8,3]{1,0})->f32[<=24]{0}}

ENTRY reshape {
  p = f32[<=8,3]{1,0} parameter(0)
  ROOT reshape = f32[<=24]{0} reshape(p), inferred_dimension=0
}

"""),
    # fusion kinds kLoop, kInput, kOutput, kCustom
    ("FusionKinds", r"""HloModule fusion_kinds, entry_computation_layout={(f32[4]{0}, f32[4]{0})->(f32[], f32[4]{0}, f32[4]{0})}

fused_add {
  x = f32[4]{0} parameter(0)
  y = f32[4]{0} parameter(1)
  ROOT add = f32[4]{0} add(x, y)
}

sum {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT add.1 = f32[] add(a, b)
}

fused_reduce {
  x.1 = f32[4]{0} parameter(0)
  zero = f32[] constant(0)
  ROOT reduce = f32[] reduce(x.1, zero), dimensions={0}, to_apply=sum
}

ENTRY fusions {
  x.2 = f32[4]{0} parameter(0)
  y.1 = f32[4]{0} parameter(1)
  loop = f32[4]{0} fusion(x.2, y.1), kind=kLoop, calls=fused_add
  input = f32[] fusion(loop), kind=kInput, calls=fused_reduce
  output = f32[4]{0} fusion(x.2, y.1), kind=kOutput, calls=fused_add
  custom = f32[4]{0} fusion(x.2, y.1), kind=kCustom, calls=fused_add
  ROOT t = (f32[], f32[4]{0}, f32[4]{0}) tuple(input, output, custom)
}

"""),
    # rng distributions and the three rng-bit-generator algorithms
    ("RngVariants", r"""HloModule rng_variants, entry_computation_layout={(f32[], f32[], u64[2]{0})->(f32[4]{0}, f32[4]{0}, (u64[2]{0}, u32[8]{0}), (u64[2]{0}, u32[8]{0}), (u64[2]{0}, u32[8]{0}))}

ENTRY rng {
  mu = f32[] parameter(0)
  sigma = f32[] parameter(1)
  normal = f32[4]{0} rng(mu, sigma), distribution=rng_normal
  uniform = f32[4]{0} rng(mu, sigma), distribution=rng_uniform
  state = u64[2]{0} parameter(2)
  default = (u64[2]{0}, u32[8]{0}) rng-bit-generator(state), algorithm=rng_default
  philox = (u64[2]{0}, u32[8]{0}) rng-bit-generator(state), algorithm=rng_philox
  three-fry = (u64[2]{0}, u32[8]{0}) rng-bit-generator(state), algorithm=rng_three_fry
  ROOT t = (f32[4]{0}, f32[4]{0}, (u64[2]{0}, u32[8]{0}), (u64[2]{0}, u32[8]{0}), (u64[2]{0}, u32[8]{0})) tuple(normal, uniform, default, philox, three-fry)
}

"""),
    # convolution_kind fprop/dgrad/wgrad, algorithm, an rhs sparsity_config with its metadata operand
    ("ConvolutionKindsAndSparsity", r"""HloModule convolution_kinds, entry_computation_layout={(f32[1,8,8,4]{3,2,1,0}, f32[3,3,4,2]{3,2,1,0}, f32[1,6,6,2]{3,2,1,0}, f32[1,16]{1,0}, f32[8,4]{1,0}, /*index=5*/f32[3,3,2,4]{3,2,1,0}, u16[1,2]{1,0})->(f32[1,6,6,2]{3,2,1,0}, f32[1,8,8,4]{3,2,1,0}, f32[3,3,4,2]{3,2,1,0}, f32[1,4]{1,0})}

ENTRY convolution {
  input = f32[1,8,8,4]{3,2,1,0} parameter(0)
  filter = f32[3,3,4,2]{3,2,1,0} parameter(1)
  fprop = f32[1,6,6,2]{3,2,1,0} convolution(input, filter), window={size=3x3}, dim_labels=b01f_01io->b01f, convolution_kind=fprop, algorithm=dot_tf32_tf32_f32
  grad = f32[1,6,6,2]{3,2,1,0} parameter(2)
  filter.t = f32[3,3,2,4]{3,2,1,0} parameter(5)
  dgrad = f32[1,8,8,4]{3,2,1,0} convolution(grad, filter.t), window={size=3x3}, dim_labels=b01f_01oi->b01f, convolution_kind=dgrad, operand_precision={highest,default}
  wgrad = f32[3,3,4,2]{3,2,1,0} convolution(input, grad), window={size=3x3}, dim_labels=b01f_01io->b01f, convolution_kind=wgrad
  lhs = f32[1,16]{1,0} parameter(3)
  rhs = f32[8,4]{1,0} parameter(4)
  meta = u16[1,2]{1,0} parameter(6)
  sparse = f32[1,4]{1,0} convolution(lhs, rhs, meta), dim_labels=bf_io->bf, sparsity_config={rhs={sparsity=1x2 dimension=0 stride=1 idx=2}}
  ROOT t = (f32[1,6,6,2]{3,2,1,0}, f32[1,8,8,4]{3,2,1,0}, f32[3,3,4,2]{3,2,1,0}, f32[1,4]{1,0}) tuple(fprop, dgrad, wgrad, sparse)
}

"""),
    # custom-call window/dim_labels/group counts/operand_precision, padding_type, api_version, schedule, a JSON-like backend_config
    ("CustomCallVariants", r"""HloModule custom_call_variants, entry_computation_layout={(f32[1,8,8,4]{3,2,1,0}, f32[3,3,4,2]{3,2,1,0})->(f32[1,8,8,2]{3,2,1,0}, f32[1,8,8,2]{3,2,1,0}, f32[1,6,6,2]{3,2,1,0}, f32[2,8,8,2]{3,2,1,0}, f32[2]{0}, /*index=5*/f32[2]{0}, f32[2]{0})}

ENTRY custom_calls {
  input = f32[1,8,8,4]{3,2,1,0} parameter(0)
  filter = f32[3,3,4,2]{3,2,1,0} parameter(1)
  conv = f32[1,8,8,2]{3,2,1,0} custom-call(input, filter), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, operand_precision={high,high}, custom_call_target="Conv"
  same = f32[1,8,8,2]{3,2,1,0} custom-call(input, filter), window={size=3x3}, dim_labels=b01f_01io->b01f, padding_type=PADDING_SAME, custom_call_target="ConvSame"
  valid = f32[1,6,6,2]{3,2,1,0} custom-call(input, filter), window={size=3x3}, dim_labels=b01f_01io->b01f, padding_type=PADDING_VALID, custom_call_target="ConvValid"
  grouped = f32[2,8,8,2]{3,2,1,0} custom-call(input, filter), batch_group_count=2, custom_call_target="Grouped"
  unified = f32[2]{0} custom-call(), custom_call_target="s", api_version=API_VERSION_STATUS_RETURNING_UNIFIED
  ffi = f32[2]{0} custom-call(), custom_call_target="f", api_version=API_VERSION_TYPED_FFI, backend_config={attr = 1 : i32}
  earliest = f32[2]{0} custom-call(), custom_call_target="e", schedule=SCHEDULE_EARLIEST
  ROOT t = (f32[1,8,8,2]{3,2,1,0}, f32[1,8,8,2]{3,2,1,0}, f32[1,6,6,2]{3,2,1,0}, f32[2,8,8,2]{3,2,1,0}, f32[2]{0}, /*index=5*/f32[2]{0}, f32[2]{0}) tuple(conv, same, valid, grouped, unified, ffi, earliest)
}

"""),
    # call-start/-update/-done sugar; the thread reaches the callee
    ("CallStartSugarWithThread", r"""HloModule call_start_sugar, entry_computation_layout={(f32[4]{0}, f32[4]{0})->f32[4]{0}}

callee {
  x = f32[4]{0} parameter(0)
  y = f32[4]{0} parameter(1)
  ROOT add = f32[4]{0} add(x, y)
}, execution_thread="parallel_thread"

ENTRY main {
  a = f32[4]{0} parameter(0)
  b = f32[4]{0} parameter(1)
  call-start = ((f32[4]{0}, f32[4]{0}), f32[4]{0}, s32[]) call-start(a, b), async_execution_thread="parallel_thread", to_apply=callee
  call-update = ((f32[4]{0}, f32[4]{0}), f32[4]{0}, s32[]) call-update(call-start)
  ROOT call-done = f32[4]{0} call-done(call-update)
}

"""),
    # sugar with frontend_attributes on the start (printed once), a tuple-normalised sharding, attributes on the done
    ("AsyncSugarFrontendAttributes", r"""HloModule async_sugar_frontend_attributes, entry_computation_layout={(f32[4]{0})->(f32[8]{0}, f32[4]{0})}

ENTRY main {
  p = f32[4]{0} parameter(0)
  start.0 = ((f32[4]{0}), f32[8]{0}, s32[]) custom-call-start(p), custom_call_target="foo", frontend_attributes={_xla_stream="1"}
  done.0 = f32[8]{0} custom-call-done(start.0)
  start.1 = ((f32[4]{0}), f32[4]{0}, u32[]) sqrt-start(p), sharding={{replicated}, {replicated}, {replicated}}, frontend_attributes={tag="done"}
  done.1 = f32[4]{0} sqrt-done(start.1), frontend_attributes={tag="done"}
  ROOT t = (f32[8]{0}, f32[4]{0}) tuple(done.0, done.1)
}

"""),
    # an async computation of two instructions prints as async-start(...), calls=
    ("AsyncComputationNotSugared", r"""HloModule async_not_sugared, entry_computation_layout={(f32[4]{0}, f32[4]{0})->f32[4]{0}}

wrapped {
  x = f32[4]{0} parameter(0)
  negate = f32[4]{0} negate(x)
  ROOT exp = f32[4]{0} exponential(negate)
}

ENTRY main {
  p = f32[4]{0} parameter(0)
  start = ((f32[4]{0}), f32[4]{0}, s32[]) async-start(p), calls=wrapped
  update = ((f32[4]{0}), f32[4]{0}, s32[]) async-update(start)
  done = f32[4]{0} async-done(update)
  q = f32[4]{0} parameter(1)
  ROOT add = f32[4]{0} add(done, q)
}

"""),
    # custom-call-update with output_to_operand_aliasing (XLA's AsyncUpdateWithAliasing test)
    ("AsyncUpdateWithAliasing", r"""HloModule module, entry_computation_layout={(f32[32,32]{1,0})->(f32[32,32]{1,0})}

ENTRY main {
  p = f32[32,32]{1,0} parameter(0)
  async-start = ((f32[32,32]{1,0}), (f32[32,32]{1,0}), s32[]) custom-call-start(p), custom_call_target="foo"
  async-update = ((f32[32,32]{1,0}), (f32[32,32]{1,0}), s32[]) custom-call-update(async-start), output_to_operand_aliasing={{2}: (0, {2})}
  ROOT async-done = (f32[32,32]{1,0}) custom-call-done(async-update)
}

"""),
]

OWN_LONG_ROWS = [
    # dot-start/dot-done sugar in the long form (operand shapes)
    ("AsyncSugarLongForm", r"""HloModule async_sugar_long, entry_computation_layout={(f32[2,3]{1,0}, f32[3,4]{1,0})->f32[2,4]{1,0}}

ENTRY %main (p: f32[2,3], q: f32[3,4]) -> f32[2,4] {
  %p = f32[2,3]{1,0} parameter(0)
  %q = f32[3,4]{1,0} parameter(1)
  %dot-start = ((f32[2,3]{1,0}, f32[3,4]{1,0}), f32[2,4]{1,0}, u32[]) dot-start(f32[2,3]{1,0} %p, f32[3,4]{1,0} %q), lhs_contracting_dims={1}, rhs_contracting_dims={0}, operand_precision={high,high}
  ROOT %dot-done = f32[2,4]{1,0} dot-done(((f32[2,3]{1,0}, f32[3,4]{1,0}), f32[2,4]{1,0}, u32[]) %dot-start)
}

"""),
]
