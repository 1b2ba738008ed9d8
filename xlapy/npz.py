"""Arrays in .npz files, including the types NumPy cannot store natively.

bf16, the f8/f6/f4 types and s4/u4/s2/u2 (ml_dtypes) are written as their raw storage bits
(``arr.view(uint16)`` / ``view(uint8)``) with a string entry ``__dtype__<key>`` naming the
ml_dtypes dtype, and read back the same way: ``save_npz(path, {"arg0": bf16_array})``, or by
hand ``np.savez(path, arg0=a.view(np.uint16), __dtype__arg0="bfloat16")``. Plain
``np.savez(path, arg0=bf16_array)`` loses the type (NumPy stores such arrays as raw ``|V2``
records); reading that file says so and how to save it instead. The layout of ``xlapy run``'s
inputs/outputs and of the golden fixtures in tests/fixtures/jax. Whatever a file holds, reading or writing it
fails with an InvalidArgumentError that says what is wrong, never a NumPy or zip error."""

from __future__ import annotations

import io
import os
import zipfile
import zlib
from typing import Mapping

import numpy as np

from xlapy.errors import InvalidArgumentError

_PREFIX = "__dtype__"

__all__ = ["load_npz", "save_npz"]


def _is_ml_dtype(dtype: np.dtype) -> bool:
    return type(dtype).__module__.startswith("ml_dtypes") or dtype.type.__module__.startswith("ml_dtypes")


def _ml_dtype_names() -> dict[str, np.dtype]:
    """The ml_dtypes types that are XLA element types, by name."""
    from xlapy.shape import dtypes

    out = {}
    for t in dtypes.PrimitiveType:
        try:
            if not dtypes.is_array_type(t):
                continue
            dt = np.dtype(dtypes.to_dtype(t))
        except (InvalidArgumentError, KeyError, TypeError, ValueError):
            continue
        if _is_ml_dtype(dt):
            out[dt.name] = dt
    return out


def _where(path_or_file) -> str:
    return str(path_or_file) if isinstance(path_or_file, (str, bytes)) or \
        hasattr(path_or_file, "__fspath__") else "the npz data"


def load_npz(path_or_file) -> dict[str, np.ndarray]:
    """``{key: array}`` with ml_dtypes arrays restored; the ``__dtype__`` entries consumed.

    Anything that is not an .npz archive of numeric arrays - a missing or unreadable file,
    a truncated or corrupt archive or entry, a single-array .npy file, object (pickled)
    arrays, strings, a ``__dtype__`` tag that names no ml_dtypes element type or does not
    fit its entry's bits - raises InvalidArgumentError saying so."""
    where = _where(path_or_file)
    try:
        z = np.load(path_or_file, allow_pickle=False)
    except OSError as e:
        reason = e.strerror or str(e) or type(e).__name__
        if isinstance(e, FileNotFoundError) or e.strerror:
            raise InvalidArgumentError(f"cannot read npz file {where}: {reason}") from None
        raise InvalidArgumentError(f"{where} is not an .npz archive ({reason})") from None
    except (ValueError, EOFError, zipfile.BadZipFile, zlib.error) as e:
        reason = "it holds pickled Python objects" if "pickle" in str(e) else (
            str(e) or "no data")
        raise InvalidArgumentError(f"{where} is not a valid .npz archive: {reason}") from None
    if isinstance(z, np.ndarray):
        raise InvalidArgumentError(
            f"{where} holds {_describe(z)} (an .npy file: one array); expected an .npz archive "
            f"of named arrays (np.savez(path, arg0=..., arg1=...))")
    with z:
        files = list(z.files)
        raw = {}
        for key in files:
            try:
                raw[key] = z[key]
            except ValueError as e:
                if "allow_pickle" in str(e):
                    raise InvalidArgumentError(
                        f"{where}: entry {key} is an object array (pickled Python objects); "
                        f"expected numeric arrays") from None
                raise InvalidArgumentError(f"{where}: entry {key} is corrupt: {e}") from None
            except (OSError, EOFError, zipfile.BadZipFile, zlib.error) as e:
                raise InvalidArgumentError(f"{where}: entry {key} is corrupt: {e}") from None
    known = None
    out = {}
    for key in files:
        if key.startswith(_PREFIX):
            if key[len(_PREFIX):] not in raw:
                raise InvalidArgumentError(f"{where}: entry {key} tags no entry (there is no "
                                           f"{key[len(_PREFIX):]})")
            continue
        arr = raw[key]
        tag = _PREFIX + key
        if tag in raw:
            known = known if known is not None else _ml_dtype_names()
            arr = _restore(where, key, arr, raw[tag], known)
        elif arr.dtype.kind == "V" and arr.dtype.names is None and arr.dtype.itemsize in (1, 2):
            raise InvalidArgumentError(
                f"{where}: entry {key} is raw {arr.dtype.itemsize}-byte records (dtype "
                f"{arr.dtype}, shape {list(arr.shape)}): this is what np.savez makes of a bf16, "
                f"f8 or int4 (ml_dtypes) array, whose type NumPy's .npz cannot name, so the "
                f"type is lost. Save such arrays with xlapy.npz.save_npz(path, {{'{key}': a}}), "
                f"which stores the raw bits with a {_PREFIX}{key} entry naming the type (the "
                f"npz convention of xlapy: np.savez(path, {key}=a.view(np.uint16), "
                f"{_PREFIX}{key}='bfloat16') by hand)")
        elif arr.dtype.kind not in "biufc" and not _is_ml_dtype(arr.dtype):
            raise InvalidArgumentError(
                f"{where}: entry {key} is {_describe(arr)}; expected numeric arrays (bool, "
                f"integers, floats, complex; bf16/f8/int4... as raw bits with a {_PREFIX}{key} "
                f"tag)")
        out[key] = arr
    return out


