"""Arrays in .npz files, including the types NumPy cannot store natively.

bf16, the f8/f6/f4 types and s4/u4/s2/u2 (ml_dtypes) are written as their raw storage bits
(``arr.view(uint16)`` / ``view(uint8)``) with a string entry ``__dtype__<key>`` naming the
ml_dtypes dtype, and read back the same way. The layout of ``xlapy run``'s inputs/outputs and
of the golden fixtures in tests/fixtures/jax."""

from __future__ import annotations

import io
from typing import Mapping

import ml_dtypes
import numpy as np

from xlapy.errors import InvalidArgumentError

_PREFIX = "__dtype__"


def _is_ml_dtype(dtype: np.dtype) -> bool:
    return type(dtype).__module__.startswith("ml_dtypes") or dtype.type.__module__.startswith("ml_dtypes")


def load_npz(path_or_file) -> dict[str, np.ndarray]:
    """``{key: array}`` with ml_dtypes arrays restored; the ``__dtype__`` entries consumed."""
    try:
        z = np.load(path_or_file, allow_pickle=False)
    except (OSError, ValueError) as e:
        raise InvalidArgumentError(f"cannot read npz file {path_or_file}: {e}") from None
    with z:
        out = {}
        for key in z.files:
            if key.startswith(_PREFIX):
                continue
            arr = z[key]
            tag = _PREFIX + key
            if tag in z.files:
                name = str(z[tag])
                dtype = getattr(ml_dtypes, name, None)
                if dtype is None:
                    raise InvalidArgumentError(f"npz entry {tag} names an unknown ml_dtypes type {name!r}")
                arr = arr.view(dtype)
            out[key] = arr
        return out


def save_npz(path_or_file, arrays: Mapping[str, np.ndarray]) -> None:
    """Write arrays; ml_dtypes arrays as raw bits plus a ``__dtype__<key>`` entry."""
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
        np.savez(path_or_file, **entries)
    else:
        buf = io.BytesIO()
        np.savez(buf, **entries)
        path_or_file.write(buf.getvalue())
