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


def _dtypes() -> Dict[str, np.dtype]:
    import ml_dtypes

    table = {
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
        "bfloat16": ml_dtypes.bfloat16,
        "float8_e4m3fn": ml_dtypes.float8_e4m3fn,
        "float8_e5m2": ml_dtypes.float8_e5m2,
        "float8_e4m3fnuz": ml_dtypes.float8_e4m3fnuz,
        "float8_e5m2fnuz": ml_dtypes.float8_e5m2fnuz,
    }
    if hasattr(ml_dtypes, "float8_e8m0fnu"):
        table["float8_e8m0fnu"] = ml_dtypes.float8_e8m0fnu
    return {name: np.dtype(t) for name, t in table.items()}


class Adapter(BaseAdapter):
    def __init__(self) -> None:
        self._table = _dtypes()

    def _numpy_dtype(self, name: str) -> np.dtype:
        try:
            return self._table[name]
        except KeyError:
            raise StowageError(f"torch.{name} has no numpy dtype; load with framework='torch'") from None

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
        return self._table.get(name, name)




