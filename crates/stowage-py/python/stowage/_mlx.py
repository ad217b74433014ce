"""The MLX adapter: ``mlx.core.array`` leaves, made from the numpy
adapter's views (a copy into MLX's buffer, so tensors that shared a storage
in the file are separate arrays here, equal in value). A dtype MLX lacks
(float8, complex128) is an error naming it, never a silent conversion.
Values that were numpy arrays in the file stay numpy arrays, as with
torch."""

from __future__ import annotations

from typing import Any, Dict

import mlx.core as mx

from . import _numpy
from ._stowage import StowageError

_MLX: Dict[str, Any] = {
    "bool": mx.bool_,
    "uint8": mx.uint8,
    "int8": mx.int8,
    "int16": mx.int16,
    "uint16": mx.uint16,
    "int32": mx.int32,
    "uint32": mx.uint32,
    "int64": mx.int64,
    "uint64": mx.uint64,
    "float16": mx.float16,
    "float32": mx.float32,
    "float64": mx.float64,
    "bfloat16": mx.bfloat16,
    "complex64": mx.complex64,
}


class Adapter(_numpy.Adapter):
    def tensor(self, storage: Any, dtype: str, *rest: Any) -> Any:
        try:
            target = _MLX[dtype]
        except KeyError:
            raise StowageError(f"torch.{dtype} has no MLX dtype; load with framework='torch' or 'numpy'") from None
        view = super().tensor(storage, dtype, *rest)  # the numpy adapter's view, then a copy
        return mx.array(view, dtype=target)

    def dtype(self, name: str) -> Any:
        return _MLX.get(name, name)

    def lazy_bits(self, t: Any, conj: bool, neg: bool) -> Any:
        if conj:
            t = mx.conjugate(t)
        if neg:
            t = mx.negative(t)
        return t
