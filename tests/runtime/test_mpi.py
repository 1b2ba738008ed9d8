"""The MPI runtime (xlapy/runtime/mpi_collectives.py, mpi_run.py, ``xlapy run --distributed
mpi`` in xlapy/cli/run_mpi.py): real ``mpiexec -n 2`` and ``-n 4`` jobs (mpich from the test extra) run small modules
with every collective and send/recv, and their results must equal the in-process runtime's
(xlapy.Client, devices as threads) bit for bit. Also: the communicator cache (one
comm.Split per group set), errors and timeouts on one rank ending the whole job with a
non-zero exit and the message printed, uneven groups and wrong rank counts rejected, and
the pure parts (group-set resolution, which reductions MPI's own ops compute exactly)
without MPI.

All cases of one rank count run in a single MPI job (tests/runtime/mpi_driver.py), so the
file stays fast."""

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import ml_dtypes
import numpy as np
import pytest

from xlapy.hlo.attrs.collective import CollectiveDeviceList
from xlapy.interpreter.evaluator import EvaluationError
from xlapy.npz import load_npz, save_npz
from xlapy.parser import parse_hlo_module
from xlapy.runtime import Client
from xlapy.runtime.mpi_collectives import exact_mpi_reduction, reducer_opcode, resolve_group_set

HERE = Path(__file__).resolve().parent
DRIVER = HERE / "mpi_driver.py"


def mpiexec() -> str:
    """The mpiexec of this Python environment (the mpich wheel installs it beside python)."""
    beside = Path(sys.executable).parent / "mpiexec"
    if beside.exists():
        return str(beside)
    found = shutil.which("mpiexec")
    assert found, ("mpiexec not found: the MPI tests need the test extra's mpich wheel "
                   "(pip install '.[test]' or '.[mpi]')")
    return found


def launch(n: int, argv: list[str], timeout: float = 120, **kw) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.setdefault("PYTHONUNBUFFERED", "1")
    return subprocess.run([mpiexec(), "-n", str(n), *argv], capture_output=True, text=True,
                          timeout=timeout, env=env, check=False, **kw)


# -- HLO of the cases -----------------------------------------------------------------------------


def reducer(name: str, op: str, t: str) -> str:
    return (f"{name} {{\n  x = {t}[] parameter(0)\n  y = {t}[] parameter(1)\n"
            f"  ROOT r = {t}[] {op}(x, y)\n}}\n")


# Not commutative: (x * 0.5) + y, so the result shows the order the members are folded in.
HALF_ADD = """
half_add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  h = f32[] constant(0.5)
  hx = f32[] multiply(x, h)
  ROOT r = f32[] add(hx, y)
}
"""

COMPS = "".join([
    reducer("add", "add", "f32"), reducer("max", "maximum", "f32"),
    reducer("add_s32", "add", "s32"), reducer("add_u8", "add", "u8"),
    reducer("max_s64", "maximum", "s64"), reducer("mul_u32", "multiply", "u32"),
    reducer("min_s16", "minimum", "s16"), reducer("and_pred", "and", "pred"),
    reducer("or_pred", "or", "pred"), reducer("xor_s8", "xor", "s8"),
    reducer("mul_u8", "multiply", "u8"), HALF_ADD,
])


def module(body: str, header: str = "", comps: str = COMPS) -> str:
    return f"HloModule m{header}\n{comps}\nENTRY e {{\n{body}\n}}\n"


def groups_text(groups) -> str:
    return "{" + ",".join("{" + ",".join(map(str, g)) + "}" for g in groups) + "}"


