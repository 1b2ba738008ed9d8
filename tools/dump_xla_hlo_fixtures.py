#!/usr/bin/env python
"""Regenerate ``tests/fixtures/xla_hlo/``: HLO text modules run on real XLA:CPU (jaxlib).

Usage::

    python tools/dump_xla_hlo_fixtures.py [--out tests/fixtures/xla_hlo] [--list]

Where ``tools/dump_jax_fixtures.py`` records what jax programs lower to, this script feeds
XLA hand-written HLO text - ops jax never emits as such (integer ``power`` with arbitrary
exponents, dynamic-(update-)slice and gather with unsigned start indices of every width,
complex maximum/minimum, which jax lowers to compares and selects) - at the edges of their
semantics. Each module goes through XLA's own parser
(``hlo_module_from_text``), the HLO -> StableHLO import and XLA:CPU's compiler, and runs on
the CPU client. For every module ``<name>`` it writes ``<name>.hlo`` (the text as given) and
``<name>.npz`` (inputs ``arg<i>``, outputs ``out<i>`` of the result flattened depth first; the
npz layout of tools/dump_jax_fixtures.py, written with its ``write_npz``), plus
``MANIFEST.json`` (name, description, versions). jax and jaxlib are test-only dependencies:
xlapy never imports them; the tests read these files.

What XLA:CPU does here (jaxlib 0.10.2), which tests/interpreter/test_xla_hlo_fixtures.py pins:

- integer power: square-and-multiply over the exponent's low 6 bits only (2**120 on s64 is
  2**56); an exponent with its sign bit set in the storage width - unsigned ones too, while
  sub-byte types are widened to 8 bits first - gives 1 for base 1, +-1 by parity for base -1
  (all bits set), 0 otherwise.
- dynamic-slice, dynamic-update-slice and gather clamp unsigned start indices by value (a
  u64 start of 2**64 - 1 gives the largest start).
- complex maximum/minimum compare the real parts only: lhs when lhs.re >= rhs.re (<= for
  minimum), else rhs - so rhs when either real part is NaN; the imaginary parts never decide.
- dynamic-update-slice with a start index type too narrow for the largest start (an s8 or
  u8 index into 300 elements, a 16-bit one into 70000) clamps to that largest start
  truncated to the index width (299 -> 43 in 8 bits): the in-place emitter computes the
  clamp in the index's type. The spec's clamp(start, 0, dim - size) does not; xlapy follows
  the spec and the test lists these outputs as XLA:CPU's divergence.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import ml_dtypes
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
from dump_jax_fixtures import write_npz

INT_TYPES = ["s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64"]
SUB_BYTE = {"s4": ml_dtypes.int4, "u4": ml_dtypes.uint4, "s2": ml_dtypes.int2,
            "u2": ml_dtypes.uint2}


def np_dtype(t: str):
    if t in SUB_BYTE:
        return np.dtype(SUB_BYTE[t])
    return np.dtype(("int" if t[0] == "s" else "uint") + t[1:])


def _power_grid(t: str):
    """Bases and exponents around the edges of ``t`` (every pair)."""
    dt = np_dtype(t)
    if t in SUB_BYTE:
        info = ml_dtypes.iinfo(dt)
        values = list(range(int(info.min), int(info.max) + 1))
        bases, exps = values, values
    else:
        info = np.iinfo(dt)
        bases = {0, 1, 2, 3, 5, 7, 16, info.max, info.min, info.max // 2 + 1}
        exps = set(range(70)) | {120, 127, 128, 129, 200, 255, 256, 1000, 65535, 65536,
                                    2**31 - 1, 2**31, 2**32 + 3, 2**63 - 1, 2**63, 2**64 - 1}
        if t[0] == "s":
            bases |= {-1, -2, -3}
            exps |= {-1, -2, -3, -64, -128, info.min}
        bases = sorted(bases)
        exps = sorted(e for e in exps if info.min <= e <= info.max)
    b, e = np.meshgrid(np.array(bases), np.array(exps), indexing="ij")
    return b.ravel().astype(dt), e.ravel().astype(dt)


def power_cases():
    for t in INT_TYPES + list(SUB_BYTE):
        b, e = _power_grid(t)
        n = b.size
        text = (f"HloModule power_{t}\n\nENTRY main {{\n  a = {t}[{n}] parameter(0)\n"
                f"  b = {t}[{n}] parameter(1)\n  ROOT p = {t}[{n}] power(a, b)\n}}\n")
        yield (f"power_{t}", f"integer power on {t}: every pair of edge bases and exponents",
               text, [b, e])


def _start_values(t: str) -> list[int]:
    info = np.iinfo(np_dtype(t))
    values = {0, 1, 2, 3, 4, 5, 6, 42, 43, 44, 100, 127, 128, 129, 200, 255, 256, 299, 300,
              301, 4460, 4461, 4462, 32767, 32768, 40000, 65535, 65536, 70000, 2**31 - 1,
              2**31, 2**32 - 1, 2**32, 2**32 + 1, 2**63 - 1, 2**63, 2**64 - 1, -1, -2, -128,
              -129, -32768, -2**31, -2**63, info.max, info.min, info.max - 1}
    return sorted(v for v in values if info.min <= v <= info.max)


#: (operand size, slice/update size) of the dynamic-(update-)slice modules.
SLICES = [(5, 2), (300, 1), (70000, 3)]


def slice_cases():
    for t in INT_TYPES:
        starts = _start_values(t)
        k = len(starts)
        idx = [np.array(v, np_dtype(t)) for v in starts]
        params = "\n".join(f"  i{j} = {t}[] parameter({j + 1})" for j in range(k))
        for n, size in SLICES:
            ds = "\n".join(f"  d{j} = s32[{size}] dynamic-slice(x, i{j}), "
                           f"dynamic_slice_sizes={{{size}}}" for j in range(k))
            root = ", ".join(f"d{j}" for j in range(k))
            text = (f"HloModule dynamic_slice_{t}_{n}\n\nENTRY main {{\n  x = s32[{n}] "
                    f"parameter(0)\n{params}\n{ds}\n  ROOT t = ({', '.join([f's32[{size}]'] * k)})"
                    f" tuple({root})\n}}\n")
            yield (f"dynamic_slice_{t}_{n}", (f"dynamic-slice of s32[{size}] from s32[{n}] at "
                   f"{t} starts {starts[0]}..{starts[-1]}"),
                   text, [np.arange(n, dtype=np.int32)] + idx)
            params_u = "\n".join(f"  i{j} = {t}[] parameter({j + 2})" for j in range(k))
            dus = "\n".join(f"  d{j} = s8[{n}] dynamic-update-slice(x, u, i{j})"
                            for j in range(k))
            text = (f"HloModule dynamic_update_slice_{t}_{n}\n\nENTRY main {{\n  x = s8[{n}] "
                    f"parameter(0)\n  u = s8[{size}] parameter(1)\n{params_u}\n{dus}\n"
                    f"  ROOT t = ({', '.join([f's8[{n}]'] * k)}) tuple({root})\n}}\n")
            yield (f"dynamic_update_slice_{t}_{n}", (f"dynamic-update-slice of s8[{size}] ones "
                   f"into s8[{n}] zeros at {t} starts {starts[0]}..{starts[-1]}"),
                   text, [np.zeros(n, np.int8), np.ones(size, np.int8)] + idx)


def gather_cases():
    for t in INT_TYPES:
        starts = np.array(_start_values(t), np_dtype(t)).reshape(-1, 1)
        k = starts.shape[0]
        text = (f"HloModule gather_{t}\n\nENTRY main {{\n  x = s32[300] parameter(0)\n"
                f"  i = {t}[{k},1] parameter(1)\n  ROOT g = s32[{k}] gather(x, i), "
                f"offset_dims={{}}, collapsed_slice_dims={{0}}, start_index_map={{0}}, "
                f"index_vector_dim=1, slice_sizes={{1}}\n}}\n")
        yield (f"gather_{t}", f"gather of single elements of s32[300] at {t} starts",
               text, [np.arange(300, dtype=np.int32), starts])


#: Real and imaginary parts of the complex maximum/minimum operands: NaN of both signs,
#: infinities, signed zeros, ordinary values (no denormals: XLA:CPU compares with them
#: flushed, a numerics option of its own, docs/numerics.md).
COMPLEX_PARTS = [np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 2.5, -3.0]


def complex_minmax_cases():
    for t, part in (("c64", np.float32), ("c128", np.float64)):
        f = "f32" if part is np.float32 else "f64"
        values = np.array(COMPLEX_PARTS, part)
        re_a, im_a, re_b, im_b = (g.ravel() for g in np.meshgrid(values, values, values,
                                                                   values, indexing="ij"))
        n = re_a.size
        for op in ("maximum", "minimum"):
            text = (f"HloModule complex_{op}_{t}\n\nENTRY main {{\n"
                    + "".join(f"  {v} = {f}[{n}] parameter({i})\n"
                              for i, v in enumerate(("ar", "ai", "br", "bi")))
                    + f"  a = {t}[{n}] complex(ar, ai)\n  b = {t}[{n}] complex(br, bi)\n"
                    f"  ROOT r = {t}[{n}] {op}(a, b)\n}}\n")
            yield (f"complex_{op}_{t}", (f"{op} of {t} over every pair of edge values (real "
                   f"and imaginary parts: NaN, +-inf, +-0, ordinary)"), text,
                   [re_a, im_a, re_b, im_b])


def all_cases():
    yield from power_cases()
    yield from slice_cases()
    yield from gather_cases()
    yield from complex_minmax_cases()


def run_on_xla(text: str, args: list[np.ndarray]) -> list[np.ndarray]:
    """Parse ``text`` with XLA's parser, compile it for XLA:CPU, run it on ``args``."""
    import jax
    from jax._src.lib import _jax
    from jax._src.lib import xla_client as xc

    module = xc.hlo.hlo_module_from_text(text)
    mlir = _jax.mlir.hlo_to_stablehlo(module.as_serialized_hlo_module_proto())
    client = jax.devices("cpu")[0].client
    device = client.devices()[0]
    exe = client.compile_and_load(mlir, xc.DeviceList((device,)), xc.CompileOptions())
    results = exe.execute_sharded([jax.device_put(a, device) for a in args])
    return [np.asarray(r[0]) for r in results.disassemble_into_single_device_arrays()]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=str(ROOT / "tests" / "fixtures" / "xla_hlo"))
    parser.add_argument("--list", action="store_true", help="list the modules and exit")
    args = parser.parse_args(argv)
    if args.list:
        for name, description, _, _ in all_cases():
            print(f"{name:32} {description}")
        return 0
    import jax

    jax.config.update("jax_enable_x64", True)  # 64-bit inputs stay 64-bit
    import jaxlib

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    manifest = {"generator": "tools/dump_xla_hlo_fixtures.py", "jax_version": jax.__version__,
                "jaxlib_version": jaxlib.__version__, "numpy_version": np.__version__,
                "ml_dtypes_version": ml_dtypes.__version__, "backend": "cpu", "fixtures": []}
    for name, description, text, inputs in all_cases():
        outputs = run_on_xla(text, inputs)
        (out / f"{name}.hlo").write_text(text)
        arrays = {f"arg{i}": np.asarray(a) for i, a in enumerate(inputs)}
        arrays.update({f"out{i}": a for i, a in enumerate(outputs)})
        write_npz(out / f"{name}.npz", arrays)
        manifest["fixtures"].append({"name": name, "description": description,
                                     "inputs": len(inputs), "outputs": len(outputs)})
        print(f"{name}: {len(outputs)} outputs")
    (out / "MANIFEST.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
