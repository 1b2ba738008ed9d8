"""``xlapy run --inputs/--output`` with bad files: every one is exit 2 with a message that
says what is wrong (never "internal error"), and an array whose element type is not its
parameter's is refused, naming both, unless ``--cast-inputs`` asks for HLO convert's
conversion."""

import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from xlapy.cli import main
from xlapy.npz import load_npz, save_npz

ROOT = Path(__file__).resolve().parents[2]

F32 = "HloModule m\nENTRY e {\n  x = f32[2] parameter(0)\n  ROOT a = f32[2] add(x, x)\n}\n"
S32 = "HloModule m\nENTRY e {\n  x = s32[2] parameter(0)\n  ROOT a = s32[2] add(x, x)\n}\n"
TUPLE = ("HloModule m\nENTRY e {\n  p = (f32[2], s8[]) parameter(0)\n"
         "  ROOT g = f32[2] get-tuple-element(p), index=0\n}\n")


@pytest.fixture
def module(tmp_path):
    def write(text=F32):
        path = tmp_path / "m.hlo"
        path.write_text(text)
        return str(path)
    return write


def run(argv, capsys):
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _good(path):
    np.savez(path, arg0=np.array([1, 2], np.float32))
    return path


def _truncated(path):
    data = _good(path).read_bytes()
    path.write_bytes(data[: len(data) // 2])
    return path


def _corrupt_directory(path):
    data = bytearray(_good(path).read_bytes())
    for i in range(len(data) - 22, len(data)):  # the end-of-central-directory record
        data[i] ^= 0x5A
    path.write_bytes(bytes(data))
    return path


def _corrupt_entry(path):
    data = bytearray(_good(path).read_bytes())
    start = data.index(b"\x93NUMPY")  # inside the stored arg0.npy
    for i in range(start + 120, start + 128):
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))
    return path


def _npy(path):
    np.save(path.with_suffix(".npy"), np.array([1, 2], np.float32))
    path.with_suffix(".npy").rename(path)
    return path


def _save(path, **arrays):
    np.savez(path, **arrays)
    return path


BAD_FILES = [
    ("missing", lambda p: p.parent / "nowhere.npz", ("cannot read npz file {dir}/nowhere.npz: No "
                                                    "such file or directory")),
    ("empty", lambda p: (p.write_bytes(b""), p)[1], ("{path} is not a valid .npz archive: No data "
                                                    "left in file")),
    ("truncated", _truncated, "{path} is not a valid .npz archive: File is not a zip file"),
    ("corrupt directory", _corrupt_directory, "{path} is not a valid .npz archive: "),
    ("corrupt entry", _corrupt_entry, ("{path}: entry arg0 is corrupt: Bad CRC-32 for file "
                                      "'arg0.npy'")),
    ("npy", _npy, ("{path} holds an array of dtype float32 and shape [2] (an .npy file: one "
                  "array); expected an .npz archive of named arrays")),
    ("object", lambda p: _save(p, arg0=np.array([1, "a"], object)),
     "{path}: entry arg0 is an object array (pickled Python objects); expected numeric arrays"),
    ("strings", lambda p: _save(p, arg0=np.array(["a", "b"])),
     "{path}: entry arg0 is a string array of dtype <U1 and shape [2]; expected numeric arrays"),
    ("unknown tag", lambda p: _save(p, arg0=np.array([1, 2], np.uint16),
                                    __dtype__arg0=np.array("nosuch")),
     ("{path}: entry __dtype__arg0 names 'nosuch', which is not an ml_dtypes element type (one "
     "of bfloat16, ")),
    ("tag of a non-type", lambda p: _save(p, arg0=np.array([1, 2], np.uint16),
                                          __dtype__arg0=np.array("finfo")),
     "{path}: entry __dtype__arg0 names 'finfo', which is not an ml_dtypes element type"),
    ("tag not a string", lambda p: _save(p, arg0=np.array([1, 2], np.uint16),
                                         __dtype__arg0=np.array(3)),
     ("{path}: entry __dtype__arg0 must be a string naming an ml_dtypes type, got an array of "
     "dtype int64 and shape []")),
    ("tag on the wrong bits", lambda p: _save(p, arg0=np.array([1, 2, 3], np.uint8),
                                              __dtype__arg0=np.array("bfloat16")),
     "{path}: entry arg0 is tagged bfloat16, stored as uint16 bits, but holds uint8 data"),
    ("tag without entry", lambda p: _save(p, arg0=np.array([1, 2], np.float32),
                                          __dtype__arg1=np.array("bfloat16")),
     "{path}: entry __dtype__arg1 tags no entry (there is no arg1)"),
]