def cases(n: int) -> dict[str, tuple[str, list[list], int]]:
    """name -> (HLO text, per-device argument lists, partitions) for ``n`` ranks."""
    rng = np.random.default_rng(n)
    out = {}

    def per(fn):
        return [fn(k) for k in range(n)]

    def floats(*shape):
        return per(lambda k: rng.standard_normal(shape).astype(np.float32) * (k + 1))

    pairs = groups_text([(i, i + 1) for i in range(0, n, 2)])       # {{0,1},{2,3}}
    strided = groups_text([tuple(range(i, n, 2)) for i in range(2)])  # {{0,2},{1,3}}
    scrambled = groups_text([tuple(reversed(range(n)))])              # {{3,2,1,0}}

    # all-reduce of floats: the interpreter's group-order fold (NaN through max too).
    xs = floats(6)
    xs[n - 1][2] = np.nan
    out["ar_f32"] = (module(
        "  x = f32[6] parameter(0)\n"
        "  s = f32[6] all-reduce(x), replica_groups={}, to_apply=add\n"
        "  m = f32[6] all-reduce(x), replica_groups={}, to_apply=max\n"
        f"  h = f32[6] all-reduce(x), replica_groups={scrambled}, to_apply=half_add\n"
        "  ROOT t = (f32[6], f32[6], f32[6]) tuple(s, m, h)"), [[x] for x in xs], 1)

    # Scalars keep their shape (f32[], not f32[1]) through the MPI buffers.
    ring = groups_text([(i, (i + 1) % n) for i in range(n)])
    out["scalars"] = (module(
        "  x = f32[] parameter(0)\n  i = s32[] parameter(1)\n"
        "  s = f32[] all-reduce(x), replica_groups={}, to_apply=add\n"
        "  j = s32[] all-reduce(i), replica_groups={}, to_apply=add_s32\n"
        f"  p = f32[] collective-permute(x), source_target_pairs={ring}\n"
        "  ROOT t = (f32[], s32[], f32[]) tuple(s, j, p)"),
        [[np.float32(k + 0.5), np.int32(k)] for k in range(n)], 1)

    # Large all-reduces: folded in pieces (Ialltoallv + Iallgatherv), pieces of unequal size.
    big, big2 = floats(40001), floats(40000)
    out["ar_big"] = (module(
        "  x = f32[40001] parameter(0)\n  y = f32[40000] parameter(1)\n"
        "  s = f32[40001] all-reduce(x), replica_groups={}, to_apply=add\n"
        f"  h = f32[40000] all-reduce(y), replica_groups={scrambled}, to_apply=half_add\n"
        "  ROOT t = (f32[40001], f32[40000]) tuple(s, h)"),
        [[a, b] for a, b in zip(big, big2)], 1)

    # Integer and pred reductions: MPI's own ops (wrap-around on the unsigned view), and u8
    # multiply through the interpreter.
    def ints(k):
        return [np.array([2**31 - 1 - k, -2**31 + k, 7, -1, 3 * k], np.int32),
                np.array([250, 7, 128, 255, k], np.uint8),
                np.array([-2**63 + k, 2**63 - 1 - k, k * 10**12], np.int64),
                np.array([2**31 + k, 3, 65537 * (k + 1), 0xFFFFFFFF], np.uint32),
                np.array([-32768 + k, 5, -k, 32767], np.int16),
                np.array([True, True, k % 2 == 0, False]),
                np.array([False, k == 1, False, True]),
                np.array([-128, 127, k, -k], np.int8),
                np.array([17, 255, k + 2, 16], np.uint8)]
    out["ar_ints"] = (module(
        "  a = s32[5] parameter(0)\n  b = u8[5] parameter(1)\n  c = s64[3] parameter(2)\n"
        "  d = u32[4] parameter(3)\n  e = s16[4] parameter(4)\n  f = pred[4] parameter(5)\n"
        "  g = pred[4] parameter(6)\n  h = s8[4] parameter(7)\n  i = u8[4] parameter(8)\n"
        "  ra = s32[5] all-reduce(a), replica_groups={}, to_apply=add_s32\n"
        "  rb = u8[5] all-reduce(b), replica_groups={}, to_apply=add_u8\n"
        "  rc = s64[3] all-reduce(c), replica_groups={}, to_apply=max_s64\n"
        "  rd = u32[4] all-reduce(d), replica_groups={}, to_apply=mul_u32\n"
        "  re = s16[4] all-reduce(e), replica_groups={}, to_apply=min_s16\n"
        "  rf = pred[4] all-reduce(f), replica_groups={}, to_apply=and_pred\n"
        "  rg = pred[4] all-reduce(g), replica_groups={}, to_apply=or_pred\n"
        "  rh = s8[4] all-reduce(h), replica_groups={}, to_apply=xor_s8\n"
        "  ri = u8[4] all-reduce(i), replica_groups={}, to_apply=mul_u8\n"
        "  ROOT t = (s32[5], u8[5], s64[3], u32[4], s16[4], pred[4], pred[4], s8[4], u8[4]) "
        "tuple(ra, rb, rc, rd, re, rf, rg, rh, ri)"), per(ints), 1)

    # Sub-groups: pairs twice (the second reuses the cached communicator), strided pairs,
    # everyone, the scrambled order, and (4 ranks) uneven groups, which all-reduce allows.
    uneven = "  u = f32[4] all-reduce(x), replica_groups={{0,1,2},{3}}, to_apply=add\n" \
        if n == 4 else "  u = f32[4] all-reduce(x), replica_groups={{0},{1}}, to_apply=add\n"
    out["ar_groups"] = (module(
        "  x = f32[4] parameter(0)\n"
        f"  a = f32[4] all-reduce(x), replica_groups={pairs}, to_apply=add\n"
        f"  b = f32[4] all-reduce(a), replica_groups={strided}, to_apply=half_add\n"
        f"  c = f32[4] all-reduce(b), replica_groups={pairs}, to_apply=half_add\n"
        "  d = f32[4] all-reduce(c), replica_groups={}, to_apply=add\n"
        f"  h = f32[4] all-reduce(x), replica_groups={scrambled}, to_apply=half_add\n"
        + uneven +
        "  ROOT t = (f32[4], f32[4], f32[4], f32[4], f32[4], f32[4]) tuple(a, b, c, d, h, u)"),
        [[x] for x in floats(4)], 1)

    # all-gather (bf16 bytes, sub-groups, -start/-done) and reduce-scatter (fold and exact).
    bf = per(lambda k: (rng.standard_normal((2, 3)) * (k + 1)).astype(ml_dtypes.bfloat16))
    ints2 = per(lambda k: rng.integers(-2**31, 2**31 - 1, (2 * n, 3), dtype=np.int32))
    out["gather_scatter"] = (module(
        "  x = bf16[2,3] parameter(0)\n  y = f32[2,8] parameter(1)\n"
        f"  z = s32[{2 * n},3] parameter(2)\n"
        f"  g = bf16[2,{3 * n}] all-gather(x), replica_groups={{}}, dimensions={{1}}\n"
        f"  gp = bf16[4,3] all-gather(x), replica_groups={pairs}, dimensions={{0}}\n"
        f"  gs = (bf16[2,3], bf16[{2 * n},3]) all-gather-start(x), replica_groups={{}}, "
        "dimensions={0}\n"
        f"  gd = bf16[{2 * n},3] all-gather-done(gs)\n"
        f"  rs = f32[2,{8 // n}] reduce-scatter(y), replica_groups={{}}, dimensions={{1}}, "
        "to_apply=add\n"
        "  rz = s32[2,3] reduce-scatter(z), replica_groups={}, dimensions={0}, "
        "to_apply=add_s32\n"
        f"  ROOT t = (bf16[2,{3 * n}], bf16[4,3], bf16[{2 * n},3], f32[2,{8 // n}], s32[2,3]) "
        "tuple(g, gp, gd, rs, rz)"),
        [[a, b, c] for a, b, c in zip(bf, floats(2, 8), ints2)], 1)

    # all-to-all: array form on two dimensions, tuple form.
    tuple_shape = "(" + ", ".join(["f32[2]"] * n) + ")"
    params = "".join(f"  p{j} = f32[2] parameter({j + 2})\n" for j in range(n))
    out["all_to_all"] = (module(
        f"  x = f32[{2 * n},3] parameter(0)\n  y = s32[2,{n}] parameter(1)\n" + params +
        f"  a = f32[{2 * n},3] all-to-all(x), replica_groups={{}}, dimensions={{0}}\n"
        f"  b = s32[2,{n}] all-to-all(y), replica_groups={{}}, dimensions={{1}}\n"
        f"  c = {tuple_shape} all-to-all({', '.join(f'p{j}' for j in range(n))}), "
        "replica_groups={}\n"
        f"  ROOT t = (f32[{2 * n},3], s32[2,{n}], {tuple_shape}) tuple(a, b, c)"),
        [[a, np.arange(2 * n, dtype=np.int32).reshape(2, n) + 100 * k] +
         [np.array([k, j], np.float32) for j in range(n)]
         for k, a in enumerate(floats(2 * n, 3))], 1)

    # collective-permute: a ring, a pair (others get zeros), -start/-done; broadcast.
    ring = groups_text([(i, (i + 1) % n) for i in range(n)])
    swapped = groups_text([(i + 1, i) for i in range(0, n, 2)])      # {{1,0},{3,2}}
    out["permute_broadcast"] = (module(
        "  x = f32[3] parameter(0)\n"
        f"  r = f32[3] collective-permute(x), source_target_pairs={ring}\n"
        "  p = f32[3] collective-permute(x), source_target_pairs={{0,1}}\n"
        f"  s = (f32[3], f32[3]) collective-permute-start(x), source_target_pairs={ring}\n"
        "  d = f32[3] collective-permute-done(s)\n"
        f"  b = f32[3] collective-broadcast(x), replica_groups={swapped}\n"
        "  ROOT t = (f32[3], f32[3], f32[3], f32[3]) tuple(r, p, d, b)"),
        [[x] for x in floats(3)], 1)

    # send/recv: a ring by source-target pairs (channel 0: replica ids) and a channel
    # without pairs (send and recv on the same device).
    attr = f'frontend_attributes={{_xla_send_recv_source_target_pairs="{ring}"}}'
    out["send_recv"] = (module(
        "  x = f32[3] parameter(0)\n  tok = token[] after-all()\n"
        f"  rv = (f32[3], u32[], token[]) recv(tok), channel_id=0, {attr}\n"
        f"  sd = (f32[3], u32[], token[]) send(x, tok), channel_id=0, {attr}\n"
        "  rd = (f32[3], token[]) recv-done(rv), channel_id=0\n"
        "  sdd = token[] send-done(sd), channel_id=0\n"
        "  y = f32[3] negate(x)\n"
        "  snd = (f32[3], u32[], token[]) send(y, tok), channel_id=2\n"
        "  rcv = (f32[3], u32[], token[]) recv(tok), channel_id=2\n"
        "  sndd = token[] send-done(snd), channel_id=2\n"
        "  rcvd = (f32[3], token[]) recv-done(rcv), channel_id=2\n"
        "  a = f32[3] get-tuple-element(rd), index=0\n"
        "  b = f32[3] get-tuple-element(rcvd), index=0\n"
        "  ROOT t = (f32[3], f32[3]) tuple(a, b)"), [[x] for x in floats(3)], 1)

    # A collective inside a while loop (three iterations), and ragged-all-to-all.
    loop = """
cond {
  s = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  three = s32[] constant(3)
  ROOT lt = pred[] compare(i, three), direction=LT
}
body {
  s = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  v = f32[4] get-tuple-element(s), index=1
  one = s32[] constant(1)
  j = s32[] add(i, one)
  w = f32[4] all-reduce(v), replica_groups={}, to_apply=half_add
  ROOT t = (s32[], f32[4]) tuple(j, w)
}
"""

    def ragged_args(k):
        inp = (np.arange(4 * n, dtype=np.float32).reshape(2 * n, 2) + 1000 * k)
        return [inp, np.full((2 * n, 2), -1, np.float32),
                np.arange(0, 2 * n, 2, dtype=np.int64), np.full(n, 2, np.int64),
                np.full(n, 2 * k, np.int64), np.full(n, 2, np.int64)]
    out["loop_ragged"] = (module(
        "  x = f32[4] parameter(0)\n"
        f"  inp = f32[{2 * n},2] parameter(1)\n  outb = f32[{2 * n},2] parameter(2)\n"
        f"  io = s64[{n}] parameter(3)\n  ss = s64[{n}] parameter(4)\n"
        f"  oo = s64[{n}] parameter(5)\n  rs = s64[{n}] parameter(6)\n"
        "  zero = s32[] constant(0)\n  init = (s32[], f32[4]) tuple(zero, x)\n"
        "  w = (s32[], f32[4]) while(init), condition=cond, body=body\n"
        "  v = f32[4] get-tuple-element(w), index=1\n"
        f"  g = f32[{2 * n},2] ragged-all-to-all(inp, outb, io, ss, oo, rs), "
        "replica_groups={}\n"
        f"  ROOT t = (f32[4], f32[{2 * n},2]) tuple(v, g)", comps=COMPS + loop),
        [[x] + ragged_args(k) for k, x in enumerate(floats(4))], 1)

    # Bounded-dynamic operands (exchanged as pickled arrays).
    out["dynamic"] = (module(
        "  x = f32[4] parameter(0)\n  k = s32[] constant(3)\n"
        "  d = f32[<=4] set-dimension-size(x, k), dimensions={0}\n"
        "  a = f32[<=4] all-reduce(d), replica_groups={}, to_apply=add\n"
        f"  g = f32[<={4 * n}] all-gather(d), replica_groups={{}}, dimensions={{0}}\n"
        f"  ROOT t = (f32[<=4], f32[<={4 * n}]) tuple(a, g)"), [[x] for x in floats(4)], 1)

    if n == 4:  # 2 replicas x 2 partitions: the group modes.
        out["partitions"] = (module(
            "  x = f32[2] parameter(0)\n"
            "  a = f32[2] all-reduce(x), channel_id=1, replica_groups={{0,1}}, to_apply=add\n"
            "  b = f32[2] all-reduce(x), replica_groups={{0,1}}, to_apply=half_add\n"
            "  c = f32[8] all-gather(x), channel_id=2, replica_groups={{3,1,2,0}}, "
            "use_global_device_ids=true, dimensions={0}\n"
            "  d = f32[2] collective-permute(x), channel_id=3, source_target_pairs={{0,1}}\n"
            "  e = f32[2] all-reduce(x), channel_id=4, replica_groups={{0},{1}}, "
            "use_global_device_ids=false, to_apply=half_add\n"
            "  ROOT t = (f32[2], f32[2], f32[8], f32[2], f32[2]) tuple(a, b, c, d, e)",
            header=", replica_count=2, num_partitions=2"), [[x] for x in floats(2)], 2)
    return out


