import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from xlapy.errors import InvalidArgumentError, ParseError
from xlapy.shape import Layout, PrimitiveType as P, Shape, Tile, UNBOUNDED_SIZE, parse_shape
from xlapy.shape import dtypes
from xlapy.shape.layout import COMBINE_DIMENSION, SplitConfig

# Texts that must print back byte for byte: page 001's examples, XLA's shape printing.
ROUND_TRIP = [
    "bf16[8,1,1280,16384]{3,2,0,1:T(8,128)(2,1)}",  # page 001, add.936
    "bf16[32,32,4096]{2,1,0:T(8,128)(2,1)S(1)}",  # page 001, fusion.3
    "bf16[32,32,8192]{2,1,0:T(8,128)(2,1)S(1)}",
    "bf16[8,1,1280,16384]{3,2,0,1:T(8,128)(2,1)S(1)}",
    "f32[3,5]{1,0:T(2,2)}",  # Tiled layout page, figure 1
    "f32[4,8]{1,0:T(2,4)(2,1)}",  # figure 2
    "f32[2,7,8,11,10]{4,3,2,1,0:T(*,*,2,*,3)}",  # combined dimensions
    "f32[2,3]{0,1}",
    "f32[2,3]{1,0}",
    "f32[]",
    "pred[]",
    "s32[0]{0}",
    "f32[0,5]{1,0}",
    "f32[<=10]{0}",
    "f32[?,3]{1,0}",
    "f32[<=4,?,5]{2,1,0}",
    "token[]",
    "opaque[]",
    "()",
    "(f32[], s32[2]{0})",
    "((f32[1]{0}, ()), token[], (pred[]))",
    "s4[16]{0:E(4)}",
    "u8[256]{0:T(1024)(128)(4,1)L(1024)}",
    "f32[128]{0:T(128)L(4)E(32)S(5)}",
    "f32[]{:S(1)}",
    "f32[10,20]{0,1:SC(1:5,8)}",
    "f32[16]{0:M(8)}",
    "f8e4m3fn[4,4]{0,1}",
    "c128[2]{0}",
]


@pytest.mark.parametrize("text", ROUND_TRIP)
def test_round_trip(text):
    shape = parse_shape(text)
    assert str(shape) == text
    assert parse_shape(str(shape)) == shape


def test_spec_example_anatomy():
    s = parse_shape("bf16[8,1,1280,16384]{3,2,0,1:T(8,128)(2,1)}")
    assert s.element_type is P.BF16
    assert s.dimensions == (8, 1, 1280, 16384)
    assert s.layout.minor_to_major == (3, 2, 0, 1)
    assert s.layout.tiles == (Tile((8, 128)), Tile((2, 1)))
    assert s.layout.memory_space == 0
    assert parse_shape("bf16[32,32,4096]{2,1,0:T(8,128)(2,1)S(1)}").layout.memory_space == 1


def test_missing_layout_is_default_as_xla_parser():
    assert str(parse_shape("f32[3,4]")) == "f32[3,4]{1,0}"
    assert str(parse_shape("(f32[3,4], s32[2,2,2])")) == "(f32[3,4]{1,0}, s32[2,2,2]{2,1,0})"
    s = parse_shape("f32[3,4]", fill_missing_layouts=False)
    assert s.layout is None and str(s) == "f32[3,4]"
    assert s != parse_shape("f32[3,4]")  # one has a layout, the other not: XLA's Shape::Equal
    assert s.compatible(parse_shape("f32[3,4]"))


def test_comments_and_spaces_are_skipped():
    assert str(parse_shape(" f32[ 3 , 4 ] { 0 , 1 } ")) == "f32[3,4]{0,1}"
    assert str(parse_shape("/*x*/f32[3]")) == "f32[3]{0}"


def test_print_without_layout():
    s = parse_shape("(f32[3,4]{0,1}, bf16[2]{0:S(1)})")
    assert s.to_string(print_layout=False) == "(f32[3,4], bf16[2])"


