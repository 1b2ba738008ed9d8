"""Convolutions through the packed GEMM's core against the BLAS paths, at the host's vector
width and at AVX2's (an AVX2 host emulated: the generated code at 256 bits, OpenBLAS's
kernel as the environment sets it - OPENBLAS_CORETYPE=Haswell on these VMs).

    PYTHONPATH=. python benchmarks/conv_paths.py

Each configuration runs in its own process (``gemm_kernel.BITS``, ``gemm_kernel.PACKED``
are read when programs are planned): "core" is the default (library.py's convolutions
through gemm_packed.run), "blas" the paths without the core (per-tap GEMMs into a scratch,
im2col chunks; packed dots off). Prints the median of 10 runs per convolution.
"""

import ast
import subprocess
import sys
import time

CASES = {
    "16->32 3x3": ("f32[32,32,32,16]", "f32[3,3,16,32]",
                   "window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f"),
    "64->64 3x3": ("f32[32,64,64,64]", "f32[3,3,64,64]",
                   "window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f"),
    "1-D dilated": ("f32[16,2048,64]", "f32[3,64,64]",
                    "window={size=3 pad=4_4 rhs_dilate=4}, dim_labels=b0f_0io->b0f"),
    "64->128 stride 2": ("f32[32,56,56,64]", "f32[3,3,64,128]",
                         ("window={size=3x3 stride=2x2 pad=0_1x0_1}, "
                          "dim_labels=b01f_01io->b01f")),
    "3->32 3x3": ("f32[32,64,64,3]", "f32[3,3,3,32]",
                  "window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f"),
    "32->16 3x3": ("f32[32,32,32,32]", "f32[3,3,32,16]",
                   "window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f"),
}


def measure(bits: int, core: bool) -> dict:
    import numpy as np

    from xlapy.backends.cpu import gemm_kernel
    from xlapy.runtime import Client

    gemm_kernel.BITS = bits
    gemm_kernel.PACKED = core
    client = Client(backend="cpu")
    rng = np.random.default_rng(0)
    out = {}
    for k, (name, (lhs, rhs, attrs)) in enumerate(CASES.items()):
        text = (f"HloModule conv{k}_{bits}_{int(core)}\nENTRY e {{\n  x = {lhs} parameter(0)\n"
                f"  k = {rhs} parameter(1)\n  ROOT c = convolution(x, k), {attrs}\n}}")
        exe = client.compile(text)

        def dims(s):
            return tuple(int(v) for v in s[s.index("[") + 1:-1].split(","))
        bufs = [client.buffer_from_pyval(rng.standard_normal(dims(s)).astype(np.float32))
                for s in (lhs, rhs)]
        for _ in range(2):
            exe.execute([bufs], return_buffers=True)
        times = []
        for _ in range(10):
            t = time.perf_counter()
            exe.execute([bufs], return_buffers=True)
            times.append(time.perf_counter() - t)
        out[name] = float(np.median(times))
    return out


def main() -> None:
    if len(sys.argv) == 3:
        print(repr(measure(int(sys.argv[1]), sys.argv[2] == "core")))
        return
    from xlapy.backends.cpu import gemm_kernel

    widths = sorted({gemm_kernel.vector_bits(), 256}, reverse=True)
    results = {}
    for bits in widths:
        for path in ("blas", "core"):
            got = subprocess.run([sys.executable, __file__, str(bits), path], check=True,
                                 capture_output=True, text=True).stdout.strip().splitlines()
            results[bits, path] = ast.literal_eval(got[-1])
    print(f"{'convolution':18s}" + "".join(f"  {b}-bit blas  {b}-bit core  ratio" for b in widths))
    for name in CASES:
        row = f"{name:18s}"
        for bits in widths:
            blas_t, core_t = results[bits, "blas"][name], results[bits, "core"][name]
            row += f"  {blas_t * 1e3:8.2f} ms {core_t * 1e3:8.2f} ms  {core_t / blas_t:4.2f}x"
        print(row)


if __name__ == "__main__":
    main()
