"""The ``sharding`` attribute: read (and checked) as XLA's parser reads it, validated against
an instruction's shape as XLA's verifier does; the instruction keeps the text.

Owns: ``read_sharding(sc)`` (HloParserImpl::ParseSharding / ParseSingleSharding, plus the
device-count rule of HloSharding::FromProto, which rejects the module when it reaches XLA's
compiler) and ``validate_sharding(text, shape)`` (HloSharding::Validate, called by the
verifier). Forms: ``{replicated}``, ``{manual}``, ``{unknown}``, ``{unreduced}``, ``{maximal
device=N}``, ``{devices=[d0,d1,...]n0,n1,...}``, ``{devices=[dims]<=[reshape]T(perm)}``,
``last_tile_dim_replicate``, ``last_tile_dims={...}``, ``shard_as N``/``shard_like N``,
``metadata=...``, tuple shardings ``{{...}, {...}}``. Named (mesh) shardings, ``{mesh[...]
...}``, are carried through unchecked.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import prod

from xlapy.errors import InvalidArgumentError
from xlapy.hlo.attrs.numbers import read_balanced
from xlapy.shape import Shape
from xlapy.shape.text import Scanner

#: OpSharding types that may follow last_tile_dims= (subgroup types).
_SUBGROUP_TYPES = ("replicated", "manual", "unreduced", "maximal", "unknown", "other")
_KEYWORDS = ("maximal", "replicated", "manual", "unknown", "unreduced",
             "last_tile_dim_replicate")


@dataclass
class Sharding:
    """What the checks need of a sharding (the text stays the attribute's value)."""

    kind: str  # replicated, maximal, manual, unknown, unreduced, tiled, tuple, named
    tile_dims: tuple[int, ...] = ()
    devices: tuple[int, ...] = ()  # explicit devices (maximal: one); empty for an iota
    iota_dims: tuple[int, ...] = ()  # <=[...] reshape dimensions
    subgroups: int = 0  # trailing tile dimensions that are subgroups, not data dimensions
    elements: list[Sharding] = field(default_factory=list)  # a tuple sharding's leaves

    def text(self) -> str:
        if self.kind != "tiled":
            return self.kind
        dims = ",".join(map(str, self.tile_dims))
        if self.iota_dims:
            return f"devices=[{dims}]<=[{','.join(map(str, self.iota_dims))}]"
        return f"devices=[{dims}]{','.join(map(str, self.devices))}"


def read_sharding(sc: Scanner) -> str:
    """Read a ``sharding=`` value at the scanner's position: check it as XLA does and return
    its text."""
    sc.skip()
    start = sc.pos
    text = read_balanced(sc)
    end = sc.pos
    sub = Scanner(sc.text, sc.what)
    sub.pos = start
    _read(sub)
    if sub.pos != end:
        sub.error(f"unexpected {sub.describe_next()} after the sharding")
    sc.pos = end
    return text


def parse_sharding(text: str) -> Sharding:
    """The structure of a sharding text (raises ParseError as XLA's parser would)."""
    sc = Scanner(text, "sharding")
    out = _read(sc)
    if not sc.at_end():
        sc.error(f"unexpected {sc.describe_next()} after the sharding")
    return out


def _read(sc: Scanner) -> Sharding:
    """HloParserImpl::ParseSharding: ``{`` then a single sharding, or a tuple of them."""
    sc.expect("{", "to start sharding attribute")
    if sc.peek() not in ("{", "}"):
        return _read_single(sc, sc.pos)
    elements = []
    if sc.peek() != "}":
        while True:
            sc.skip()
            pos = sc.pos
            sc.expect("{", "to start sharding attribute")
            elements.append(_read_single(sc, pos))
            if not sc.eat(","):
                break
    sc.expect("}", "to end sharding attribute")
    return Sharding("tuple", elements=elements)


def _ints(sc: Scanner, what: str) -> list[int]:
    values = [sc.read_int(what)]
    while sc.eat(","):
        values.append(sc.read_int(what))
    return values


def _read_single(sc: Scanner, loc: int) -> Sharding:
    """HloParserImpl::ParseSingleSharding after its ``{`` (``loc``: where the sharding
    starts, where XLA points its errors)."""
    if sc.peek_ident() in ("mesh", "maximal_mesh"):  # named sharding: carried through
        sc.pos = sc.text.rfind("{", 0, loc + 1)  # from its '{' to the matching '}'
        read_balanced(sc)
        return Sharding("named")
    seen: set[str] = set()
    devices: list[int] = []
    tile_dims: list[int] = []
    iota_dims: list[int] = []
    perm: list[int] = []
    subgroups = 0
    while not sc.eat("}"):
        sc.skip()
        word_pos = sc.pos
        word = sc.read_ident()
        if word in _KEYWORDS:
            seen.add(word)
        elif word == "device" and sc.eat("="):
            devices = [sc.read_int("an integer: device= attribute must be an integer")]
        elif word == "devices" and sc.eat("="):
            sc.expect("[", "to start sharding devices shape")
            tile_dims = _ints(sc, "an integer in the sharding devices shape")
            sc.expect("]", "to end sharding devices shape")
            if sc.eat("<="):
                sc.expect("[", "to start sharding iota_reshape_dims")
                iota_dims = _ints(sc, "an integer in iota_reshape_dims")
                sc.expect("]", "to end sharding iota_reshape_dims")
                if len(iota_dims) == 1:
                    perm = [0]
                else:
                    if sc.peek_ident() != "T":
                        sc.error("expected 'T(' to start sharding devices iota_transpose_perm")
                    sc.read_ident()
                    sc.expect("(", "to start sharding devices iota_transpose_perm")
                    while True:
                        pos = sc.pos
                        d = sc.read_int("an integer in iota_transpose_perm")
                        if d >= len(iota_dims):
                            sc.error(f"Out of range iota minor_to_major value {d}, expecting "
                                     f"value in range [0, {len(iota_dims)})", pos)
                        perm.append(d)
                        if not sc.eat(","):
                            break
                    sc.expect(")", "to end sharding devices iota_transpose_perm")
            else:
                devices = _ints(sc, "a device number")
        elif word == "metadata" and sc.eat("="):
            read_balanced(sc)
        elif word == "last_tile_dims" and sc.eat("="):
            sc.expect("{", "to start last_tile_dims")
            while True:
                pos = sc.pos
                kind = sc.read_ident()
                if kind not in _SUBGROUP_TYPES:
                    sc.error(f"expected a sharding type ({', '.join(_SUBGROUP_TYPES)}) in "
                             f"last_tile_dims, found {kind or sc.describe_next()}", pos)
                subgroups += 1
                if not sc.eat(","):
                    break
            sc.expect("}", "to end last_tile_dims")
        elif word in ("shard_as", "shard_like"):
            sc.read_int(f"a shard group id after {word}")
        elif word is None:
            sc.error(f"unexpected token {sc.describe_next()} in sharding")
        else:
            sc.error("unknown attribute in sharding: expected device=, devices= metadata= or "
                     "last_tile_dims=", word_pos)
    for kind in ("replicated", "maximal", "manual", "unknown", "unreduced"):
        if kind not in seen:
            continue
        if kind == "maximal":
            if len(devices) != 1:
                sc.error("maximal shardings should have exactly one device assigned", loc)
            return Sharding("maximal", devices=tuple(devices))
        if devices or tile_dims:
            sc.error(f"{kind} shardings should not have any devices assigned", loc)
        return Sharding(kind)
    if not tile_dims:
        sc.error("non-maximal shardings must have a tile assignment list including dimensions",
                 loc)
    if "last_tile_dim_replicate" in seen:
        subgroups = 1
    if iota_dims:
        if len(perm) != len(iota_dims):
            sc.error(f"iota_transpose_perm should have the same rank as iota_reshape_dims : "
                     f"expected {len(iota_dims)}, saw {len(perm)}.", loc)
        if sorted(perm) != list(range(len(iota_dims))):
            sc.error(f"iota_transpose_perm T({','.join(map(str, perm))}) is not a "
                     f"permutation of 0..{len(iota_dims) - 1}", loc)
        count, listed = prod(iota_dims), f"the iota <=[{','.join(map(str, iota_dims))}]"
        xla = (f"iota tile assignment size {count} does not match the tile assignment "
               f"dimensions product {prod(tile_dims)}")
    else:
        if len(devices) <= 1:
            sc.error("non-maximal shardings must have more than one device assigned", loc)
        count, listed = len(devices), "the device list"
        xla = (f"sharding device count {count} does not match the tile assignment size "
               f"{prod(tile_dims)}")
    dims = ",".join(map(str, tile_dims))
    if any(d < 1 for d in tile_dims):
        sc.error(f"the sharding devices shape [{dims}] has a dimension below 1", loc)
    if prod(tile_dims) != count:
        # XLA's parser's words (newer XLA checks it while parsing), then xlapy's
        sc.error(f"{xla} (the tile assignment [{dims}] holds {prod(tile_dims)} devices, but "
                 f"{listed} has {count})", loc)
    return Sharding("tiled", tile_dims=tuple(tile_dims), devices=tuple(devices),
                    iota_dims=tuple(iota_dims), subgroups=subgroups)


def validate_sharding(text: str, shape: Shape) -> None:
    """HloSharding::Validate: the sharding fits ``shape`` (tuple leaves, tile assignment
    rank, devices non-negative and unique). Raises InvalidArgumentError."""
    if shape.is_token():
        return
    sharding = parse_sharding(text)
    try:
        if sharding.kind == "tuple":
            if not shape.is_tuple():
                raise InvalidArgumentError("Sharding is tuple-shaped but validation shape is "
                                           "not.")
            leaves = shape.leaves()
            empty_tuple = not leaves or (len(leaves) == 1 and leaves[0][1].is_empty_tuple())
            if not (empty_tuple and len(sharding.elements) <= 1):
                if len(leaves) != len(sharding.elements):
                    raise InvalidArgumentError(
                        f"Shape {shape.to_string(print_layout=False)} has {len(leaves)} leaf "
                        f"nodes while this sharding has {len(sharding.elements)}")
                for (index, leaf), element in zip(leaves, sharding.elements):
                    try:
                        _validate_leaf(element, leaf)
                    except InvalidArgumentError as e:
                        raise InvalidArgumentError(
                            f"{e} Note: While validating sharding tuple element "
                            f"{{{','.join(map(str, index))}}} which is {{{element.text()}}}"
                        ) from None
        else:
            _validate_leaf(sharding, shape)
    except InvalidArgumentError as e:
        raise InvalidArgumentError(f"{e} Note: While validating sharding {text} against shape "
                                   f"{shape.to_string(print_layout=False)}") from None


def _validate_leaf(sharding: Sharding, shape: Shape) -> None:
    if shape.is_tuple():
        raise InvalidArgumentError("Validation shape is a tuple but sharding is not.")
    if sharding.kind in ("replicated", "manual", "unknown", "unreduced", "named"):
        return
    if sharding.kind == "maximal":
        if sharding.devices[0] < 0:
            raise InvalidArgumentError(f"device {sharding.devices[0]} is negative in tile "
                                       f"assignment")
        return
    rank = len(shape.dimensions) if shape.is_array() else 0
    if len(sharding.tile_dims) - sharding.subgroups != rank:
        raise InvalidArgumentError(
            f"Number of tile assignment dimensions (excluding subgroups) is different than the "
            f"input rank. sharding={{{sharding.text()}}}, input_shape="
            f"{shape.to_string(print_layout=False)}")
    seen = set()
    for device in sharding.devices:
        if device < 0:
            raise InvalidArgumentError(f"device {device} is negative in tile assignment")
        if device in seen:
            raise InvalidArgumentError(f"device {device} is not unique in tile assignment")
        seen.add(device)


__all__ = ["Sharding", "parse_sharding", "read_sharding", "validate_sharding"]
