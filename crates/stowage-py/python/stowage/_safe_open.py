"""``stowage.safe_open``: safetensors' lazy, per-tensor API for every format."""

from __future__ import annotations

import os
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Union

from . import _stowage
from ._adapter import BaseAdapter, adapter_for
from ._stowage import StowageError

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

    def tensor_state(self, t: Any, state: Any) -> Any:
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
        self._name = name
        # Held, as safetensors' slice holds the file: indexing works after
        # the ``with`` block that opened it ends.
        self._inner = opened._handle()
        _, self._shape = self._inner.tensor_info(name)
        self._dtype = self._inner.safetensors_dtype(name)

    def get_shape(self) -> List[int]:
        return list(self._shape)

    def get_dtype(self) -> str:
        """safetensors' name of the dtype (``F32``, ``BF16``, ``I64``), as its
        ``get_slice(...).get_dtype()`` gives it; PyTorch's name for a dtype
        safetensors cannot hold (``complex128``)."""
        return self._dtype

    def __getitem__(self, index: Any) -> Any:
        ranges = _ranges(index, self._shape)
        if ranges is not None:
            picked, squeeze = ranges
            part = self._inner.read_slice(self._name, picked)
            if part is not None:
                # Integer indices drop their dimension, as in torch and numpy.
                return part[tuple(0 if s else slice(None) for s in squeeze)] if any(squeeze) else part
        return self._inner.get_tensor(self._name)[index]


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
    tensor's storage when the tensor is first asked for. As
    ``safetensors.safe_open``: a context manager whose handle is closed when
    the ``with`` block ends (every later call raises ``StowageError``, "file
    is closed"), ``keys()`` sorted, ``offset_keys()`` in the order of the
    bytes in the file."""

    def __init__(
        self,
        filename: Union[str, "os.PathLike[str]"],
        framework: str = "torch",
        device: Union[str, int, Any] = "cpu",
        *,
        inert: bool = False,
        allow_globals: Iterable[str] = (),
    ) -> None:
        if isinstance(allow_globals, str):
            allow_globals = (allow_globals,)
        if str(device) != "cpu":
            raise ValueError(
                f"device {str(device)!r}: stowage reads tensors into CPU memory only, and has no"
                " device back end yet; open with device='cpu' and move tensors with .to(device)"
            )
        self._src = os.fspath(filename)
        self._inner: Optional[Any] = _stowage.SafeOpen(
            self._src, adapter_for(framework), inert=inert, allow_globals=list(allow_globals)
        )

    def _handle(self) -> Any:
        if self._inner is None:
            raise StowageError(f"{self._src}: file is closed")
        return self._inner

    def __enter__(self) -> "SafeOpen":
        return self

    def __exit__(self, *exc: Any) -> None:
        # The storages and the file's handle or mapping go with the Rust
        # object; tensors already handed out keep what they hold.
        self._inner = None

    def keys(self) -> List[str]:
        """The tensors' names, their paths joined with ``.``, sorted (as
        safetensors sorts them)."""
        return sorted(self._handle().keys())

    def offset_keys(self) -> List[str]:
        """The tensors' names in the order of their bytes in the file."""
        return self._handle().offset_keys()

    def __contains__(self, name: str) -> bool:
        return name in self._handle()

    def __len__(self) -> int:
        return len(self._handle())

    def get_tensor(self, name: str) -> Any:
        """The tensor ``name``; only its storage's bytes are read."""
        return self._handle().get_tensor(name)

    def get_tensors(self) -> Dict[str, Any]:
        """Every tensor, keyed by name in the order of their bytes in the
        file, as safetensors' ``get_tensors()`` gives them."""
        inner = self._handle()
        return {name: inner.get_tensor(name) for name in inner.offset_keys()}

    def get_slice(self, name: str) -> TensorSlice:
        """The tensor ``name``'s dtype and shape, and its parts by indexing,
        reading only the bytes they cover (after the ``with`` block too)."""
        return TensorSlice(self, name)

    def metadata(self) -> Optional[Dict[str, Any]]:
        """A safetensors file's ``__metadata__``; for any other format, the
        non-tensor values as a nested dict (tensors left out, no bytes read)."""
        inner = self._handle()
        if inner.format() == "safetensors":
            return inner.safetensors_metadata()
        root = _prune(inner.root(_ValuesAdapter()))
        return root if isinstance(root, dict) else {"": root}

    @property
    def format(self) -> str:
        """``torch-zip``, ``torchscript``, ``torch-legacy`` or ``safetensors``
        (for a DCP directory, its items' format)."""
        return self._handle().format()

    @property
    def layout(self) -> str:
        """What was opened, as ``stowage inspect --json`` names it: a file's
        format, or a set's layout (``sharded-safetensors``, ``sharded-bin``,
        ``dcp``, ``dcp-hf``)."""
        return self._handle().layout()