def _describe(arr: np.ndarray) -> str:
    kinds = {"U": "string", "S": "bytes", "O": "object", "M": "datetime", "m": "timedelta",
             "V": "structured"}
    kind = kinds.get(arr.dtype.kind)
    what = f"a {kind} array" if kind else "an array"
    return f"{what} of dtype {arr.dtype} and shape {list(arr.shape)}"


def _restore(where: str, key: str, arr: np.ndarray, tag: np.ndarray, known: dict) -> np.ndarray:
    """The ml_dtypes array stored as raw bits in ``arr``, its type named by ``tag``."""
    if tag.ndim != 0 or tag.dtype.kind not in "US":
        raise InvalidArgumentError(
            f"{where}: entry {_PREFIX}{key} must be a string naming an ml_dtypes type, got "
            f"{_describe(tag)}")
    name = str(tag)
    dtype = known.get(name)
    if dtype is None:
        raise InvalidArgumentError(
            f"{where}: entry {_PREFIX}{key} names {name!r}, which is not an ml_dtypes element "
            f"type (one of {', '.join(sorted(known))})")
    bits = np.dtype(np.uint16 if dtype.itemsize == 2 else np.uint8)
    if arr.dtype != bits:
        raise InvalidArgumentError(
            f"{where}: entry {key} is tagged {name}, stored as {bits} bits, but holds "
            f"{arr.dtype} data")
    return arr.view(dtype)


def save_npz(path_or_file, arrays: Mapping[str, np.ndarray]) -> None:
    """Write arrays; ml_dtypes arrays as raw bits plus a ``__dtype__<key>`` entry. The file
    is written under exactly the name given (unlike ``np.savez``, no ``.npz`` is added). A
    path that cannot be written raises InvalidArgumentError naming it and saying why.

    >>> save_npz("in.npz", {"arg0": np.ones((2, 3), ml_dtypes.bfloat16)})  # bf16 kept"""
    entries = {}
    for key, arr in arrays.items():
        arr = np.asarray(arr)
        if _is_ml_dtype(arr.dtype):
            bits = np.uint16 if arr.dtype.itemsize == 2 else np.uint8
            entries[key] = np.asarray(arr, order="C").view(bits)  # keeps 0-d arrays 0-d
            entries[_PREFIX + key] = np.array(arr.dtype.name)
        else:
            entries[key] = arr
    if isinstance(path_or_file, (str, bytes)) or hasattr(path_or_file, "__fspath__"):
        if os.path.isdir(path_or_file):
            raise InvalidArgumentError(f"cannot write {path_or_file}: it is a directory")
        try:
            with open(path_or_file, "wb") as f:  # an open file: np.savez adds no suffix
                np.savez(f, **entries)
        except OSError as e:
            raise InvalidArgumentError(f"cannot write {os.fsdecode(path_or_file)}: "
                                       f"{e.strerror or e}") from None
    else:
        buf = io.BytesIO()
        np.savez(buf, **entries)
        path_or_file.write(buf.getvalue())
