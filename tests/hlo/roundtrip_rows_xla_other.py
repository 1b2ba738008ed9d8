"""Module texts from the TEST_F cases of XLA's xla/hlo/parser/hlo_parser_test.cc that are
not in its tables. Data only; used by test_roundtrip_table.py.
"""

#: Printed back unchanged with XLA's default HloPrintOptions() (ShortConstant prints its
#: large constant as {...}; NegativeNan and NanPayload keep the sign and payload of NaNs).
DEFAULT_FORM_ROWS = [
    ("ShortConstant", r"""HloModule ShortConstant_module, entry_computation_layout={()->f32[67,89]{1,0}}

ENTRY %ShortConstant.v4 () -> f32[67,89] {
  ROOT %constant.1 = f32[67,89]{1,0} constant({...})
}

"""),
    ("NegativeNan", r"""HloModule NegativeNan_module, entry_computation_layout={()->bf16[2]{0}}

ENTRY %NegativeNan () -> bf16[2] {
  ROOT %constant = bf16[2]{0} constant({-nan, -nan})
}

"""),
    ("NanPayload", r"""HloModule NanPayload_module, entry_computation_layout={()->bf16[2]{0}}

ENTRY %NanPayload () -> bf16[2] {
  ROOT %constant = bf16[2]{0} constant({-nan(0x7f), -nan(0x3f)})
}

"""),
]

#: Printed back (whitespace-stripped) with ShortParsable() plus compact_gte,
#: print_operand_shape and print_percent: operands name tuples as %p0#1#0.
COMPACT_GTE_ROWS = [
    ("CompactGteRoundTrip", r"""HloModule test, entry_computation_layout={((f32[10]{0}, f16[10]{0}))->f32[10]{0}}

ENTRY %test {
  %p0 = (f32[10]{0}, f16[10]{0}) parameter(0)
  ROOT %root = f32[10]{0} add(f32[10]{0} %p0#0, f32[10]{0} %p0#0)
}"""),
    ("CompactGteMixedNestingRoundTrip", r"""HloModule test, entry_computation_layout={((f32[10]{0}, (f32[20]{0}, f32[30]{0})))->((f32[20]{0}, f32[30]{0}), f32[20]{0})}

ENTRY %test {
  %p0 = (f32[10]{0}, (f32[20]{0}, f32[30]{0})) parameter(0)
  ROOT %root = ((f32[20]{0}, f32[30]{0}), f32[20]{0}) tuple((f32[20]{0}, f32[30]{0}) %p0#1, f32[20]{0} %p0#1#0)
}"""),
    ("CompactGteOnTupleRoundTrip", r"""HloModule test, entry_computation_layout={(f32[10]{0}, f16[10]{0})->f32[10]{0}}

ENTRY %test {
  %p0 = f32[10]{0} parameter(0)
  %p1 = f16[10]{0} parameter(1)
  %t = (f32[10]{0}, f16[10]{0}) tuple(f32[10]{0} %p0, f16[10]{0} %p1)
  ROOT %root = f32[10]{0} negate(f32[10]{0} %t#0)
}"""),
]

# Left out of ACCEPTED_ROWS (XLA accepts them unverified; xlapy runs each op's shape rule while
# parsing, so a declared shape the rule rejects is a ParseError there):
# - DesugarParsingTest_DotStart, _DotStart_WithZeroOperands, _DotStart_WithOneOperand,
#   _Dot_Incomplete_Chain: a dot-start binding fewer than two operands (XLA pads the wrapped dot
#   with dummy f32[1] parameters) or a dot with no contracting dimensions declared f32[128,128].
# - DesugarParsingTest_CallStart_OverBinding (binds 2 operands to a 1-parameter callee),
#   _CallStart_LateBinding_WithLayout (a tuple declared (s32[1024]) of an s32[] operand),
#   _CallStart_RootShape_CallDone_Mismatch (the done's f32[64] against the callee's f32[32]).
# - AsyncStartWithZeroOperands/OneOperand/TwoOperands, AsyncUpdate_BindOutputBuffer,
#   AsyncOps_ParserGuard, AsyncUpdate_AsyncStart_ShapeMismatch_Allowed: async shapes that do not
#   match the wrapped computation (f32[3,2] against an f32[2,3] root, ...).
# - AsyncDoneNoAsyncStart, AsyncUpdateAndAsyncDoneNoAsyncStart: a tuple declared
#   ((f32[2,3]), f32[2,3], u32[]) of three array operands.
# - SparsityConfig_RHSOnly, SparsityConfig_Both: sparsity configs without idx= (0), which the
#   convolution rule rejects as XLA's verifier does (idx must name a metadata operand >= 2).

