"""The torch adapter: tensors on ``torch.UntypedStorage``s made from the
loaded bytes without a copy (``torch.frombuffer``), one per storage of the
file, so tensors that shared a storage share one again."""

from __future__ import annotations

from typing import Any, Callable, Dict, Optional, Tuple

import numpy as np
import torch

from ._adapter import BaseAdapter
from ._stowage import StowageError


_ATTRS: Dict[str, Any] = {}


def _torch_attr(name: str) -> Any:
    # Looked up once per name (dtypes, layouts): a load asks per tensor.
    found = _ATTRS.get(name)
    if found is None:
        found = _ATTRS[name] = getattr(torch, name.removeprefix("torch."))
    return found


def _as_saved(t: torch.Tensor, requires_grad: bool, parameter: bool) -> torch.Tensor:
    """``t`` as it was saved: an ``nn.Parameter``, or a tensor that
    requires grad, where it was one."""
    if parameter:
        return torch.nn.Parameter(t, requires_grad=requires_grad)
    if requires_grad:
        t.requires_grad_(True)
    return t


class Adapter(BaseAdapter):
    def storage(self, buffer: Any, nbytes: int, device: str) -> torch.UntypedStorage:
        if buffer is None:
            return torch.UntypedStorage(nbytes, device="meta")
        if nbytes == 0:
            return torch.UntypedStorage(0)
        return torch.frombuffer(buffer, dtype=torch.uint8).untyped_storage()

    def tensor_on_buffer(
        self,
        buffer: Any,
        dtype: str,
        shape: Tuple[int, ...],
        stride: Tuple[int, ...],
        offset: int,
        requires_grad: bool,
        parameter: bool,
    ) -> torch.Tensor:
        # A storage's first tensor, made on its bytes in one call: a 1-D
        # tensor over the whole buffer, then set to its view of it. (The
        # extension gives only buffers of whole elements.) Its storage is
        # the storage's, for every later view (`storage_of`).
        t = torch.frombuffer(buffer, dtype=_torch_attr(dtype))
        if t.shape != shape or offset or stride != (1,):
            t.set_(t.untyped_storage(), offset, shape, stride)
        return _as_saved(t, requires_grad, parameter)

    # A storage's first tensor where it needs no grad: torch's own call,
    # which the extension makes with no Python frame between
    # (`buffer_view(buffer, dtype=…)`), giving all of the storage in one
    # dimension; then, where the saved tensor is another view of it, the
    # tensor's method `buffer_restride(shape, stride, offset)`, in place:
    # `as_strided_` keeps it a tensor of its own (not a view, `_base` is
    # None), as `set_` does, without making a storage object first.
    # (A builtin function: an attribute of the class, it binds to nothing.)
    buffer_view: Callable[..., torch.Tensor] = torch.frombuffer
    buffer_restride: str = "as_strided_"
    # What `buffer_view` makes, from a DLPack capsule of the storage, for
    # the dtypes DLPack has: the capsule needs no argument parsing and no
    # Python object kept for the storage, a quarter of `frombuffer`'s cost.
    # `torch.from_dlpack` calls it after a Python frame of checks for
    # objects that are not capsules. From torch 2.4, well after it imported
    # DLPack's `bool` (the newest type the extension hands it); before,
    # `buffer_view` for every dtype.
    dlpack_view: Optional[Callable[[Any], torch.Tensor]] = (
        getattr(torch._C, "_from_dlpack", None) if torch.__version__ >= "2.4" else None
    )

    def storage_of(self, tensor: torch.Tensor) -> torch.UntypedStorage:
        return tensor.untyped_storage()

    def tensor(
        self,
        storage: torch.UntypedStorage,
        dtype: str,
        shape: Tuple[int, ...],
        stride: Tuple[int, ...],
        offset: int,
        requires_grad: bool,
        parameter: bool,
    ) -> torch.Tensor:
        t = torch.empty((0,), dtype=_torch_attr(dtype), device=storage.device)
        t.set_(storage, offset, shape, stride)
        return _as_saved(t, requires_grad, parameter)

    def quantized(
        self,
        storage: torch.UntypedStorage,
        dtype: str,
        shape: Tuple[int, ...],
        stride: Tuple[int, ...],
        offset: int,
        requires_grad: bool,
        params: Tuple[Any, ...],
    ) -> torch.Tensor:
        # As torch._utils._rebuild_qtensor makes it: an empty quantized
        # tensor with the quantizer, then set to the storage.
        qdtype = _torch_attr(dtype)
        typed = torch.storage.TypedStorage(wrap_storage=storage, dtype=qdtype, _internal=True)
        if params[0] == "per_tensor_affine":
            t = torch._empty_affine_quantized(shape, scale=params[1], zero_point=params[2], dtype=qdtype)
        else:
            scales, zero_points, axis = params[1:]
            t = torch._empty_per_channel_affine_quantized(
                shape, scales=scales, zero_points=zero_points, axis=axis, dtype=qdtype
            )
        t.set_(typed, offset, shape, stride)
        t.requires_grad = requires_grad
        return t

    # Sparse and nested tensors, as torch._utils rebuilds them.
    def sparse_coo(self, indices: Any, values: Any, size: Any, coalesced: Optional[bool]) -> torch.Tensor:
        return torch.sparse_coo_tensor(indices, values, size, check_invariants=False, is_coalesced=coalesced)

    def sparse_compressed(self, layout: str, compressed: Any, plain: Any, values: Any, size: Any) -> torch.Tensor:
        return torch.sparse_compressed_tensor(
            compressed, plain, values, size, layout=_torch_attr(layout), check_invariants=False
        )

    def nested(self, buffer: Any, sizes: Any, strides: Any, offsets: Any) -> torch.Tensor:
        return torch._nested_view_from_buffer(buffer, sizes, strides, offsets)

    def tensor_state(self, t: torch.Tensor, state: Any) -> torch.Tensor:
        # The attributes torch.save kept (`_rebuild_from_type_v2`,
        # `_rebuild_parameter_with_state`), set back as torch.load sets them;
        # but only what `__dict__` holds: a name the tensor's class defines
        # (`_backward_hooks`, `grad`, `data`) would replace torch's own
        # state, which a hand-made file could set to crash autograd later.
        parts = state if isinstance(state, tuple) else (state,)
        for part in parts:
            for name in part or ():
                if not isinstance(name, str) or hasattr(type(t), name):
                    raise StowageError(
                        f"a tensor attribute named {name!r}: torch.save writes only names of the"
                        " tensor's own __dict__, never one its class defines"
                    )
        return torch._utils._set_obj_state(t, state)

    def lazy_bits(self, t: torch.Tensor, conj: bool, neg: bool) -> torch.Tensor:
        # As torch._utils._rebuild_tensor_v2 restores them.
        # (Only the bits set: a conj bit, even False, asserts on a real dtype.)
        bits = {name: True for name, on in (("conj", conj), ("neg", neg)) if on}
        torch._C._set_tensor_metadata(t, bits)  # type: ignore[attr-defined]
        return t

    def storage_value(self, storage: torch.UntypedStorage, dtype: Optional[str]) -> Any:
        # torch.load gives every storage saved as a value as a TypedStorage,
        # an UntypedStorage as one of uint8 (serialization.py's `_load`).
        typed = torch.uint8 if dtype is None else _torch_attr(dtype)
        return torch.storage.TypedStorage(wrap_storage=storage, dtype=typed, _internal=True)

    def dtype(self, name: str) -> torch.dtype:
        return _torch_attr(name)

    def device(self, name: str) -> torch.device:
        return torch.device(name)

    def size(self, dims: Tuple[int, ...]) -> torch.Size:
        return torch.Size(dims)

    def qscheme(self, name: str) -> Any:
        return _torch_attr(name)

    def layout(self, name: str) -> Any:
        return _torch_attr(name)

    @staticmethod
    def _bytes_of(storage: Any) -> np.ndarray:
        if isinstance(storage, torch.UntypedStorage):
            return torch.empty(0, dtype=torch.uint8).set_(storage).numpy()
        return np.asarray(storage, dtype=np.uint8)