def test_helpers():
    s = parse_shape("f32[2,1,5,1]")
    assert s.rank == 4 and s.true_rank == 2 and s.element_count() == 10
    assert s.dimension(-1) == 1 and s.dimension(-2) == 5 and s.dimension(0) == 2
    assert s.dimension_number(-4) == 0
    assert Shape.array(P.F32, (3, 5)).layout == Layout((1, 0))
    assert Layout.default(3).minor_to_major == (2, 1, 0)
    assert Shape.scalar(P.S32).is_scalar() and Shape.scalar(P.S32).element_count() == 1
    assert parse_shape("f32[0,3]").element_count() == 0
    t = parse_shape("(f32[], (s32[2], token[]))")
    assert t.is_tuple() and t.subshape((1, 0)) == parse_shape("s32[2]")
    assert [idx for idx, _ in t.leaves()] == [(0,), (1, 0), (1, 1)]
    assert parse_shape("f32[<=3]").is_dynamic() and not parse_shape("f32[3]").is_dynamic()
    assert parse_shape("f32[?]").is_unbounded_dynamic()
    assert parse_shape("f32[?]").dimensions == (UNBOUNDED_SIZE,)
    assert str(parse_shape("f32[3,4]{0,1}").with_default_layout()) == "f32[3,4]{1,0}"


def test_equality_is_layout_sensitive_and_compatibility_is_not():
    a, b = parse_shape("f32[3,4]{1,0}"), parse_shape("f32[3,4]{0,1}")
    assert a != b and a.compatible(b) and hash(a) == hash(parse_shape("f32[3,4]"))
    assert parse_shape("f32[3]{0:S(1)}") != parse_shape("f32[3]{0}")
    assert parse_shape("f32[<=3]").compatible(parse_shape("f32[3]"))
    assert parse_shape("f32[<=3]") != parse_shape("f32[3]")
    assert parse_shape("f32[?]").compatible(parse_shape("f32[7]"))
    assert not parse_shape("f32[3]").compatible(parse_shape("s32[3]"))
    assert parse_shape("f32[3]").compatible_ignoring_element_type(parse_shape("s32[3]"))
    assert parse_shape("f32[3]").compatible_ignoring_fp_precision(parse_shape("bf16[3]"))
    assert not parse_shape("f32[3]").compatible(parse_shape("f32[3,1]"))
    assert parse_shape("(f32[], token[])") == parse_shape("(f32[], token[])")
    assert parse_shape("(f32[])") != parse_shape("f32[]")
    assert parse_shape("token[]") != parse_shape("opaque[]")


@pytest.mark.parametrize(
    "text,message",
    [
        ("f32[3,4]{0,0}", r"minor_to_major field has duplicate values: \{0, 0\}; shape: f32\[3,4\]"),
        ("f32[3,4]{0,2}", r"minor_to_major field has out-of-bounds value: \{0, 2\}; shape: f32\[3,4\]"),
        ("f32[3,4]{1}", r"Dimensions size is 2, but minor to major size is 1\."),
        ("f32[3]{0:T(0)}", r"tile dimension size must be positive \(or '\*'\), got 0"),
        ("f32[3]{0:T(-2)}", r"tile dimension size must be positive \(or '\*'\), got -2"),
        ("f32[3]{0:T()}", r"a tile must have at least one dimension"),
        ("f32[3,3]{1,0:T(2,*)}", r"the most minor entry of tile \(2,\*\) is '\*'"),
        ("f32[3]{0:L(0)}", r"tail_padding_alignment_in_elements field is <= 0"),
        ("f32[3]{0:#(s32)}", r"expecting an unsigned integer type"),
        ("f32[3]{0:#(u32)}", r"layout has a index_primitive_type, but is not a sparse array"),
        ("f32[3]{0:D(X)}", r"expected a DimLevelType abbreviation \(D, C, or S\), found 'X'"),
        ("f32[3]{0:P(f32[3])}", r"Layout has physical shape, but is not for a sparse array"),
        ("f32[3]{0:S(1)T(2)}", r"expected '\}' to end the layout, found 'T'"),
        ("f32[3]{0:X(1)}", r"expected '\}' to end the layout, found 'X'"),
        ("f32[10]{0:SC(0:5,3)}", r"split indices must be strictly increasing"),
        ("f32[10]{0:SC(0:10)}", r"split index is out of bounds: 10 \(dim size 10\)"),
        ("f32[3,x]", r"expects integer \(a dimension size, '<=' bound or '\?'\), found 'x'"),
        ("f32[3,-1]", r"dimension size must be >= 0, got -1"),
        ("f33[2]", r"expected primitive type .* found 'f33'"),
        ("f32[3] junk", r"extra content after shape: 'junk'"),
        ("f32[3", r"expected ',' or '\]' in dimension list, found end of input"),
        ("(f32[], s32[]", r"expected ',' or '\)' in tuple shape, found end of input"),
        ("token[3]", r"token shapes have no dimensions: write token\[\]"),
        ("tuple[]", r"'tuple' is not a shape"),
        ("", r"expected primitive type"),
    ],
)
def test_parse_errors(text, message):
    with pytest.raises(ParseError, match=message) as info:
        parse_shape(text)
    err = info.value
    assert err.line == 1 and 1 <= err.column <= len(text) + 1
    assert str(err).splitlines()[1:] == ([err.excerpt, " " * (err.column - 1) + "^"])


