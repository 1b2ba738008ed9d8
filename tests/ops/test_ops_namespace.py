"""The builder namespace ``xlapy.ops``: XLA's op names, each defined by exactly one family."""

import importlib

from xlapy import ops


def test_no_name_is_exported_by_two_families():
    owners: dict[str, str] = {}
    clashes = []
    for family in ops._FAMILIES:
        try:
            module = importlib.import_module(f"xlapy.ops.{family}")
        except ModuleNotFoundError:
            continue
        for name in module.__all__:
            if name in owners:
                clashes.append((name, owners[name], family))
            owners[name] = family
    assert clashes == []


def test_xla_builder_names_are_present():
    for name in ("Parameter", "Add", "Sub", "Mul", "Div", "Rem", "Max", "Min", "Pow", "Atan2",
                 "Eq", "LtTotalOrder", "Clamp", "Select", "ConvertElementType",
                 "BitcastConvertType", "Broadcast", "BroadcastInDim", "Reshape", "Collapse",
                 "Transpose", "Rev", "Slice", "DynamicSlice", "DynamicUpdateSlice", "Pad",
                 "ConcatInDim", "Iota", "Tuple", "GetTupleElement", "Reduce", "ReduceWindow",
                 "SelectAndScatter", "Dot", "DotGeneral", "Conv", "ConvGeneralDilated",
                 "BatchNormTraining", "Fft", "Cholesky", "TriangularSolve", "Gather", "Scatter",
                 "Sort", "Map", "Call", "While", "Conditional", "CustomCall", "AfterAll",
                 "AllReduce", "AllGather", "ReduceScatter", "AllToAll", "CollectivePermute",
                 "CrossReplicaSum", "ReplicaId", "Send", "Recv", "Infeed", "Outfeed",
                 "RngUniform", "RngNormal", "RngBitGenerator", "OptimizationBarrier",
                 "GetDimensionSize", "SetDimensionSize", "ReducePrecision", "Constant"):
        assert callable(getattr(ops, name)), name
    assert ops.Transpose.__module__ == "xlapy.ops.shape_ops"
