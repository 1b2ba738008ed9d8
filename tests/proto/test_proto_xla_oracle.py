"""xlapy's protos against XLA's own (jaxlib 0.10.2's XLA, the oracle; skipped without jax).

For every jax fixture text (tests/fixtures/jax/*.hlo) and every row of the HLO round-trip
table (tests/hlo/roundtrip_rows_*.py) that this XLA parses: XLA's text -> XLA's proto ->
xlapy prints exactly what XLA prints for that proto; xlapy's module -> xlapy's proto -> XLA
reads it and prints what it prints for its own proto (without metadata: XLA renumbers the
stack frames of a proto it did not write). Literals of every element type serialize to the
bytes XLA writes; shardings read and write as XLA's HloSharding does."""

from __future__ import annotations

import glob
import os
import sys

import pytest

jax = pytest.importorskip("jax")
pytest.importorskip("google.protobuf")
from jax._src.lib import xla_client as xc  # noqa: E402

import xlapy  # noqa: E402
from xlapy.proto import module_to_proto, parse_hlo_module_proto  # noqa: E402
from xlapy.proto.schema import message_class  # noqa: E402
from xlapy.proto.shapes import literal_from_proto, literal_to_proto  # noqa: E402
from xlapy.proto.sharding import sharding_from_proto, sharding_to_proto  # noqa: E402

TESTS = os.path.dirname(os.path.dirname(__file__))
JAX_TEXTS = sorted(glob.glob(os.path.join(TESTS, "fixtures", "jax", "*.hlo")))

sys.path.insert(0, os.path.join(TESTS, "hlo"))
from roundtrip_rows_own import OWN_LONG_ROWS, OWN_SHORT_ROWS  # noqa: E402
from roundtrip_rows_xla_long import LONG_ROWS  # noqa: E402
from roundtrip_rows_xla_other import (  # noqa: E402
    ACCEPTED_ROWS,
    COMPACT_GTE_ROWS,
    DEFAULT_FORM_ROWS,
)
from roundtrip_rows_xla_short import NON_ROUNDTRIP_ROWS, SHORT_ROWS  # noqa: E402

ROWS = {row[0]: row[1] for row in OWN_LONG_ROWS + OWN_SHORT_ROWS + LONG_ROWS + ACCEPTED_ROWS
        + COMPACT_GTE_ROWS + DEFAULT_FORM_ROWS + NON_ROUNDTRIP_ROWS + SHORT_ROWS}

#: Rows whose proto round trip is not expected to work, and why.
LEFT_OUT = {
    "TupleConstant": "XLA prints a large tuple constant as {...}, which no parser reads back",
    "OriginalValueRecoveryTable": "the origin recovery table (an HloModuleProto inside the "
                                  "module) is not converted: xlapy keeps it as text",
    "OriginalValueRecoveryTableWithNestedQuotes": "the origin recovery table is not converted",
    "DesugarParsingTest_CallStart_CallDone_Bind_Output": "an async chain whose wrapped call is "
        "bound late: its proto holds the unbound call, which xlapy's shape rule rejects",
    "DesugarParsingTest_CallStart_Incomplete_Chain": "an incomplete async chain (the wrapped "
        "call has no operands): rejected by xlapy's shape rule",
    "DesugarParsingTest_FusionStart_Incomplete_Chain": "an incomplete async chain (the wrapped "
        "fusion has no operands): rejected by xlapy's shape rule",
    "AsyncDone_BindOutputBuffer": "an async-done binding its output late: rejected by xlapy's "
                                  "shape rule",
    "PipelinedSendRecv": "XLA cannot read back the proto it writes for this module",
    "AllReduceWithMeshAxesReplicaGroupList": "mesh-axes replica groups: XLA writes them in "
        "HloInstructionProto field 93, which xlapy's proto reader does not decode yet (their "
        "text form is read)",
}

NO_METADATA = xc.hlo.HloPrintOptions()
NO_METADATA.print_metadata = False


def _xla_module(text: str):
    try:
        return xc.hlo.hlo_module_from_text(text)
    except Exception as e:  # noqa: BLE001 - this XLA predates the syntax
        pytest.skip(f"jaxlib's XLA does not parse it: {str(e).splitlines()[0][:120]}")


def _check(text: str) -> None:
    proto = _xla_module(text).as_serialized_hlo_module_proto()
    from_xla = xc.hlo.HloModule.from_serialized_hlo_module_proto(proto)
    mine = parse_hlo_module_proto(proto)
    assert mine.to_string() == from_xla.to_string()
    xlapy.verify_module(mine, allow_mixed_precision=True)  # as the round-trip table does
    again = xlapy.parse_hlo_module(from_xla.to_string())
    data = module_to_proto(again).SerializeToString()
    assert xc.hlo.HloModule.from_serialized_hlo_module_proto(data).to_string(NO_METADATA) == \
        from_xla.to_string(NO_METADATA)


@pytest.mark.parametrize("path", JAX_TEXTS, ids=[os.path.basename(p) for p in JAX_TEXTS])
def test_jax_fixture_through_xla_proto(path):
    with open(path, encoding="utf-8") as f:
        _check(f.read())


@pytest.mark.parametrize("name", sorted(ROWS))
def test_roundtrip_row_through_xla_proto(name):
    if name in LEFT_OUT:
        pytest.skip(LEFT_OUT[name])
    _check(ROWS[name])