def test_parse_error_points_at_the_column():
    with pytest.raises(ParseError) as info:
        parse_shape("f32[3,4]{0,0}")
    assert (info.value.line, info.value.column) == (1, 9)
    assert str(info.value).endswith("f32[3,4]{0,0}\n        ^")


def test_api_errors():
    with pytest.raises(InvalidArgumentError, match="dimension number 2 is out of range for f32"):
        parse_shape("f32[3,4]").dimension(2)
    with pytest.raises(InvalidArgumentError, match="dimension number -3 is out of range"):
        parse_shape("f32[3,4]").dimension(-3)
    with pytest.raises(InvalidArgumentError, match="rank: expected an array shape, got \\(f32\\[\\]\\)"):
        parse_shape("(f32[])").rank
    with pytest.raises(InvalidArgumentError, match="dimension sizes must be >= 0, got -2"):
        Shape.array(P.F32, (3, -2))
    with pytest.raises(InvalidArgumentError, match="element type must be an array type, got token"):
        Shape.array(P.TOKEN, ())
    with pytest.raises(InvalidArgumentError, match="layout minor_to_major field contains 1 elements"):
        Shape.array(P.F32, (2, 2), layout=Layout((0,)))
    with pytest.raises(InvalidArgumentError, match="tuple_shape: index 2 out of range"):
        parse_shape("(f32[], f32[])").tuple_shape(2)
    with pytest.raises(InvalidArgumentError, match="element_count: shape f32\\[\\?\\]\\{0\\} has an unbounded"):
        parse_shape("f32[?]").element_count()


def test_layout_construction_and_text():
    layout = Layout((1, 0), tiles=(Tile((8, 128)), Tile((2, 1))), memory_space=1)
    assert str(layout) == "{1,0:T(8,128)(2,1)S(1)}"
    assert str(Layout((0,), tiles=((COMBINE_DIMENSION, 4),))) == "{0:T(*,4)}"
    assert str(Layout((0,), split_configs=(SplitConfig(0, (3, 5)),))) == "{0:SC(0:3,5)}"
    assert str(Layout(())) == "{}"
    assert layout.major(0) == 0 and layout.minor(0) == 1
    assert layout.replace(memory_space=0) == Layout((1, 0), tiles=(Tile((8, 128)), Tile((2, 1))))


# -- property: parse(print(shape)) == shape -------------------------------------------------

_array_types = st.sampled_from(list(dtypes.ARRAY_TYPES))