def in_process(text: str, inputs: list[list], partitions: int) -> list:
    n = len(inputs)
    exe = Client(timeout=30).compile(text, replicas=n // partitions, partitions=partitions)
    return exe.execute(inputs)


def leaves(value) -> list:
    if isinstance(value, tuple):
        return [leaf for v in value for leaf in leaves(v)]
    return [value]


def save_inputs(path: Path, inputs: list[list]) -> None:
    arrays = {}
    for k, args in enumerate(inputs):
        flat = [leaf for a in args for leaf in leaves(a)]
        arrays.update({f"r{k}.arg{i}": a for i, a in enumerate(flat)})
    save_npz(str(path), arrays)


def bits(a) -> bytes:
    a = np.ascontiguousarray(a)
    return a.view(np.uint8).tobytes() if a.size else b""


def assert_same_bits(got, want, what: str) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != {want.dtype}"
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    assert bits(got) == bits(want), f"{what}: {got} != {want}"


_JOBS: dict[tuple, tuple[Path, dict, subprocess.CompletedProcess]] = {}


def mpi_job(n: int, tmp_path_factory, backend: str = "cpu"
            ) -> tuple[Path, dict, subprocess.CompletedProcess]:
    """Run every case for ``n`` ranks in one MPI job, each rank's device on ``backend``
    (once per test session)."""
    if (n, backend) not in _JOBS:
        case_dir = tmp_path_factory.mktemp(f"mpi{n}{backend}")
        all_cases = cases(n)
        for name, (text, inputs, partitions) in all_cases.items():
            (case_dir / f"{name}.hlo").write_text(text)
            save_inputs(case_dir / f"{name}.npz", inputs)
            (case_dir / f"{name}.json").write_text(json.dumps({"partitions": partitions}))
        proc = launch(n, [sys.executable, str(DRIVER), str(case_dir), backend])
        _JOBS[n, backend] = (case_dir, all_cases, proc)
    return _JOBS[n, backend]


CASE_NAMES = ["ar_f32", "scalars", "ar_big", "ar_ints", "ar_groups", "gather_scatter", "all_to_all",
              "permute_broadcast", "send_recv", "loop_ragged", "dynamic"]


@pytest.mark.parametrize("n, name, backend",
                         [(2, c, "cpu") for c in CASE_NAMES] + [(4, c, "cpu") for c in CASE_NAMES]
                         + [(4, "partitions", "cpu")]
                         + [(2, c, "interpreter") for c in CASE_NAMES])
def test_mpi_job_equals_in_process_run(n, name, backend, tmp_path_factory):
    # the ranks' devices on the compiled CPU backend (its collective steps calling
    # MpiCollectives) and on the interpreter
    case_dir, all_cases, proc = mpi_job(n, tmp_path_factory, backend)
    assert proc.returncode == 0, f"mpiexec -n {n} failed:\n{proc.stdout}\n{proc.stderr}"
    text, inputs, partitions = all_cases[name]
    got = load_npz(str(case_dir / f"{name}.out.npz"))
    want = in_process(text, inputs, partitions)
    for k, result in enumerate(want):
        flat = leaves(result)
        assert len([key for key in got if key.startswith(f"r{k}.")]) == len(flat)
        for i, w in enumerate(flat):
            assert_same_bits(got[f"r{k}.out{i}"], w, f"{name}: device {k} result {i}")


def test_mpi_results_are_the_collectives_results(tmp_path_factory):
    # Not only equal to the in-process run: the values themselves (spec semantics).
    case_dir, all_cases, proc = mpi_job(4, tmp_path_factory)
    assert proc.returncode == 0, proc.stderr
    _, inputs, _ = all_cases["ar_ints"]
    got = load_npz(str(case_dir / "ar_ints.out.npz"))
    a = sum(inp[0].astype(np.int64) for inp in inputs)
    wrapped = ((a + 2**31) % 2**32 - 2**31).astype(np.int32)
    for k in range(4):
        assert_same_bits(got[f"r{k}.out0"], wrapped, "s32 sum wraps")
    _, inputs, _ = all_cases["gather_scatter"]
    got = load_npz(str(case_dir / "gather_scatter.out.npz"))
    gathered = np.concatenate([inp[0] for inp in inputs], axis=1)
    for k in range(4):
        assert_same_bits(got[f"r{k}.out0"], gathered, "bf16 all-gather")
    _, inputs, _ = all_cases["permute_broadcast"]
    got = load_npz(str(case_dir / "permute_broadcast.out.npz"))
    assert_same_bits(got["r0.out1"], np.zeros(3, np.float32), "no source: zeros")
    assert_same_bits(got["r1.out1"], inputs[0][0], "pair {0,1}")
    assert_same_bits(got["r2.out0"], inputs[1][0], "ring")
    assert_same_bits(got["r0.out3"], inputs[1][0], "broadcast from member 0 = replica 1")


def test_communicators_are_split_once_per_group_set(tmp_path_factory):
    case_dir, _, proc = mpi_job(4, tmp_path_factory)
    assert proc.returncode == 0, proc.stderr
    stats = json.loads((case_dir / "ar_groups.stats.json").read_text())
    # Group sets: {{0,1},{2,3}} (used twice), {{0,2},{1,3}}, {{3,2,1,0}}, {{0,1,2},{3}};
    # replica_groups={} is the world communicator itself.
    assert sorted(map(tuple, (map(tuple, g) for g in stats["group_sets"]))) == sorted([
        ((0, 1), (2, 3)), ((0, 2), (1, 3)), ((3, 2, 1, 0),), ((0, 1, 2), (3,))])
    assert stats["splits"] == 4
    assert stats["world_uses"] == 1
    assert stats["cache_hits"] == 1


# -- xlapy run --distributed mpi ---------------------------------------------------------------------


CLI_MODULE = module(
    "  x = f32[8] parameter(0)\n  i = s32[4] parameter(1)\n"
    "  r = u32[] replica-id()\n  rf = f32[] convert(r)\n"
    "  b = f32[8] broadcast(rf), dimensions={}\n  xr = f32[8] add(x, b)\n"
    "  ar = f32[8] all-reduce(xr), replica_groups={}, to_apply=half_add\n"
    "  ai = s32[4] all-reduce(i), replica_groups={{0,1},{2,3}}, to_apply=add_s32\n"
    "  ag = f32[32] all-gather(xr), replica_groups={}, dimensions={0}\n"
    "  rs = f32[2] reduce-scatter(xr), replica_groups={}, dimensions={0}, to_apply=add\n"
    "  a2a = f32[8] all-to-all(xr), replica_groups={}, dimensions={0}\n"
    "  cp = f32[8] collective-permute(xr), source_target_pairs={{0,1},{1,2},{2,3}}\n"
    "  ROOT t = (f32[8], s32[4], f32[32], f32[2], f32[8], f32[8]) "
    "tuple(ar, ai, ag, rs, a2a, cp)")


def test_cli_distributed_mpi_matches_cli_replicas(tmp_path):
    from xlapy.cli import main

    (tmp_path / "m.hlo").write_text(CLI_MODULE)
    save_npz(str(tmp_path / "in.npz"), {"arg0": np.arange(8, dtype=np.float32) / 3,
                                        "arg1": np.arange(4, dtype=np.int32)})
    proc = launch(4, [sys.executable, "-m", "xlapy", "run", "m.hlo", "--distributed", "mpi",
                      "--inputs", "in.npz", "--output", "mpi.npz"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    import contextlib
    import io

    printed = io.StringIO()
    cwd = os.getcwd()
    try:
        os.chdir(tmp_path)
        with contextlib.redirect_stdout(printed):
            assert main(["run", "m.hlo", "--replicas", "4", "--inputs", "in.npz",
                         "--output", "threads.npz"]) == 0
    finally:
        os.chdir(cwd)
    assert proc.stdout == printed.getvalue()
    assert "replica 3:" in proc.stdout
    got, want = load_npz(str(tmp_path / "mpi.npz")), load_npz(str(tmp_path / "threads.npz"))
    assert sorted(got) == sorted(want) and len(got) == 4 * 6
    for key in want:
        assert_same_bits(got[key], want[key], key)


def test_one_rank_prints_like_a_single_device_run(tmp_path):
    # Without mpiexec (MPI's singleton start) the job has one rank: the output is exactly
    # that of a plain xlapy run (out<i> keys, no replica label).
    from xlapy.cli import main

    text = module("  x = f32[3] parameter(0)\n"
                  "  ROOT r = f32[3] all-reduce(x), replica_groups={}, to_apply=half_add")
    (tmp_path / "m.hlo").write_text(text)
    proc = subprocess.run([sys.executable, "-m", "xlapy", "run", "m.hlo", "--distributed",
                           "mpi", "--output", "mpi.npz"], capture_output=True, text=True,
                          cwd=tmp_path, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    import contextlib
    import io

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main(["run", str(tmp_path / "m.hlo"), "--output",
                     str(tmp_path / "plain.npz")]) == 0
    assert proc.stdout == printed.getvalue()
    got, want = load_npz(str(tmp_path / "mpi.npz")), load_npz(str(tmp_path / "plain.npz"))
    assert list(got) == ["out0"] == list(want)
    assert_same_bits(got["out0"], want["out0"], "out0")


# -- failures end the job -----------------------------------------------------------------------------


def cli_job(tmp_path, n: int, text: str, *extra: str) -> tuple[subprocess.CompletedProcess, float]:
    (tmp_path / "m.hlo").write_text(text)
    start = time.monotonic()
    proc = launch(n, [sys.executable, "-m", "xlapy", "run", "m.hlo", "--distributed", "mpi",
                      "--quiet", *extra], cwd=tmp_path, timeout=60)
    return proc, time.monotonic() - start


BRANCHES = """
skip {
  p = f32[2] parameter(0)
  ROOT c = f32[2] copy(p)
}
reduce {
  p = f32[2] parameter(0)
  ROOT r = f32[2] all-reduce(p), replica_groups={}, to_apply=add
}
fail {
  p = f32[2] parameter(0)
  ROOT c = f32[2] custom-call(p), custom_call_target="no_such_target"
}
"""


def test_a_rank_stuck_elsewhere_times_out_and_aborts_the_job(tmp_path):
    # Replica 0 enters the all-reduce, replica 1 skips it: replica 0 gives up after the
    # timeout (2 s) with a message, and MPI_Abort ends replica 1 too.
    text = module(
        "  x = f32[2] parameter(0)\n  r = u32[] replica-id()\n  z = u32[] constant(0)\n"
        "  first = pred[] compare(r, z), direction=EQ\n"
        "  ROOT c = f32[2] conditional(first, x, x), true_computation=reduce, "
        "false_computation=skip", comps=COMPS + BRANCHES)
    proc, elapsed = cli_job(tmp_path, 2, text, "--timeout", "2")
    assert proc.returncode != 0
    assert "xlapy: rank 0: " in proc.stderr
    assert "all-reduce: rank 0 waited 2 s for the other members' contributions" in proc.stderr
    assert elapsed < 30


def test_an_error_on_one_rank_aborts_the_others_at_once(tmp_path):
    # Replica 2 fails (unknown custom-call target) before the all-reduce the others wait in;
    # the job ends at once (well before the 40 s timeout) with replica 2's error printed.
    text = module(
        "  x = f32[2] parameter(0)\n  r = u32[] replica-id()\n  two = u32[] constant(2)\n"
        "  bad = pred[] compare(r, two), direction=EQ\n"
        "  c = f32[2] conditional(bad, x, x), true_computation=fail, false_computation=skip\n"
        "  ROOT a = f32[2] all-reduce(c), replica_groups={}, to_apply=add",
        comps=COMPS + BRANCHES)
    proc, elapsed = cli_job(tmp_path, 4, text, "--timeout", "40")
    assert proc.returncode != 0
    assert "xlapy: rank 2: " in proc.stderr and "no_such_target" in proc.stderr
    assert elapsed < 30


def test_members_in_different_collectives_fail_instead_of_mixing_data(tmp_path):
    # Replica 0 runs all-reduce %ra, replica 1 all-reduce %rb (same shape, same groups): MPI
    # alone would match them; the instruction hash exchanged with the data tells them apart.
    other = BRANCHES.replace("reduce {", "reduce_b {").replace(
        "ROOT r = f32[2] all-reduce(p)", "ROOT rb = f32[2] all-reduce(p)")
    text = module(
        "  x = f32[2] parameter(0)\n  r = u32[] replica-id()\n  z = u32[] constant(0)\n"
        "  first = pred[] compare(r, z), direction=EQ\n"
        "  ROOT c = f32[2] conditional(first, x, x), true_computation=reduce, "
        "false_computation=reduce_b", comps=COMPS + BRANCHES + other.split("fail {")[0]
        .replace("skip {", "skip_b {"))
    proc, elapsed = cli_job(tmp_path, 2, text, "--timeout", "20")
    assert proc.returncode != 0
    assert "all-reduce: the members of the group reached different collectives: rank 0 in " \
        "all-reduce %r" in proc.stderr and "rank 1 in all-reduce %rb" in proc.stderr, proc.stderr
    assert elapsed < 15


def test_uneven_groups_and_wrong_rank_counts_are_rejected(tmp_path):
    text = module("  x = f32[4] parameter(0)\n"
                  "  ROOT a = f32[4] all-to-all(x), replica_groups={{0,1,2},{3}}, "
                  "dimensions={0}", header=", replica_count=4")
    proc, _ = cli_job(tmp_path, 4, text)
    assert proc.returncode != 0
    assert "Replica groups expected to be of uniform size, got groups of sizes 1, 3" in proc.stderr
    proc, _ = cli_job(tmp_path, 2, text.replace("{{0,1,2},{3}}", "{{0,1},{2,3}}"))
    assert proc.returncode != 0
    assert ("the module declares replica_count=4 but the MPI job has 2 rank(s)"
            in proc.stderr) or ("= 4 device(s), but the job has 2 rank(s); launch mpiexec -n 4"
                                in proc.stderr), proc.stderr


# -- without MPI: group sets and exact reductions ---------------------------------------------------


def root_of(body: str, header: str = ", replica_count=4"):
    return parse_hlo_module(module(f"  x = f32[4] parameter(0)\n  ROOT r = {body}",
                                   header=header))


def with_groups(instr, groups):
    """A stand-in for ``instr`` with other replica groups (attributes are read-only)."""
    attrs = dict(instr.attrs.items())
    attrs["replica_groups"] = CollectiveDeviceList(groups)
    return SimpleNamespace(opcode=instr.opcode, name=instr.name, attrs=attrs,
                           operands=instr.operands, shape=instr.shape)


def test_group_sets_resolve_to_ranks_in_group_order():
    m = root_of("f32[4] all-reduce(x), replica_groups={{3,1},{0,2}}, to_apply=add")
    gs = resolve_group_set(m, m.entry.root, 4, 1, rank=1)
    assert gs.groups == ((0, 2), (3, 1)) and gs.mine == (3, 1) and gs.position == 1
    m = root_of("f32[4] all-reduce(x), replica_groups={{0,1,2},{3}}, to_apply=add")
    assert resolve_group_set(m, m.entry.root, 4, 1, rank=3).groups == ((0, 1, 2), (3,))
    # Partitions (device (r, p) is rank 2r + p): cross-partition groups stay within a
    # replica; cross-replica-and-partition groups take every partition of their replicas;
    # flattened ids are ranks.
    header = ", replica_count=2, num_partitions=2"
    m = root_of("f32[4] all-to-all(x), channel_id=1, replica_groups={{1,0}}, dimensions={0}",
                header=header)
    assert resolve_group_set(m, m.entry.root, 4, 2, rank=2).groups == ((1, 0), (3, 2))
    m = root_of("f32[4] all-reduce(x), channel_id=1, replica_groups={{1,0}}, to_apply=add",
                header=header)
    assert resolve_group_set(m, m.entry.root, 4, 2, rank=2).groups == ((2, 3, 0, 1),)
    m = root_of("f32[4] all-reduce(x), channel_id=1, replica_groups={{3,1},{0,2}}, "
                "use_global_device_ids=true, to_apply=add", header=header)
    assert resolve_group_set(m, m.entry.root, 4, 2, rank=2).groups == ((0, 2), (3, 1))


def test_group_sets_that_do_not_fit_the_run_are_errors():
    m = root_of("f32[4] all-reduce(x), replica_groups={{0,1},{2,3}}, to_apply=add")
    with pytest.raises(EvaluationError, match=r"the module runs 4 replica\(s\) x 1 partition\(s\) "
                                              r"but the MPI job has 2 ranks"):
        resolve_group_set(m, m.entry.root, 2, 1, rank=0)
    m = root_of("f32[4] all-reduce(x), replica_groups={{0,1}}, to_apply=add")
    with pytest.raises(EvaluationError, match=r"rank\(s\) \[2, 3\] of the run of 4 replica\(s\) "
                                              r"x 1 partition\(s\) \(4 MPI ranks\) are in no "
                                              r"replica group of replica_groups=\{\{0,1\}\}"):
        resolve_group_set(m, m.entry.root, 4, 1, rank=0)
    # (The parser rejects such groups too, so they are swapped in after parsing.)
    with pytest.raises(EvaluationError, match=r"names id\(s\) \[7\] outside the run"):
        resolve_group_set(m, with_groups(m.entry.root, ((0, 1), (2, 7))), 4, 1, rank=0)
    # Uneven groups: only all-reduce may have them (the parser rejects the others, so the
    # groups are swapped in after parsing).
    m = root_of("f32[16] all-gather(x), replica_groups={{0,1,2,3}}, dimensions={0}")
    with pytest.raises(EvaluationError, match=r"all-gather: replica groups must all have the "
                                              r"same size .* groups of sizes 3, 1"):
        resolve_group_set(m, with_groups(m.entry.root, ((0, 1, 2), (3,))), 4, 1, rank=0)


@pytest.mark.parametrize("op, dtype, want", [
    ("add", np.int32, ("SUM", np.uint32)), ("add", np.uint8, ("SUM", np.uint8)),
    ("add", np.int64, ("SUM", np.uint64)), ("multiply", np.uint32, ("PROD", np.uint32)),
    ("multiply", np.int64, ("PROD", np.uint64)), ("multiply", np.int16, None),
    ("maximum", np.int8, ("MAX", np.int8)), ("minimum", np.uint16, ("MIN", np.uint16)),
    ("xor", np.int32, ("BXOR", np.uint32)), ("and", np.bool_, ("BAND", np.uint8)),
    ("maximum", np.bool_, ("BOR", np.uint8)), ("add", np.bool_, None),
    ("add", np.float32, None), ("maximum", np.float32, None), ("add", np.float64, None),
    ("add", ml_dtypes.int4, None), ("add", ml_dtypes.bfloat16, None),
])
def test_mpi_builtin_ops_only_where_exact(op, dtype, want):
    t = {np.int32: "s32", np.uint8: "u8", np.int64: "s64", np.uint32: "u32", np.int16: "s16",
         np.int8: "s8", np.uint16: "u16", np.bool_: "pred", np.float32: "f32",
         np.float64: "f64", ml_dtypes.int4: "s4", ml_dtypes.bfloat16: "bf16"}[dtype]
    m = parse_hlo_module(f"HloModule m\n{reducer('red', op, t)}\nENTRY e {{\n"
                         f"  x = {t}[2] parameter(0)\n  ROOT r = {t}[2] all-reduce(x), "
                         "replica_groups={}, to_apply=red\n}\n")
    got = exact_mpi_reduction(m.entry.root.attrs["to_apply"], np.dtype(dtype))
    assert got == (None if want is None else (want[0], np.dtype(want[1])))


def test_only_plain_binary_reducers_map_to_mpi_ops():
    m = parse_hlo_module(module("  x = f32[2] parameter(0)\n  ROOT r = f32[2] all-reduce(x), "
                                "replica_groups={}, to_apply=half_add"))
    assert reducer_opcode(m.entry.root.attrs["to_apply"]) is None
    m = parse_hlo_module(module("  x = s32[2] parameter(0)\n  ROOT r = s32[2] all-reduce(x), "
                                "replica_groups={}, to_apply=add_s32"))
    assert reducer_opcode(m.entry.root.attrs["to_apply"]) == "add"
