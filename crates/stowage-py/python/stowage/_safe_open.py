"""``stowage.safe_open``: safetensors' lazy, per-tensor API for every format."""

from __future__ import annotations

import os
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Union

from . import _stowage
from ._adapter import BaseAdapter, adapter_for

_TENSOR = object()


class _ValuesAdapter(BaseAdapter):
    """Builds the non-tensor values only: tensors and storages become a
    marker (no bytes are read), pruned afterwards."""

    def storage(self, buffer: Any, nbytes: int, device: str) -> Any:
        return _TENSOR

    def lazy_storage(self, pending: Any, nbytes: int, device: str) -> Any:
        return _TENSOR  # never read

    def tensor(self, *args: Any) -> Any:
        return _TENSOR

    def quantized(self, *args: Any) -> Any:
        return _TENSOR

    def sparse_coo(self, *args: Any) -> Any:
        return _TENSOR

    def sparse_compressed(self, *args: Any) -> Any:
        return _TENSOR

    def nested(self, *args: Any) -> Any:
        return _TENSOR

    def lazy_bits(self, t: Any, conj: bool, neg: bool) -> Any:
        return t

    def storage_value(self, storage: Any, dtype: Optional[str]) -> Any:
        return _TENSOR

    def dtype(self, name: str) -> str:
        return name

    def ndarray(self, *args: Any) -> Any:
        return _TENSOR


def _prune(value: Any) -> Any:
    if isinstance(value, dict):
        out = type(value)()
        for k, v in value.items():
            if v is _TENSOR:
                continue
            pruned = _prune(v)
            # A dict that held only tensors goes with them.
            if isinstance(pruned, dict) and not pruned and v:
                continue
            out[k] = pruned
        return out
    if isinstance(value, list):
        return [_prune(v) for v in value if v is not _TENSOR]
    if isinstance(value, tuple):
        return tuple(_prune(v) for v in value if v is not _TENSOR)
    return value


class TensorSlice:
    """``safe_open(...).get_slice(name)``: a tensor's dtype and shape without
    its bytes. Indexing it with integers and slices (``[0:2, ::2]``, ``[3]``)
    reads only the bytes the selection covers, a run of adjacent elements
    at a time, from the file or by range requests from a URL; any other
    index (a negative step, ``...``, ``None``, an array) reads the tensor
    and indexes it."""

    def __init__(self, opened: "SafeOpen", name: str) -> None:
        self._opened = opened
        self._name = name
        self._dtype, self._shape = opened._inner.tensor_info(name)

    def get_shape(self) -> List[int]:
        return list(self._shape)

    def get_dtype(self) -> str:
        return self._dtype

    def __getitem__(self, index: Any) -> Any:
        ranges = _ranges(index, self._shape)
        if ranges is not None:
            picked, squeeze = ranges
            part = self._opened._inner.read_slice(self._name, picked)
            if part is not None:
                # Integer indices drop their dimension, as in torch and numpy.
                return part[tuple(0 if s else slice(None) for s in squeeze)] if any(squeeze) else part
        return self._opened.get_tensor(self._name)[index]


def _ranges(index: Any, shape: Sequence[int]) -> Optional[Tuple[List[Tuple[int, int, int]], List[bool]]]:
    """``(start, len, step)`` per leading dimension and, for each, whether an
    integer picked it; ``None`` for an index of any other kind."""
    items = index if isinstance(index, tuple) else (index,)
    if len(items) > len(shape):
        return None
    picked: List[Tuple[int, int, int]] = []
    squeeze: List[bool] = []
    for item, dim in zip(items, shape):
        if isinstance(item, bool) or not isinstance(item, (int, slice)):
            return None
        if isinstance(item, int):
            i = item + dim if item < 0 else item
            if not 0 <= i < dim:
                raise IndexError(f"index {item} is out of bounds for dimension of size {dim}")
            picked.append((i, 1, 1))
            squeeze.append(True)
            continue
        start, stop, step = item.indices(dim)
        if step <= 0:
            return None
        length = max(0, (stop - start + step - 1) // step)
        picked.append((start, length, step) if length else (0, 0, 1))
        squeeze.append(False)
    return picked, squeeze


class SafeOpen:
    """A checkpoint opened lazily: the pickle or header is read now, each
    tensor's storage when the tensor is first asked for."""

    def __init__(
        self,
        src: Union[str, "os.PathLike[str]"],
        framework: str = "torch",
        *,
        inert: bool = False,
        allow_globals: Iterable[str] = (),
    ) -> None:
        if isinstance(allow_globals, str):
            allow_globals = (allow_globals,)
        self._inner = _stowage.SafeOpen(
            os.fspath(src), adapter_for(framework), inert=inert, allow_globals=list(allow_globals)
        )

    def __enter__(self) -> "SafeOpen":
        return self

    def __exit__(self, *exc: Any) -> None:
        return None

    def keys(self) -> List[str]:
        """The tensors' names: their paths joined with ``.``, in file order."""
        return self._inner.keys()

    def __contains__(self, name: str) -> bool:
        return name in self._inner

    def __len__(self) -> int:
        return len(self._inner)

    def get_tensor(self, name: str) -> Any:
        """The tensor ``name``; only its storage's bytes are read."""
        return self._inner.get_tensor(name)

    def get_slice(self, name: str) -> TensorSlice:
        return TensorSlice(self, name)

    def metadata(self) -> Optional[Dict[str, Any]]:
        """A safetensors file's ``__metadata__``; for any other format, the
        non-tensor values as a nested dict (tensors left out, no bytes read)."""
        if self._inner.format() == "safetensors":
            return self._inner.safetensors_metadata()
        root = _prune(self._inner.root(_ValuesAdapter()))
        return root if isinstance(root, dict) else {"": root}

    @property
    def format(self) -> str:
        """``torch-zip``, ``torchscript``, ``torch-legacy`` or ``safetensors``
        (for a DCP directory, its items' format)."""
        return self._inner.format()