@pytest.mark.parametrize("name,make,message", BAD_FILES, ids=[c[0] for c in BAD_FILES])
def test_bad_input_files_exit_2(name, make, message, module, tmp_path, capsys):
    path = make(tmp_path / "in.npz")
    code, out, err = run(["run", module(), "--inputs", str(path)], capsys)
    assert code == 2, err
    assert err.startswith("xlapy run: error: " + message.format(path=path, dir=tmp_path)), err
    assert "internal error" not in err and out == ""


@pytest.mark.parametrize("array,text,got", [
    (np.array([1 + 2j, 3j], np.complex64), F32, "c64[2]"),
    (np.array([1.5, 2.5]), F32, "f64[2]"),
    (np.array([np.nan, 1e30], np.float32), S32, "f32[2]"),
    (np.array([1, 2], np.int64), S32, "s64[2]"),
    (np.array([1, 2], ml_dtypes.bfloat16), F32, "bf16[2]"),
])
def test_element_type_mismatch_is_refused(array, text, got, module, tmp_path, capsys):
    save_npz(tmp_path / "in.npz", {"arg0": array})
    code, _, err = run(["run", module(text), "--inputs", str(tmp_path / "in.npz")], capsys)
    want = "f32" if "f32[2] parameter" in text else "s32"
    assert code == 2
    assert err == (f"xlapy run: error: {tmp_path}/in.npz: arg0 is {got}, but parameter 0 %x "
                   f"is {want}[2]{{0}}: the element types differ ({got[:got.index('[')]} vs "
                   f"{want}); pass --cast-inputs to convert it as HLO convert does\n")


def test_dimension_mismatch_names_both_shapes(module, tmp_path, capsys):
    save_npz(tmp_path / "in.npz", {"arg0": np.zeros(3, np.float32)})
    code, _, err = run(["run", module(), "--inputs", str(tmp_path / "in.npz")], capsys)
    assert code == 2
    assert err == (f"xlapy run: error: {tmp_path}/in.npz: arg0 is f32[3], but parameter 0 %x "
                   f"is f32[2]{{0}}: the dimensions differ\n")


def test_tuple_parameter_leaves_are_checked(module, tmp_path, capsys):
    save_npz(tmp_path / "in.npz", {"arg0": np.zeros(2, np.float32), "arg1": np.int32(3)})
    code, _, err = run(["run", module(TUPLE), "--inputs", str(tmp_path / "in.npz")], capsys)
    assert code == 2
    assert "arg1 is s32[], but parameter 0 %p[1] is s8[]: the element types differ" in err


def test_cast_inputs_converts_as_hlo_convert(module, tmp_path, capsys):
    save_npz(tmp_path / "in.npz", {"arg0": np.array([np.nan, 1e30], np.float32)})
    code, out, _ = run(["run", module(S32), "--inputs", str(tmp_path / "in.npz"),
                        "--cast-inputs", "--output", str(tmp_path / "out.npz")], capsys)
    assert code == 0
    # convert: NaN -> 0, 1e30 saturates to INT32_MAX; INT32_MAX + INT32_MAX wraps to -2
    assert out == "s32[2] {0, -2}\n"
    np.testing.assert_array_equal(load_npz(tmp_path / "out.npz")["out0"], [0, -2])
    save_npz(tmp_path / "in.npz", {"arg0": np.array([1.25, -3.75])})
    code, out, _ = run(["run", module(), "--inputs", str(tmp_path / "in.npz"),
                        "--cast-inputs"], capsys)
    assert (code, out) == (0, "f32[2] {2.5, -7.5}\n")


def test_cast_inputs_refuses_complex_to_real(module, tmp_path, capsys):
    save_npz(tmp_path / "in.npz", {"arg0": np.array([1 + 2j, 3j], np.complex64)})
    code, _, err = run(["run", module(), "--inputs", str(tmp_path / "in.npz"),
                        "--cast-inputs"], capsys)
    assert code == 2
    assert err.endswith("--cast-inputs converts as HLO convert does, and convert does not take "
                        "complex to real (c64 => f32)\n")


@pytest.mark.parametrize("target,message", [
    ("nowhere/out.npz", "--output {tmp}/nowhere/out.npz: the folder {tmp}/nowhere does not "
                        "exist"),
    ("", "--output {tmp}: it is a directory; give a file name"),
])
def test_unwritable_output_exits_2(target, message, module, tmp_path, capsys):
    code, _, err = run(["run", module(), "--output", str(tmp_path / target) if target
                          else str(tmp_path)], capsys)
    assert code == 2
    assert err == "xlapy run: error: " + message.format(tmp=tmp_path) + "\n"


def test_help_documents_cast_inputs():
    proc = subprocess.run([sys.executable, "-m", "xlapy", "run", "--help"], capture_output=True,
                          text=True, cwd=ROOT, check=False)
    assert proc.returncode == 0
    assert "--cast-inputs" in proc.stdout and "HLO convert" in proc.stdout
    assert "--cast-inputs" in (ROOT / "README.md").read_text()
