"""``xlapy run --replicas N / --partitions P``: shared arg<i> or per-device r<k>.arg<i>
inputs, r<k>.out<i> outputs, results printed under each device's label, the module
header's counts as defaults, and the errors for inconsistent input files."""

import subprocess
import sys

import numpy as np

from xlapy.cli import main
from xlapy.npz import load_npz, save_npz

ALL_REDUCE = """HloModule ar
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
ENTRY e {
  x = f32[2] parameter(0)
  ROOT r = f32[2] all-reduce(x), replica_groups={}, to_apply=add
}
"""

IDS = """HloModule ids
ENTRY e {
  x = s32[] parameter(0)
  r = u32[] replica-id()
  p = u32[] partition-id()
  ROOT t = (s32[], u32[], u32[]) tuple(x, r, p)
}
"""


def write(tmp_path, text, name="m.hlo"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_per_replica_inputs_and_outputs(tmp_path, capsys):
    module = write(tmp_path, ALL_REDUCE)
    save_npz(tmp_path / "in.npz", {"r0.arg0": np.float32([1.0, 2.5]),
                                   "r1.arg0": np.float32([3.0, 5.25])})
    out = tmp_path / "out.npz"
    assert main(["run", module, "--replicas", "2", "--inputs", str(tmp_path / "in.npz"),
                 "--output", str(out)]) == 0
    printed = capsys.readouterr().out
    assert printed == ("replica 0:\nf32[2] {4, 7.75}\nreplica 1:\nf32[2] {4, 7.75}\n")
    saved = load_npz(out)
    assert sorted(saved) == ["r0.out0", "r1.out0"]
    np.testing.assert_array_equal(saved["r1.out0"], np.float32([4.0, 7.75]))


def test_shared_inputs_go_to_every_replica(tmp_path, capsys):
    module = write(tmp_path, ALL_REDUCE)
    save_npz(tmp_path / "in.npz", {"arg0": np.float32([1, 2])})
    assert main(["run", module, "--replicas", "3", "--inputs", str(tmp_path / "in.npz"),
                 "--quiet", "--output", str(tmp_path / "o.npz")]) == 0
    assert capsys.readouterr().out == ""
    saved = load_npz(tmp_path / "o.npz")
    for k in range(3):
        np.testing.assert_array_equal(saved[f"r{k}.out0"], np.float32([3, 6]))


def test_partitions_number_devices_replica_major(tmp_path, capsys):
    module = write(tmp_path, IDS)
    save_npz(tmp_path / "in.npz", {f"r{k}.arg0": np.int32(10 * k) for k in range(4)})
    assert main(["run", module, "--replicas", "2", "--partitions", "2", "--inputs",
                 str(tmp_path / "in.npz"), "--output", str(tmp_path / "o.npz")]) == 0
    printed = capsys.readouterr().out
    assert "replica 0 partition 1:\n(\ns32[] 10,\nu32[] 0,\nu32[] 1\n)\n" in printed
    assert "replica 1 partition 0:\n(\ns32[] 20,\nu32[] 1,\nu32[] 0\n)\n" in printed
    saved = load_npz(tmp_path / "o.npz")
    # device k = replica * P + partition: out0 = its input, out1 = replica, out2 = partition
    assert [(int(saved[f"r{k}.out0"]), int(saved[f"r{k}.out1"]), int(saved[f"r{k}.out2"]))
            for k in range(4)] == [(0, 0, 0), (10, 0, 1), (20, 1, 0), (30, 1, 1)]


def test_module_header_counts_are_the_default(tmp_path, capsys):
    module = write(tmp_path, ALL_REDUCE.replace("HloModule ar", "HloModule ar, replica_count=2"))
    save_npz(tmp_path / "in.npz", {"arg0": np.float32([1, 2])})
    assert main(["run", module, "--inputs", str(tmp_path / "in.npz")]) == 0
    assert capsys.readouterr().out == "replica 0:\nf32[2] {2, 4}\nreplica 1:\nf32[2] {2, 4}\n"


def test_random_inputs_are_shared(tmp_path, capsys):
    module = write(tmp_path, ALL_REDUCE)
    assert main(["run", module, "--replicas", "2", "--output", str(tmp_path / "o.npz")]) == 0
    saved = load_npz(tmp_path / "o.npz")
    np.testing.assert_array_equal(saved["r0.out0"], saved["r1.out0"])


def test_missing_per_replica_key(tmp_path, capsys):
    module = write(tmp_path, ALL_REDUCE)
    save_npz(tmp_path / "in.npz", {"r0.arg0": np.float32([1, 2])})
    assert main(["run", module, "--replicas", "2", "--inputs", str(tmp_path / "in.npz")]) == 2
    err = capsys.readouterr().err
    assert "missing r1.arg0 for parameter 0 %x.1 (f32[2]{0}); the file has no r1.* arrays" in err


def test_mixed_and_unknown_keys(tmp_path, capsys):
    module = write(tmp_path, ALL_REDUCE)
    save_npz(tmp_path / "a.npz", {"arg0": np.float32([1, 2]), "r0.arg0": np.float32([1, 2])})
    assert main(["run", module, "--replicas", "2", "--inputs", str(tmp_path / "a.npz")]) == 2
    assert "mixes shared keys (arg0) with per-device keys (r0.arg...)" in capsys.readouterr().err
    save_npz(tmp_path / "b.npz", {f"r{k}.arg0": np.float32([1, 2]) for k in range(3)})
    assert main(["run", module, "--replicas", "2", "--inputs", str(tmp_path / "b.npz")]) == 2
    assert "keys r2.* name no device (devices r0..r1)" in capsys.readouterr().err


def test_bad_counts_and_bad_groups(tmp_path, capsys):
    module = write(tmp_path, ALL_REDUCE.replace("replica_groups={}", "replica_groups={{0,1}}"))
    assert main(["run", module, "--replicas", "0"]) == 2
    assert "--replicas must be at least 1, got 0" in capsys.readouterr().err
    assert main(["run", module, "--replicas", "4"]) == 2
    assert "replica_groups={{0,1}} name 2 replicas" in capsys.readouterr().err


def test_replicas_in_a_subprocess(tmp_path):
    module = write(tmp_path, ALL_REDUCE)
    save_npz(tmp_path / "in.npz", {"r0.arg0": np.float32([1, 2]), "r1.arg0": np.float32([3, 4])})
    proc = subprocess.run([sys.executable, "-m", "xlapy", "run", module, "--replicas", "2",
                           "--inputs", str(tmp_path / "in.npz")], capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "replica 0:\nf32[2] {4, 6}\nreplica 1:\nf32[2] {4, 6}\n"