#: (name, text, verified): texts XLA's tests parse (and verify, when ``verified``); each
#: must parse here, verify when XLA verifies, and print a text that parses back to the same text.
ACCEPTED_ROWS = [
    ("MetadataWithCholesky", r"""HloModule metadata_with_cholesky
ENTRY %blabla (a: f32[1,291,291]) -> f32[1,291,291] {
  %a = f32[1,291,291] parameter(0)
  %out = f32[1,291,291] cholesky(f32[1,291,291] %a), lower=true, metadata={op_type="Cholesky" op_name="Cholesky" profile_type={1}}
}
""", True),
    ("MoreConstants", r"""HloModule SelectScalarS32True_module

ENTRY %SelectScalarS32True.v4 () -> s32[] {
  %constant.2 = pred[] constant(true)
  %constant.1 = s32[] constant(-42), sharding={replicated}
  %constant = s32[] constant(42)
  %select = s32[] select(pred[] %constant.2, s32[] %constant.1, s32[] %constant)
}

""", True),
    ("ConstantBf16NoOverflow", r"""
  HloModule test_module
  ENTRY test {
    ROOT c = bf16[] constant(-65505)
  }""", True),
    ("ConstantUnsignedUnderflow", r"""
      HloModule ConstantUnsignedUnderflow_module
      ENTRY %ConstantUnsignedUnderflow () -> u64[] {
        ROOT %constant = u64[] constant(-1)
      }""", False),
    ("ConstantUnsignedInt64Overflow", r"""
      HloModule ConstantUnsignedOverflow_module
      ENTRY %ConstantUnsignedOverflow () -> u64[] {
        ROOT %constant = u64[] constant(9223372036854775808)
      }""", False),
    ("ConstantWithExp", r"""HloModule ConstantWithExp_module

ENTRY %ConstantWithExp.v4 () -> f32[] {
  %constant.1 = f32[] constant(3e+2)
}

""", True),
    ("AttributesAnyOrder", r"""HloModule any_order_module

ENTRY %Convolve1D1Window_0.v3 (input: f32[1,2,1], filter: f32[1,1,1]) -> f32[1,4,1] {
  %input = f32[1,2,1]{2,1,0} parameter(0)
  %copy = f32[1,2,1]{2,0,1} copy(f32[1,2,1]{2,1,0} %input)
  %filter = f32[1,1,1]{2,1,0} parameter(1)
  ROOT %convolution = f32[1,4,1]{2,0,1} convolution(f32[1,2,1]{2,0,1} %copy, f32[1,1,1]{2,1,0} %filter), feature_group_count=1, sharding={maximal device=1}, backend_config="foo", dim_labels=b0f_0io->b0f, window={pad=1_1 size=1}
}

""", True),
    ("SliceAllowOmitStride1", r"""HloModule slice_module

ENTRY %slice.v2 (p0: f32[3,3,4,4]) -> f32[3,3,2,4] {
  %p0 = f32[3,3,4,4]{3,2,1,0} parameter(0)
  ROOT %slice = f32[3,3,2,4]{3,2,1,0} slice(f32[3,3,4,4]{3,2,1,0} %p0), slice={[0:3], [0:3], [0:4:2], [0:4]}
}

""", True),
    ("CommaBetweenSubAttributes", r"""HloModule test_comma_module

ENTRY %test_comma.v4 () -> f32[] {
  ROOT %constant = f32[] constant(-4.2), metadata={source_line=5, op_type="::const"}
}

""", True),
    ("SameNameDiffComputations", r"""HloModule same_names:
add {
  p0 = f32[] parameter(0)
  p1 = f32[] parameter(1)
  ROOT result = f32[] add(p0, p1)
}

ENTRY ReduceR3ToR2 {
  p0 = f32[8,16,256]{2,1,0} parameter(0)
  p1 = f32[] constant(0)
  ROOT result = f32[8,16]{1,0} reduce(p0, p1), dimensions={2}, to_apply=add
}
""", True),
    ("ParseReshapeUnboundedDynamicOperandStillParses", r"""
HloModule test_module
ENTRY %test_entry {
  %a = f32[?] parameter(0)
  ROOT %result = f32[3] reshape(%a)
}
""", False),
    ("IsScheduledIsFalse", r"""
HloModule axpy_module, is_scheduled=false

ENTRY %axpy.v5 (alpha: f32[], x: f32[2,4], y: f32[2,4]) -> f32[2,4] {
  %alpha = f32[] parameter(0)
  %broadcast = f32[2,4]{1,0} broadcast(f32[] %alpha), dimensions={}
  %x = f32[2,4]{1,0} parameter(1)
  %multiply = f32[2,4]{1,0} multiply(f32[2,4]{1,0} %broadcast, f32[2,4]{1,0} %x)
  %y = f32[2,4]{1,0} parameter(2)
  ROOT %add = f32[2,4]{1,0} add(f32[2,4]{1,0} %multiply, f32[2,4]{1,0} %y)
}
""", True),
    ("IsScheduledNotPresent", r"""
HloModule axpy_module

ENTRY %axpy.v5 (alpha: f32[], x: f32[2,4], y: f32[2,4]) -> f32[2,4] {
  %alpha = f32[] parameter(0)
  %broadcast = f32[2,4]{1,0} broadcast(f32[] %alpha), dimensions={}
  %x = f32[2,4]{1,0} parameter(1)
  %multiply = f32[2,4]{1,0} multiply(f32[2,4]{1,0} %broadcast, f32[2,4]{1,0} %x)
  %y = f32[2,4]{1,0} parameter(2)
  ROOT %add = f32[2,4]{1,0} add(f32[2,4]{1,0} %multiply, f32[2,4]{1,0} %y)
}
""", True),
    ("IsScheduledIsTrue", r"""
HloModule axpy_module, is_scheduled=true

ENTRY %axpy.v5 (alpha: f32[], x: f32[2,4], y: f32[2,4]) -> f32[2,4] {
  %alpha = f32[] parameter(0)
  %broadcast = f32[2,4]{1,0} broadcast(f32[] %alpha), dimensions={}
  %x = f32[2,4]{1,0} parameter(1)
  %multiply = f32[2,4]{1,0} multiply(f32[2,4]{1,0} %broadcast, f32[2,4]{1,0} %x)
  %y = f32[2,4]{1,0} parameter(2)
  ROOT %add = f32[2,4]{1,0} add(f32[2,4]{1,0} %multiply, f32[2,4]{1,0} %y)
}
""", True),
    ("IsScheduledIsTrueDifferentOrder", r"""
HloModule axpy_module, is_scheduled=true

ENTRY %axpy.v5 (alpha: f32[], x: f32[2,4], y: f32[2,4]) -> f32[2,4] {
  %alpha = f32[] parameter(0)
  %x = f32[2,4]{1,0} parameter(1)
  %y = f32[2,4]{1,0} parameter(2)
  %broadcast = f32[2,4]{1,0} broadcast(f32[] %alpha), dimensions={}
  %multiply = f32[2,4]{1,0} multiply(f32[2,4]{1,0} %broadcast, f32[2,4]{1,0} %x)
  ROOT %add = f32[2,4]{1,0} add(f32[2,4]{1,0} %multiply, f32[2,4]{1,0} %y)
}
""", True),
    ("DesugarParsingTest_CustomCall_Incomplete_Chain", r"""
HloModule main

ENTRY main {
  p0 = f32[] parameter(0)
  p1 = f32[] parameter(1)
  ROOT %cc-start = ((), (), s32[]) custom-call-start(), custom_call_target="foo"
}
""", False),
    ("DesugarParsingTest_CustomCall_LateBinding", r"""
HloModule main

ENTRY main {
  p0 = s32[1024] parameter(0)
  p1 = s32[] parameter(1)
  cc-start = ((), (), s32[]) custom-call-start(),
                             custom_call_target="foo",
                             async_execution_thread="parallel_thread"
  cc-update = ((s32[1024], s32[]), s32[1024], s32[])
              custom-call-update(cc-start, p0, p1)
  ROOT cc-done = s32[1024] custom-call-done(cc-update)
}
  """, False),
    ("DesugarParsingTest_CallStart_CallDone_Bind_Output", r"""
HloModule main

ENTRY main {
  p0 = f32[] parameter(0)
  p1 = s32[] parameter(1)
  call-start.0 = ((f32[], s32[]), (), s32[]) call-start(p0, p1), to_apply={
    p0 = f32[] parameter(0)
    p1 = s32[] parameter(1)
    ROOT tuple.0 = tuple(p0, p1)
  }, async_execution_thread="parallel_thread"
  ROOT call-done.0 = (f32[], s32[]) call-done(call-start.0)
}
  """, False),
    ("DesugarParsingTest_CallStart_LateBinding", r"""
HloModule main

foo {
  p0 = f32[] parameter(0)
  p1 = f32[] parameter(1)
  ROOT add = f32[] add(p0, p1)
}

ENTRY main {
  p0 = f32[] parameter(0)
  p1 = f32[] parameter(1)
  %call-start = ((), (), s32[]) call-start(), to_apply={
    p0 = f32[] parameter(0)
    p1 = f32[] parameter(1)
    ROOT add = f32[] add(p0, p1)
  }
  %call-update = ((f32[], f32[]), f32[], s32[]) call-update(%call-start, p0, p1)
  ROOT %call-done = f32[] call-done(%call-update)
}
""", False),
    ("DesugarParsingTest_CallStart_MixedBinding", r"""
HloModule main

ENTRY main {
  buffer.0 = s32[1024]{0:T(1024)} custom-call(), custom_call_target="AllocateBuffer"
  call-start.0 = ((s32[1024]{0:T(1024)}), (), s32[]) call-start(buffer.0), to_apply={
    arg.0 = s32[1024]{0:T(1024)} parameter(0)
    arg.1 = s32[] parameter(1)
    ROOT tuple.0 = (s32[1024]{0:T(1024)}, s32[]) tuple(arg.0, arg.1)
  }
  constant.0 = s32[] constant(0)
  call-update.0 = ((s32[1024]{0:T(1024)}, s32[]), (s32[1024]{0:T(1024)}, s32[]), ()) call-update(call-start.0, constant.0)
  ROOT call-done.0 = (s32[1024]{0:T(1024)}, s32[]) call-done(call-update.0)
}
  """, False),
    ("DesugarParsingTest_CallStart_Incomplete_Chain", r"""
HloModule main

ENTRY main {
  p0 = f32[] parameter(0)
  p1 = f32[] parameter(1)
  ROOT %call-start = ((), (), s32[]) call-start(), to_apply={
    p0 = f32[] parameter(0)
    p1 = f32[] parameter(1)
    ROOT add = f32[] add(p0, p1)
  }
}
""", False),
    ("DesugarParsingTest_CallStart_Incomplete_Binding", r"""
HloModule main

ENTRY main {
  p0 = f32[] parameter(0)
  p1 = f32[] parameter(1)
  %call-start = ((), (), s32[]) call-start(), to_apply={
    p0 = f32[] parameter(0)
    p1 = f32[] parameter(1)
    ROOT add = f32[] add(p0, p1)
  }
  %call-update = ((f32[]), (), s32[]) call-update(%call-start, p0)
  ROOT %call-done = f32[] call-done(%call-update)
}
""", False),
    ("DesugarParsingTest_FusionStart_Incomplete_Chain", r"""
HloModule main

ENTRY main {
  p0 = f32[] parameter(0)
  p1 = f32[] parameter(1)
  ROOT %fusion-start = ((), (), s32[]) fusion-start(), kind=kLoop, calls={
    p0 = f32[] parameter(0)
    p1 = f32[] parameter(1)
    ROOT add = f32[] add(p0, p1)
  }
}
""", False),
    ("DesugarParsingTest_FusionStart_Incomplete_Binding", r"""
HloModule main

ENTRY main {
  p0 = f32[] parameter(0)
  p1 = f32[] parameter(1)
  %fusion-start = ((), (), s32[]) fusion-start(), kind=kLoop, calls={
    p0 = f32[] parameter(0)
    p1 = f32[] parameter(1)
    ROOT add = f32[] add(p0, p1)
  }
  %fusion-update = ((f32[]), (), s32[]) fusion-update(%fusion-start, p0)
  ROOT %fusion-done = f32[] fusion-done(%fusion-update)
}
""", False),
    ("DesugarParsingTest_CallStart_MultipleUpdates", r"""
HloModule main

ENTRY main {
  p0 = f32[] parameter(0)
  p1 = f32[] parameter(1)
  %call-start = ((), (), s32[]) call-start(), to_apply={
    p0 = f32[] parameter(0)
    p1 = f32[] parameter(1)
    ROOT add = f32[] add(p0, p1)
  }
  %call-update-1 = ((f32[]), (), s32[]) call-update(%call-start, p0)
  %call-update-2 = ((f32[], f32[]), (), s32[]) call-update(%call-update-1, p1)
  ROOT %call-done = f32[] call-done(%call-update-2)
}
""", False),
    ("AllowShapeWhitespace", r"""
HloModule module

ENTRY entry {
  ROOT root = f32[ 1, 2,3, 4, 5]{0, 1, 2,3, 4 } parameter(0)
}
""", True),
    ("InferUnaryShape", r"""HloModule InferUnaryShapeTest
ENTRY InferUnaryShape {
  a = f32[2,10]{1,0} parameter(0)
  ROOT v = abs(a)
}
""", True),
    ("InferBinaryShape", r"""HloModule InferBinaryShapeTest
ENTRY InferBinaryShape {
  a = f32[2,10]{1,0} parameter(0)
  b = f32[2,10]{1,0} parameter(1)
  ROOT sum = add(a, b)
}
""", True),
    ("InferTernaryShape", r"""HloModule InferTernaryShapeTest
ENTRY InferTernaryShape {
  p = pred[] constant(true)
  f = s32[] constant(-42)
  t = s32[] constant(42)
  ROOT select = select(p, f, t)
}
""", True),
    ("InferDotShape", r"""HloModule InferDotShapeTest
ENTRY InferDotShape {
  a = f32[2,10]{1,0} parameter(0)
  b = f32[10,2]{1,0} parameter(1)
  ROOT dot = dot(a, b), lhs_batch_dims={0}, lhs_contracting_dims={1}, rhs_batch_dims={1}, rhs_contracting_dims={0}
}
""", True),
    ("InferTupleShape", r"""HloModule InferTupleShapeTest
ENTRY InferTupleShape () -> s32[2,3] {
  c0 = f32[3]{0} constant({1, 2, 3})
  c1 = s32[2,3]{1,0} constant({ { 1, 2, 3 }, { 4, 5, 6 } })
  tuple = tuple(c0, c1)
  ROOT get = get-tuple-element(tuple), index=1, sharding={maximal device=0}
}
""", True),
    ("InferShapeMixedExplicitShape", r"""HloModule InferUnaryShapeTest
Negate {
  x = f32[] parameter(0)
  ROOT negate = negate(x)
}

Identity {
  y = f32[] parameter(0)
  ROOT copy = copy(y)
}

ENTRY InferUnaryShape {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  p = pred[] parameter(2)
  c = f32[] add(a, b)
  ROOT conditional = conditional(p, a, c), true_computation=Negate, false_computation=Identity
}
""", True),
    ("CheckAliasPassthroughParams", r"""
HloModule TestModule, alias_passthrough_params=true

ENTRY TestComputation {
    p0 = f16[2048,1024] parameter(0)
    p1 = f16[2048,1024] parameter(1)
    ROOT root = (f16[2048,1024], f16[2048,1024]) tuple(p0, p1)
}
""", True),
    ("CheckReplicaCount", r"""
HloModule TestModule, replica_count=5

ENTRY TestComputation {
    p0 = f16[2048,1024] parameter(0)
    p1 = f16[2048,1024] parameter(1)
    ROOT root = (f16[2048,1024], f16[2048,1024]) tuple(p0, p1)
}
""", True),
    ("CheckNumPartitions", r"""
HloModule TestModule, num_partitions=3

ENTRY TestComputation {
    p0 = f16[2048,1024] parameter(0)
    p1 = f16[2048,1024] parameter(1)
    ROOT root = (f16[2048,1024], f16[2048,1024]) tuple(p0, p1)
}
""", True),
    ("CheckFrontendAttributes", r"""
HloModule TestModule, frontend_attributes={attr_name="attr_value"}

ENTRY TestComputation {
    p0 = f16[2048,1024] parameter(0)
    p1 = f16[2048,1024] parameter(1)
    ROOT root = (f16[2048,1024], f16[2048,1024]) tuple(p0, p1)
}
""", True),
    ("CheckAllowSpmdShardingPropagationToParameters", r"""
HloModule TestModule, allow_spmd_sharding_propagation_to_parameters=true

ENTRY TestComputation {
    p0 = f16[2048,1024] parameter(0)
    p1 = f16[2048,1024] parameter(1)
    ROOT root = (f16[2048,1024], f16[2048,1024]) tuple(p0, p1)
}
""", True),
    ("CheckAllowSpmdShardingPropagationToParametersVec", r"""
HloModule TestModule, allow_spmd_sharding_propagation_to_parameters={true,false}

ENTRY TestComputation {
    p0 = f16[2048,1024] parameter(0)
    p1 = f16[2048,1024] parameter(1)
    ROOT root = (f16[2048,1024], f16[2048,1024]) tuple(p0, p1)
}
""", True),
    ("CheckAllowSpmdShardingPropagationToOutput", r"""
HloModule TestModule, allow_spmd_sharding_propagation_to_output=true

ENTRY TestComputation {
    p0 = f16[2048,1024] parameter(0)
    p1 = f16[2048,1024] parameter(1)
    ROOT root = (f16[2048,1024], f16[2048,1024]) tuple(p0, p1)
}
""", True),
    ("CheckAllowSpmdShardingPropagationToOutputVec", r"""
HloModule TestModule, allow_spmd_sharding_propagation_to_output={true,false}

ENTRY TestComputation {
    p0 = f16[2048,1024] parameter(0)
    p1 = f16[2048,1024] parameter(1)
    ROOT root = (f16[2048,1024], f16[2048,1024]) tuple(p0, p1)
}
""", True),
    ("ParseSingleEntryComputation", r"""
ENTRY test {
  ROOT root =  f32[1,64,10,128]{1,0,2,3} parameter(0)
}""", False),
    ("ParseMultiComputationsWithEntry", r"""
ENTRY comp1 {
  ROOT root =  f32[1,64,10,128]{1,0,2,3} parameter(0)
}
comp2 {
  ROOT root =  f32[1,64,10,128]{3,2,1,0} parameter(0)
}""", False),
    ("NontrivialAsyncOpRoundTrip", r"""
HloModule module

%async_wrapped {
  %async_param.1 = s32[1024]{0} parameter(0)
  %copy = s32[1024]{0} copy(s32[1024]{0} %async_param.1)
  %async_param.2 = s32[256]{0} parameter(1)
  %async_param.3 = s32[] parameter(2)
  ROOT %dus = s32[1024]{0} dynamic-update-slice(s32[1024]{0} %copy, s32[256]{0} %async_param.2, s32[] %async_param.3)
}

ENTRY %main {
  %input.5 = s32[] parameter(1)
  %broadcast = s32[1024]{0} broadcast(s32[] %input.5), dimensions={}
  %input.0 = s32[256]{0} parameter(0)
  %async-start = ((s32[1024]{0}, s32[256]{0}, s32[]), s32[1024]{0}, u32[]) async-start(%broadcast, %input.0, %input.5), calls=%async_wrapped
  ROOT %async-done = s32[1024]{0} async-done(((s32[1024]{0}, s32[256]{0}, s32[]), s32[1024]{0}, u32[]) %async-start), calls=%async_wrapped
}
""", False),
    ("AsyncDoneWithTransparentIntermediaries", r"""
HloModule Module

async_computation {
  p0 = f32[2,3] parameter(0)
  ROOT custom-call = f32[3,2] custom-call(p0), custom_call_target="foo"
}

ENTRY AsyncDoneWithTransparentIntermediaries {
  p0 = f32[2,3] parameter(0)
  async-start = ((f32[2,3]), f32[3,2], s32[]) async-start(p0), calls=async_computation
  barrier = ((f32[2,3]), f32[3,2], s32[]) opt-barrier(async-start)
  tup = (((f32[2,3]), f32[3,2], s32[])) tuple(barrier)
  gte = ((f32[2,3]), f32[3,2], s32[]) get-tuple-element(tup), index=0
  copy = ((f32[2,3]), f32[3,2], s32[]) copy(gte)
  ROOT async-done = f32[3,2] async-done(copy)
}
  """, False),
    ("PipelinedSendRecv", r"""
  HloModule test
  cond {
    param = (u32[], (u32[2], u32[], token[]), (u32[2], u32[], token[])) parameter(0)
    count = get-tuple-element(%param), index=0
    ub = u32[] constant(1)
    ROOT result = pred[] compare(count, ub), direction=LT
  }

  body {
    param = (u32[], (u32[2], u32[], token[]), (u32[2], u32[], token[])) parameter(0)
    count = get-tuple-element(%param), index=0

    recv.0 = (u32[2], u32[], token[]) get-tuple-element(param), index=1
    recv-done.0 = (u32[2], token[]) recv-done(recv.0), channel_id=1,
      frontend_attributes={
        _xla_send_recv_pipeline="0"
      }
    recv-data.0 = u32[2] get-tuple-element(recv-done.0), index=0

    c1 = u32[] constant(1)
    new_count = u32[] add(count, c1)

    send.0 = (u32[2], u32[], token[]) get-tuple-element(param), index=2
    send-done.0 = (u32[2], token[]) recv-done(send.0), channel_id=1,
      frontend_attributes={
        _xla_send_recv_pipeline="0"
      }

    after-all.0.n = token[] after-all()
    recv.0.n = (u32[2], u32[], token[]) recv(after-all.0.n), channel_id=1,
      frontend_attributes={
        _xla_send_recv_source_target_pairs="{{1,0}}",
        _xla_send_recv_pipeline="0"
      }


    after-all.1.n = token[] after-all()
    send.0.n = (u32[2], u32[], token[]) send(recv-data.0, after-all.1.n),
      channel_id=1,
      frontend_attributes={
        _xla_send_recv_source_target_pairs="{{1,0}}",
        _xla_send_recv_pipeline="0"
      }

    ROOT result = (u32[], (u32[2], u32[], token[]), (u32[2], u32[], token[])) tuple(new_count, recv.0.n, send.0.n)
  }

  ENTRY test_computation {
    c0 = u32[] constant(0)
    init = u32[2] broadcast(c0), dimensions={}
    after-all.0.p = token[] after-all()
    recv.0.p = (u32[2], u32[], token[]) recv(after-all.0.p), channel_id=1,
      frontend_attributes={
        _xla_send_recv_source_target_pairs="{{1,0}}",
        _xla_send_recv_pipeline="0"
      }

    after-all.1.p = token[] after-all()
    send.0.p = (u32[2], u32[], token[]) send(init, after-all.1.p),
      channel_id=1,
      frontend_attributes={
        _xla_send_recv_source_target_pairs="{{1,0}}",
        _xla_send_recv_pipeline="0"
      }

    while_init = (u32[], (u32[2], u32[], token[]), (u32[2], u32[], token[])) tuple(c0, recv.0.p, send.0.p)
    while_result = (u32[], (u32[2], u32[], token[]), (u32[2], u32[], token[])) while(while_init), body=body, condition=cond

    recv.0.q = (u32[2], u32[], token[]) get-tuple-element(while_result), index=1
    recv-done.0.q = (u32[2], token[]) recv-done(recv.0.q), channel_id=1,
      frontend_attributes={
        _xla_send_recv_pipeline="0"
      }
    send.0.q = (u32[2], u32[], token[]) get-tuple-element(while_result), index=2
    send-done.0.q = token[] send-done(send.0.q), channel_id=1,
      frontend_attributes={
        _xla_send_recv_pipeline="0"
      }

    ROOT recv-data.0.q = u32[2] get-tuple-element(recv-done.0.q), index=0
      }""", False),
    ("ReplicaIdWithLayout", r"""
  HloModule ReplicaId

  ENTRY ReplicaId {
    ROOT replica-id.18600 = u32[]{:T(128)} replica-id()
  }
  """, False),
    ("DeduplicateOriginalValues", r"""HloModule test, entry_computation_layout={(s32[])->s32[]}

%fused_computation (param_0: s32[]) -> s32[] {
  %param_0 = s32[] parameter(0)
  %constant = s32[] constant(32)
  ROOT %add = s32[] add(%param_0, %constant), origin={{"concatenate"}}
}

ENTRY %test (Arg_0: s32[]) -> s32[] {
  %Arg_0 = s32[] parameter(0), origin={{"Arg_0"}}
  ROOT %pad_add_fusion = s32[] fusion(%Arg_0), kind=kLoop, calls=%fused_computation, origin={{"concatenate"}}
}""", False),
    ("TranscendentalAccuracyMode", r"""
  HloModule exponential_hw

  ENTRY exponential_hw {
    %exponent = f32[] parameter(0)
    ROOT %exponential = f32[] exponential(f32[] %exponent), result_accuracy={mode=highest}
  }
  """, False),
    ("TranscendentalAccuracyRtol", r"""
  HloModule exponential_hw

  ENTRY exponential_hw {
    %exponent = f32[] parameter(0)
    ROOT %exponential = f32[] exponential(f32[] %exponent), result_accuracy={tolerance={rtol=0.5, atol=1.0, ulps=2}}
  }
  """, False),
    ("TranscendentalAccuracyNoConfig", r"""
  HloModule exponential_hw

  ENTRY exponential_hw {
    %exponent = f32[] parameter(0)
    ROOT %exponential = f32[] exponential(f32[] %exponent)
  }
  """, False),
    ("ResultAccuracyToProto", r"""
  HloModule exponential_hw

  ENTRY exponential_hw {
    %exponent = f32[] parameter(0)
    ROOT %exponential = f32[] exponential(f32[] %exponent), result_accuracy={tolerance={rtol=0.5, atol=1.0, ulps=2}}
  }
  """, False),
    ("AsyncDone_BindOutputBuffer", r"""
HloModule Module

async_computation {
  p0 = f32[2,3] parameter(0)
  p1 = f32[2,3] parameter(1)
  ROOT custom-call = f32[3,2] custom-call(p0), custom_call_target="foo"
}

ENTRY AsyncUpdateVariadic {
  p0 = f32[2,3] parameter(0)
  p1 = f32[2,3] parameter(1)
  async-start = ((f32[2,3], f32[2,3]), (), s32[]) async-start(p0, p1), calls=async_computation
  ROOT async-done = f32[3,2] async-done(async-start)
}
  """, False),
    ("AsyncOps_LateBinding_NonDesugared", r"""
HloModule Module

async_computation.1 {
  p0 = f32[2,3] parameter(0)
  p1 = f32[2,3] parameter(1)
  p2 = f32[2,3] parameter(2)
  ROOT custom-call = f32[3,2] custom-call(p0), custom_call_target="foo"
}

async_computation.2 {
  p0 = f32[2,3] parameter(0)
  p1 = f32[2,3] parameter(1)
  ROOT custom-call = f32[3,2] custom-call(p0), custom_call_target="foo"
}

ENTRY Entry {
  p0 = f32[2,3] parameter(0)
  p1 = f32[2,3] parameter(1)
  p2 = f32[2,3] parameter(2)

  // Chain 1: 0 operands -> 1 -> 2 -> 3
  async-start.1 = ((), f32[3,2], s32[]) async-start(), calls=async_computation.1
  async-update.1a = ((f32[2,3]), f32[3,2], s32[]) async-update(async-start.1, p0)
  async-update.1b = ((f32[2,3], f32[2,3]), f32[3,2], s32[]) async-update(async-update.1a, p1)
  async-update.1c = ((f32[2,3], f32[2,3], f32[2,3]), f32[3,2], s32[]) async-update(async-update.1b, p2)
  async-done.1 = f32[3,2] async-done(async-update.1c)

  // Chain 2: 0 operands -> 2 at once
  async-start.2 = ((), f32[3,2], s32[]) async-start(), calls=async_computation.2
  async-update.2a = ((f32[2,3], f32[2,3]), f32[3,2], s32[]) async-update(async-start.2, p0, p1)
  async-done.2 = f32[3,2] async-done(async-update.2a)

  ROOT tuple = tuple(async-done.1, async-done.2)
}
  """, False),
    ("LoopCrossingAsync", r"""
HloModule LoopCrossingAsync

async_computation {
  p = f32[1024] parameter(0)
  ROOT custom-call = f32[1024] custom-call(p), custom_call_target="foo"
}

while_cond {
  param = (s32[], ((f32[1024]), f32[1024], s32[])) parameter(0)
  count = s32[] get-tuple-element(param), index=0
  limit = s32[] constant(10)
  ROOT cmp = pred[] compare(count, limit), direction=LT
}

while_body {
  param = (s32[], ((f32[1024]), f32[1024], s32[])) parameter(0)
  count = s32[] get-tuple-element(param), index=0
  one = s32[] constant(1)
  new_count = s32[] add(count, one)
  
  async_state = ((f32[1024]), f32[1024], s32[]) get-tuple-element(param), index=1
  
  async_update = ((f32[1024]), f32[1024], s32[]) async-update(async_state), calls=async_computation
  
  ROOT body_root = (s32[], ((f32[1024]), f32[1024], s32[])) tuple(new_count, async_update)
}

ENTRY main {
  p0 = f32[1024] parameter(0)
  async-start = ((f32[1024]), f32[1024], s32[]) async-start(p0), calls=async_computation
  
  start_count = s32[] constant(0)
  iter_init = (s32[], ((f32[1024]), f32[1024], s32[])) tuple(start_count, async-start)
  
  while_loop = (s32[], ((f32[1024]), f32[1024], s32[])) while(iter_init), condition=while_cond, body=while_body
  
  final_async_state = ((f32[1024]), f32[1024], s32[]) get-tuple-element(while_loop), index=1
  
  ROOT async-done = f32[1024] async-done(final_async_state), calls=async_computation
}
  """, True),
    ("LoopCrossingAsyncDynamicUpdateSliceSyntaxSugar", r"""
HloModule LoopCrossingAsyncDynamicUpdateSliceSyntaxSugar

while_cond (state: (f32[10,10], ((f32[10,10], f32[2,2], s32[], s32[]), f32[10,10], s32[]))) -> pred[] {
  state = (f32[10,10], ((f32[10,10], f32[2,2], s32[], s32[]), f32[10,10], s32[])) parameter(0)
  ROOT cond = pred[] constant(true)
}

while_body (state: (f32[10,10], ((f32[10,10], f32[2,2], s32[], s32[]), f32[10,10], s32[]))) -> (f32[10,10], ((f32[10,10], f32[2,2], s32[], s32[]), f32[10,10], s32[])) {
  state = (f32[10,10], ((f32[10,10], f32[2,2], s32[], s32[]), f32[10,10], s32[])) parameter(0)
  val = f32[10,10]{1,0} get-tuple-element(state), index=0
  async_state = ((f32[10,10], f32[2,2], s32[], s32[]), f32[10,10], s32[]) get-tuple-element(state), index=1

  async_update = ((f32[10,10], f32[2,2], s32[], s32[]), f32[10,10], s32[]) dynamic-update-slice-update(async_state)
  done = f32[10,10]{1,0} dynamic-update-slice-done(async_update)
  
  slice = f32[2,2]{1,0} constant({ {1.0, 2.0}, {3.0, 4.0} })
  zero = s32[] constant(0)
  next_start = ((f32[10,10], f32[2,2], s32[], s32[]), f32[10,10], s32[]) dynamic-update-slice-start(done, slice, zero, zero)
  ROOT next_state = (f32[10,10], ((f32[10,10], f32[2,2], s32[], s32[]), f32[10,10], s32[])) tuple(done, next_start)
}

ENTRY Entry (p0: f32[10,10], p1: f32[2,2], idx0: s32[], idx1: s32[]) -> f32[10,10] {
  p0 = f32[10,10]{1,0} parameter(0)
  p1 = f32[2,2]{1,0} parameter(1)
  idx0 = s32[] parameter(2)
  idx1 = s32[] parameter(3)
  async_start = ((f32[10,10], f32[2,2], s32[], s32[]), f32[10,10], s32[]) dynamic-update-slice-start(p0, p1, idx0, idx1)
  init = (f32[10,10], ((f32[10,10], f32[2,2], s32[], s32[]), f32[10,10], s32[])) tuple(p0, async_start)
  loop = (f32[10,10], ((f32[10,10], f32[2,2], s32[], s32[]), f32[10,10], s32[])) while(init), condition=while_cond, body=while_body
  post_loop_async = ((f32[10,10], f32[2,2], s32[], s32[]), f32[10,10], s32[]) get-tuple-element(loop), index=1
  ROOT post_loop_done = f32[10,10]{1,0} dynamic-update-slice-done(post_loop_async)
}
  """, True),
    ("LoopCrossingAsyncDynamicUpdateSliceExplicit", r"""
HloModule LoopCrossingAsyncDynamicUpdateSliceExplicit

async_dus (base: f32[100], update: f32[10], idx: s32[]) -> f32[100] {
  base = f32[100]{0} parameter(0)
  update = f32[10]{0} parameter(1)
  idx = s32[] parameter(2)
  ROOT dynamic-update-slice = f32[100]{0} dynamic-update-slice(base, update, idx)
}

while_cond (state: (s32[], ((f32[100], f32[10], s32[]), f32[100], s32[]))) -> pred[] {
  state = (s32[], ((f32[100], f32[10], s32[]), f32[100], s32[])) parameter(0)
  count = s32[] get-tuple-element(state), index=0
  limit = s32[] constant(5)
  ROOT cond = pred[] compare(count, limit), direction=LT
}

while_body (state: (s32[], ((f32[100], f32[10], s32[]), f32[100], s32[]))) -> (s32[], ((f32[100], f32[10], s32[]), f32[100], s32[])) {
  state = (s32[], ((f32[100], f32[10], s32[]), f32[100], s32[])) parameter(0)
  count = s32[] get-tuple-element(state), index=0
  one = s32[] constant(1)
  next_count = s32[] add(count, one)

  async_state = ((f32[100], f32[10], s32[]), f32[100], s32[]) get-tuple-element(state), index=1

  async-update = ((f32[100], f32[10], s32[]), f32[100], s32[]) async-update(async_state), calls=async_dus
  done = f32[100]{0} async-done(async-update), calls=async_dus

  update = f32[10]{0} constant({1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0})
  next_start = ((f32[100], f32[10], s32[]), f32[100], s32[]) async-start(done, update, next_count), calls=async_dus
  ROOT next_state = (s32[], ((f32[100], f32[10], s32[]), f32[100], s32[])) tuple(next_count, next_start)
}

ENTRY Entry (p0: f32[100], update: f32[10], idx: s32[]) -> f32[100] {
  p0 = f32[100]{0} parameter(0)
  update = f32[10]{0} parameter(1)
  idx = s32[] parameter(2)
  async-start = ((f32[100], f32[10], s32[]), f32[100], s32[]) async-start(p0, update, idx), calls=async_dus
  init_count = s32[] constant(0)
  init = (s32[], ((f32[100], f32[10], s32[]), f32[100], s32[])) tuple(init_count, async-start)
  loop = (s32[], ((f32[100], f32[10], s32[]), f32[100], s32[])) while(init), condition=while_cond, body=while_body
  post_loop_async = ((f32[100], f32[10], s32[]), f32[100], s32[]) get-tuple-element(loop), index=1
  ROOT post_loop_done = f32[100]{0} async-done(post_loop_async), calls=async_dus
}
  """, True),
    ("AsyncUpdateWithAliasing", r"""
HloModule module

async_computation {
  p0 = f32[32,32] parameter(0)
  ROOT custom-call = (f32[32,32]) custom-call(p0), custom_call_target="foo"
}

ENTRY main {
  p = f32[32,32] parameter(0)
  async-start = ((f32[32,32]), (f32[32,32]), s32[]) async-start(p), calls=async_computation
  async-update = ((f32[32,32]), (f32[32,32]), s32[]) async-update(async-start), output_to_operand_aliasing={{2}: (0, {2})}
  ROOT async-done = (f32[32,32]) async-done(async-update)
}""", False),
    ("AllReduceWithMode", r"""
HloModule m

add {
  lhs = f32[] parameter(0)
  rhs = f32[] parameter(1)
  ROOT add = f32[] add(lhs, rhs)
}

ENTRY entry {
  input = f32[8]{0} parameter(0)
  ROOT ar = f32[8]{0} all-reduce(input), mode=cross_replica, replica_groups={}, to_apply=add
}
""", True),
    ("AllReduceWithMode_NoMode", r"""
HloModule m

add {
  lhs = f32[] parameter(0)
  rhs = f32[] parameter(1)
  ROOT add = f32[] add(lhs, rhs)
}

ENTRY entry {
  input = f32[8]{0} parameter(0)
  ROOT ar = f32[8]{0} all-reduce(input),  replica_groups={}, to_apply=add
}
""", True),
]