#: Module-level data the tables above do not hold.
EXTRA_TEXTS = {
    "aliases_and_donors": """HloModule m, input_output_alias={ {0}: (0, {1}, must-alias), {1}: (1, {}, may-alias) }, buffer_donor={ (0, {0}) }, frontend_attributes={attr_a="x",attr_b="{y}"}

ENTRY e {
  p = (f32[2], f32[3]) parameter(0)
  q = s32[4] parameter(1)
  a = f32[3] get-tuple-element(p), index=1
  ROOT t = (f32[3], s32[4]) tuple(a, q)
}
""",
    "metadata_payloads": """HloModule m

ENTRY e {
  p = f32[2] parameter(0), metadata={op_name="a" metadata_payload="payload one"}
  n = f32[2] negate(p), metadata={op_type="Neg" op_name="b" source_file="x.py" source_line=3 source_end_line=4 source_column=5 source_end_column=6 metadata_payload="payload one"}
  ROOT e = f32[2] exponential(n), metadata={metadata_payload="two"}
}
""",
}


@pytest.mark.parametrize("name", sorted(EXTRA_TEXTS))
def test_module_data_through_xla_proto(name):
    _check(EXTRA_TEXTS[name])


def test_metadata_payloads_are_one_table():
    module = xlapy.parse_hlo_module(EXTRA_TEXTS["metadata_payloads"])
    mp = module_to_proto(module)
    assert list(mp.metadata_payloads) == [b"payload one", b"two"]


LITERALS = [
    "pred[4] {1, 0, 1, 1}", "s2[3] {-2, 1, 0}", "s4[4] {-8, -1, 0, 7}", "u4[3] {0, 9, 15}",
    "u2[2] {3, 1}", "s8[3] {-128, 0, 127}", "u8[2] {0, 255}", "s16[2] {-32768, 7}",
    "u16[2] {65535, 1}", "s32[2] {-2147483648, 5}", "u32[1] {4294967295}",
    "s64[2] {-9223372036854775808, 3}", "u64[1] {18446744073709551615}",
    "f16[3] {-inf, 0.5, nan}", "bf16[3] {1.5, -1, 3.140625}",
    "f32[2,3]{0,1} {{1, 2, 3}, {4, 5, 6}}",
    "f64[3] {1e-300, -inf, 2.5}", "f8e5m2[2] {1.5, -inf}", "f8e4m3fn[2] {448, -0.5}",
    "f8e4m3[2] {1, 2}", "f8e4m3b11fnuz[1] {0.25}", "f8e3m4[2] {1.5, -3}",
    "f8e5m2fnuz[1] {2}", "f8e4m3fnuz[1] {-1}", "f8e8m0fnu[2] {1, 0.5}",
    "f4e2m1fn[4] {0.5, -1, 6, 0}", "c64[2] {(1, 2), (-inf, nan)}", "c128[1] {(0.5, -0.25)}",
    "s32[2,2,3]{1,2,0} {{{1, 2, 3}, {4, 5, 6}}, {{7, 8, 9}, {10, 11, 12}}}", "f32[] 42",
    "s32[0] {}",
]


@pytest.mark.parametrize("text", LITERALS)
def test_literal_bytes_are_xlas(text):
    shape_text, value = text.split(" ", 1)
    hm = _xla_module(f"HloModule m\nENTRY e {{ ROOT c = {shape_text} constant({value}) }}")
    mp = message_class("HloModuleProto")()
    mp.ParseFromString(hm.as_serialized_hlo_module_proto())
    (constant,) = [i for c in mp.computations for i in c.instructions if i.opcode == "constant"]
    literal = xlapy.parse_literal_with_shape(text)
    assert literal_from_proto(constant.literal) == literal
    mine = message_class("LiteralProto")()
    literal_to_proto(literal, mine)
    assert mine.SerializeToString() == constant.literal.SerializeToString()


SHARDINGS = [
    "{replicated}", "{manual}", "{unknown}", "{unreduced}", "{maximal device=3}",
    "{devices=[2,1]0,1}", "{devices=[2,2]0,2,1,3}", "{devices=[2,2]<=[4]}",
    "{devices=[2,2]<=[2,2]T(1,0)}", "{devices=[4,2]<=[2,4]T(1,0)}",
    "{devices=[2,1,2]0,1,2,3 last_tile_dim_replicate}",
    "{devices=[2,1,2]<=[4] last_tile_dims={manual}}",
    "{devices=[1,2,2]<=[4] last_tile_dims={manual, replicated}}",
    "{replicated shard_as 1}", "{devices=[2,1]0,1 shard_like 3}",
    "{{replicated}, {maximal device=0}}", "{}",
    "{{replicated}, {manual}, {replicated}, {maximal device=1}, {replicated}, {devices=[2]0,1}}",
]


@pytest.mark.parametrize("text", SHARDINGS)
def test_sharding_text_and_proto_are_xlas(text):
    op = message_class("OpSharding")()
    sharding_to_proto(text, op)
    xla = xc.HloSharding.from_string(text)
    assert op.SerializeToString() == xla.to_proto().SerializeToString()
    assert sharding_from_proto(op) == str(xla)


def test_sharding_metadata_is_written_as_xla_writes_it():
    text = ('{devices=[2]0,1 metadata={{op_name="a"}, {op_name="b" source_file="x.py" '
            'source_line=3}}}')
    op = message_class("OpSharding")()
    sharding_to_proto(text, op)
    assert op.SerializeToString() == xc.HloSharding.from_string(text).to_proto() \
        .SerializeToString()
    assert sharding_from_proto(op) == text
