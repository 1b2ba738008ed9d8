"""Gather and scatter dimension numbers: the values and their multi-key text syntax.

Owns: GatherDimensionNumbers and ScatterDimensionNumbers (frozen dataclasses with the field
names of XLA's protos) and their attribute kinds. XLA prints them as several keys in a fixed
order (HloGatherInstruction::PrintGatherDimensionNumbers and
HloScatterInstruction::PrintScatterDimensionNumbers); the batching keys are omitted when
empty:

    offset_dims={4,5}, collapsed_slice_dims={0}, start_index_map={0,1},
    [operand_batching_dims={..}, start_indices_batching_dims={..},] index_vector_dim=1

    update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0},
    [input_batching_dims={..}, scatter_indices_batching_dims={..},] index_vector_dim=1

The parser requires every key but the batching ones. Imports only the attribute base layer.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from xlapy.errors import InvalidArgumentError
from xlapy.hlo.attrs import AttrKind, check_int, check_int_list, read_int_list


def _braced(values) -> str:
    return "{" + ",".join(str(v) for v in values) + "}"


@dataclass(frozen=True)
class GatherDimensionNumbers:
    """xla.GatherDimensionNumbers: ``GatherDimensionNumbers(offset_dims=(1,),
    collapsed_slice_dims=(0,), start_index_map=(0,), index_vector_dim=1)``."""

    offset_dims: tuple[int, ...] = ()
    collapsed_slice_dims: tuple[int, ...] = ()
    start_index_map: tuple[int, ...] = ()
    index_vector_dim: int = 0
    operand_batching_dims: tuple[int, ...] = ()
    start_indices_batching_dims: tuple[int, ...] = ()

    def __post_init__(self):
        where = "GatherDimensionNumbers"
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "index_vector_dim":
                object.__setattr__(self, f.name, check_int(value, f"{where}: {f.name}"))
            else:
                object.__setattr__(self, f.name, check_int_list(value, f"{where}: {f.name}"))


@dataclass(frozen=True)
class ScatterDimensionNumbers:
    """xla.ScatterDimensionNumbers: ``ScatterDimensionNumbers(update_window_dims=(1,),
    inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,), index_vector_dim=1)``."""

    update_window_dims: tuple[int, ...] = ()
    inserted_window_dims: tuple[int, ...] = ()
    scatter_dims_to_operand_dims: tuple[int, ...] = ()
    index_vector_dim: int = 0
    input_batching_dims: tuple[int, ...] = ()
    scatter_indices_batching_dims: tuple[int, ...] = ()

    def __post_init__(self):
        where = "ScatterDimensionNumbers"
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "index_vector_dim":
                object.__setattr__(self, f.name, check_int(value, f"{where}: {f.name}"))
            else:
                object.__setattr__(self, f.name, check_int_list(value, f"{where}: {f.name}"))


class _DimensionNumbersKind(AttrKind):
    """Shared multi-key machinery: ``keys`` in print order, the optional (batching) keys
    printed only when non-empty, ``index_vector_dim`` an integer and the rest int lists."""

    cls: type
    optional_keys: tuple[str, ...]

    def check(self, value, where):
        if isinstance(value, self.cls):
            return value
        if isinstance(value, dict):
            unknown = set(value) - set(self.keys)
            if unknown:
                raise InvalidArgumentError(
                    f"{where}: unknown {self.cls.__name__} field(s) {sorted(unknown)}; "
                    f"fields are {', '.join(self.keys)}")
            try:
                return self.cls(**value)
            except InvalidArgumentError as e:
                raise InvalidArgumentError(f"{where}: {e}") from None
        raise InvalidArgumentError(
            f"{where} must be a {self.cls.__name__} (or a dict of its fields), got {value!r}")

    def items(self, spec_name: str, value) -> list[tuple[str, str]]:
        out = []
        for key in self.keys:
            v = getattr(value, key)
            if key == "index_vector_dim":
                out.append((key, str(v)))
            elif v or key not in self.optional_keys:
                out.append((key, _braced(v)))
        return out

    def to_text(self, value) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.items("", value))

    def read_key(self, key: str, sc, ctx) -> Any:
        if key == "index_vector_dim":
            return sc.read_int("an integer (index_vector_dim)")
        return read_int_list(sc)

    def assemble(self, spec_name: str, parts: dict[str, Any], where: str):
        missing = [k for k in self.keys if k not in self.optional_keys and k not in parts]
        if missing:
            raise InvalidArgumentError(
                f"{where}: missing required attribute{'s' if len(missing) > 1 else ''} "
                + ", ".join(missing))
        return self.cls(**parts)


class GatherDimensionNumbersKind(_DimensionNumbersKind):
    name = "gather dimension numbers"
    cls = GatherDimensionNumbers
    keys = ("offset_dims", "collapsed_slice_dims", "start_index_map", "operand_batching_dims",
            "start_indices_batching_dims", "index_vector_dim")
    optional_keys = ("operand_batching_dims", "start_indices_batching_dims")


class ScatterDimensionNumbersKind(_DimensionNumbersKind):
    name = "scatter dimension numbers"
    cls = ScatterDimensionNumbers
    keys = ("update_window_dims", "inserted_window_dims", "scatter_dims_to_operand_dims",
            "input_batching_dims", "scatter_indices_batching_dims", "index_vector_dim")
    optional_keys = ("input_batching_dims", "scatter_indices_batching_dims")


GATHER_DIMENSION_NUMBERS = GatherDimensionNumbersKind()
SCATTER_DIMENSION_NUMBERS = ScatterDimensionNumbersKind()