@st.composite
def array_shapes(draw):
    et = draw(_array_types)
    rank = draw(st.integers(0, 4))
    dims, dyn = [], []
    for _ in range(rank):
        kind = draw(st.sampled_from(["static", "static", "bounded", "unbounded"]))
        if kind == "unbounded":
            dims.append(UNBOUNDED_SIZE)
            dyn.append(True)
        else:
            # product of the sizes at most 2**56: the byte size stays in int64
            dims.append(draw(st.integers(0, 2 ** (56 // rank))))
            dyn.append(kind == "bounded")
    m2m = draw(st.permutations(list(range(rank))))
    tiles = []
    for _ in range(draw(st.integers(0, 2))):
        n = draw(st.integers(1, max(1, rank)))
        tile = [draw(st.integers(1, 256)) for _ in range(n)]
        if n > 1 and draw(st.booleans()) and n <= rank:
            tile[0] = COMBINE_DIMENSION
        tiles.append(Tile(tuple(tile)))
    layout = Layout(
        tuple(m2m),
        tiles=tuple(tiles),
        tail_padding_alignment_in_elements=draw(st.sampled_from([1, 2, 1024])),
        element_size_in_bits=draw(st.sampled_from([0, 4, 8])),
        memory_space=draw(st.sampled_from([0, 1, 5, 7])),
    )
    return Shape.array(et, dims, layout=layout, dynamic_dimensions=dyn)


shapes = st.recursive(
    array_shapes() | st.just(Shape.token()) | st.just(Shape.opaque()),
    lambda children: st.lists(children, max_size=3).map(Shape.tuple),
    max_leaves=6,
)


@settings(max_examples=300, deadline=None)
@given(shapes)
def test_print_parse_round_trip(shape):
    text = str(shape)
    again = parse_shape(text)
    assert again == shape
    assert str(again) == text


# -- sizes: XLA keeps dimension sizes, element counts and byte sizes in int64 ----------------

INT64_MAX = 2**63 - 1


@pytest.mark.parametrize("text,column,message", [
    (f"f32[{2**63}]", 5, (f"dimension size {2**63} is out of range: dimension sizes are int64, "
                         f"at most {INT64_MAX}")),
    (f"f32[2,{2**64}]", 7, f"dimension size {2**64} is out of range"),
    (f"f32[{2**62}]", 1, (f"Shape f32[{2**62}] size may overflow int64_t ({2**62} elements of 4 "
                         f"bytes are {2**64} bytes; at most {INT64_MAX} bytes)")),
    (f"f32[{2**62},4]", 1, f"Shape f32[{2**62},4] size may overflow int64_t"),
    (f"c128[{2**60}]", 1, "size may overflow int64_t"),
    (f"f32[<={2**62}]", 1, f"Shape f32[<={2**62}] size may overflow int64_t"),
    # an intermediate product that overflows counts, as XLA's ExtentProduct
    (f"pred[{2**40},{2**40},0]", 1, ("size may overflow int64_t (its element count overflows "
                                     "before the size-0 dimension")),
])
def test_shape_size_must_fit_int64(text, column, message):
    with pytest.raises(ParseError) as info:
        parse_shape(text)
    assert message in info.value.message
    assert info.value.column == column


def test_shape_size_limits_are_exact():
    assert str(parse_shape(f"s8[{INT64_MAX}]")) == f"s8[{INT64_MAX}]{{0}}"
    assert str(parse_shape(f"f32[{(2**63 - 4) // 4}]")) == f"f32[{(2**63 - 4) // 4}]{{0}}"
    assert str(parse_shape(f"f32[?,{2**61 - 1}]")) == f"f32[?,{2**61 - 1}]{{1,0}}"
    with pytest.raises(ParseError, match="size may overflow int64_t"):
        parse_shape(f"f32[{2**61}]")
    with pytest.raises(InvalidArgumentError, match="size may overflow int64_t"):
        Shape.array(P.S32, (2**40, 2**40))
    with pytest.raises(InvalidArgumentError, match="dimension 1 of f32\\[3,"):
        Shape.array(P.F32, (3, 2**70))
    # a wider element type can overflow a shape that fit
    small = Shape.array(P.F32, (2**60,))
    with pytest.raises(InvalidArgumentError, match=f"Shape c128\\[{2**60}\\] size may overflow"):
        small.with_element_type(P.C128)
