"""The numpy adapter: ``numpy.ndarray`` leaves, without importing torch.

Each storage of the file becomes one uint8 array over the loaded bytes (no
copy), and every tensor on it an ``ndarray`` view of that array with the
saved shape, strides and offset, so ``numpy.shares_memory`` holds where
tensors shared a storage. bfloat16 and the float8 types are ``ml_dtypes``'.
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

import numpy as np

from ._adapter import BaseAdapter
from ._stowage import StowageError


_NUMPY = {
    "bool": np.bool_,
    "uint8": np.uint8,
    "int8": np.int8,
    "int16": np.int16,
    "uint16": np.uint16,
    "int32": np.int32,
    "uint32": np.uint32,
    "int64": np.int64,
    "uint64": np.uint64,
    "float16": np.float16,
    "float32": np.float32,
    "float64": np.float64,
    "complex64": np.complex64,
    "complex128": np.complex128,
}

# ml_dtypes' types, by torch's names. ml_dtypes is imported only when one is
# met: its import alone takes most of a second.
_ML_DTYPES = (
    "bfloat16",
    "float8_e4m3fn",
    "float8_e5m2",
    "float8_e4m3fnuz",
    "float8_e5m2fnuz",
    "float8_e8m0fnu",
)


def _dtypes() -> Dict[str, np.dtype]:
    return {name: np.dtype(t) for name, t in _NUMPY.items()}


def _ml_dtype(name: str) -> Optional[np.dtype]:
    if name not in _ML_DTYPES:
        return None
    import ml_dtypes

    t = getattr(ml_dtypes, name, None)  # float8_e8m0fnu: ml_dtypes 0.5 and later
    return None if t is None else np.dtype(t)


class Adapter(BaseAdapter):
    def __init__(self) -> None:
        self._table = _dtypes()

    def _lookup(self, name: str) -> Optional[np.dtype]:
        found = self._table.get(name)
        if found is None:
            found = _ml_dtype(name)
            if found is not None:
                self._table[name] = found
        return found

    def _numpy_dtype(self, name: str) -> np.dtype:
        found = self._lookup(name)
        if found is None:
            raise StowageError(f"torch.{name} has no numpy dtype; load with framework='torch'")
        return found

    def storage(self, buffer: Any, nbytes: int, device: str) -> Optional[np.ndarray]:
        if buffer is None:
            return None  # a meta storage: no bytes
        if nbytes == 0:
            return np.empty(0, dtype=np.uint8)
        return np.frombuffer(buffer, dtype=np.uint8)

    def tensor(
        self,
        storage: Optional[np.ndarray],
        dtype: str,
        shape: Tuple[int, ...],
        stride: Tuple[int, ...],
        offset: int,
        requires_grad: bool,
        parameter: bool,
    ) -> np.ndarray:
        dt = self._numpy_dtype(dtype)
        if storage is None:
            raise StowageError("a tensor without data (meta) has no numpy form; load with framework='torch'")
        if any(d == 0 for d in shape):
            return np.empty(shape, dtype=dt)
        return np.ndarray(
            shape,
            dtype=dt,
            buffer=storage,
            offset=offset * dt.itemsize,
            strides=tuple(s * dt.itemsize for s in stride),
        )

    def lazy_bits(self, t: np.ndarray, conj: bool, neg: bool) -> np.ndarray:
        # numpy has no lazy conjugation or negation: the values are made.
        if conj:
            t = np.conj(t)
        if neg:
            t = np.negative(t)
        return t

    def storage_value(self, storage: Optional[np.ndarray], dtype: Optional[str]) -> Any:
        if storage is None or dtype is None:
            return storage
        return storage.view(self._numpy_dtype(dtype))

    def dtype(self, name: str) -> Any:
        found = self._lookup(name)
        return name if found is None else found




