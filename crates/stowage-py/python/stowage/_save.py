"""The encoder ``stowage.save`` walks with: what a framework object is,
for the extension's walk (``src/save.rs``), which handles the builtins.

Storages are numbered as they are met: a torch tensor's by its storage's
address, a numpy array's by the array that owns its memory, so views that
share memory in Python share one storage in the file.
"""

from __future__ import annotations

import collections
import sys
from typing import Any, Dict, Optional, Tuple

import numpy as np

from ._lazy import LazyDict


def _ml_dtype(name: str) -> Optional[np.dtype]:
    from ._numpy import _ml_dtype as ml_dtype

    return ml_dtype(name)


def _numpy_names() -> Dict[np.dtype, str]:
    from ._numpy import _dtypes

    return {dt: name for name, dt in _dtypes().items()}


class Encoder:
    def __init__(self) -> None:
        self._index: Dict[Any, int] = {}
        self._count = 0
        self._numpy: Optional[Dict[np.dtype, str]] = None

    def _storage(self, key: Any) -> Tuple[int, bool]:
        """The storage's number, and whether this is its first tensor (whose
        encoding carries the bytes). ``key`` None: a storage of its own."""
        if key is not None and key in self._index:
            return self._index[key], False
        index = self._count
        self._count += 1
        if key is not None:
            self._index[key] = index
        return index, True

    def encode(self, obj: Any) -> Optional[Tuple[Any, ...]]:
        torch = sys.modules.get("torch")  # a torch object implies torch is imported
        if torch is not None:
            if isinstance(obj, torch.Tensor):
                return self._tensor(torch, obj)
            if isinstance(obj, torch.dtype):
                return ("dtype", str(obj).removeprefix("torch."))
            if isinstance(obj, torch.Size):
                return ("size", tuple(obj))
            if isinstance(obj, torch.device):
                return ("device", str(obj))
        if isinstance(obj, LazyDict):
            # A lazy load's dict: its tensors read now, then written as the
            # dict it was loaded as.
            obj._read_all()
            if not isinstance(obj, collections.OrderedDict):
                return ("dict",)
        if isinstance(obj, collections.Counter):
            # Written as torch.save writes one, for torch.load(weights_only=True).
            return ("counter",)
        if isinstance(obj, collections.OrderedDict):
            # Its attributes (a state dict's `_metadata`), which torch.save
            # pickles as the state BUILD sets on it.
            return ("ordered_dict", dict(vars(obj)) or None)
        if isinstance(obj, np.ndarray):
            return self._ndarray(obj)
        return None

    def _tensor(self, torch: Any, t: Any) -> Tuple[Any, ...]:
        if type(t) not in (torch.Tensor, torch.nn.Parameter):
            # torch.save names the class (`_rebuild_from_type_v2`); written
            # as a plain tensor it would come back without it.
            raise TypeError(
                f"a tensor subclass ({type(t).__module__}.{type(t).__qualname__}):"
                " stowage.save writes torch.Tensor and torch.nn.Parameter"
            )
        if t.layout != torch.strided:
            raise TypeError(f"a {t.layout} tensor: stowage.save writes strided (dense) tensors")
        if t.is_quantized:
            raise TypeError(f"a quantized tensor ({t.dtype}): stowage.save writes tensors that are not quantized")
        if t.device.type != "cpu":
            raise TypeError(f"a tensor on {t.device}: move it to the cpu first (stowage has no accelerator back end)")
        st = t.untyped_storage()
        key = st.data_ptr() if st.nbytes() else None
        index, first = self._storage(key)
        data = None
        if first:
            data = torch.empty(0, dtype=torch.uint8).set_(st).numpy() if st.nbytes() else b""
        return (
            "tensor",
            index,
            data,
            str(t.dtype).removeprefix("torch."),
            tuple(t.shape),
            tuple(t.stride()),
            t.storage_offset(),
            bool(t.requires_grad),
            isinstance(t, torch.nn.Parameter),
            # The lazy bits, written as torch.save writes them (the
            # storage holds the elements before they apply).
            bool(t.is_conj()),
            bool(t.is_neg()),
            # Its Python attributes (`__dict__`), which torch.save pickles
            # and torch.load sets back: as torch gets them, None if none.
            torch._utils._get_obj_state(t) or None,
        )

    def _ndarray(self, a: np.ndarray) -> Tuple[Any, ...]:
        if self._numpy is None:
            self._numpy = _numpy_names()
        dt = a.dtype.newbyteorder("=") if a.dtype.byteorder not in ("=", "|") else a.dtype
        name = self._numpy.get(np.dtype(dt))
        if name is None and _ml_dtype(dt.name) == dt:
            # ml_dtypes' bfloat16 and float8 types, which torch holds by the same names.
            name = dt.name
        if name is None:
            raise TypeError(f"a numpy array of {a.dtype}: no torch dtype holds it")
        root = a
        while isinstance(root.base, np.ndarray):
            root = root.base
        start = a.__array_interface__["data"][0] - root.__array_interface__["data"][0]
        item = a.dtype.itemsize
        viewable = (
            a.dtype == dt
            and root.flags.c_contiguous
            and start >= 0
            and start % item == 0
            and all(s >= 0 and s % item == 0 for s in a.strides)
            and a.size > 0
        )
        if not viewable:
            # A copy, in native order: its own storage.
            a = np.ascontiguousarray(a, dtype=dt)
            index, _ = self._storage(None)
            copied = a.reshape(-1).view(np.uint8)
            return ("tensor", index, copied, name, a.shape, tuple(s // item for s in a.strides), 0, False, False, False, False, None)
        index, first = self._storage(id(root))
        shared = root.reshape(-1).view(np.uint8) if first else None
        return ("tensor", index, shared, name, a.shape, tuple(s // item for s in a.strides), start // item, False, False, False, False, None)
