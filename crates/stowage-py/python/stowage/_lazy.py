"""``stowage.load(lazy=True)``: tensors whose storage is read on first use.

The walk hands this adapter each storage unread (a ``PendingStorage``); it
wraps it in a ``_LazyStorage`` that reads the bytes once, when a tensor on it
is first used, and builds the framework's storage on them with the wrapped
adapter. Each tensor is a ``LazyTensor``: its shape, dtype and strides are
known without reading; ``load()`` (or any use: an operator, a torch
function, ``numpy.asarray``, an attribute) builds the framework tensor on the
shared storage, so views of one storage still share memory once loaded, and
each storage is read at most once.

Values that are not plain tensors (quantized, sparse and nested tensors,
storages saved as values, numpy arrays inside the pickle) are built while
loading, their storages read then.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Optional, Tuple


class _LazyStorage:
    """One storage of the file, read on first use, built once."""

    __slots__ = ("_adapter", "_pending", "_nbytes", "_device", "_made", "_lock")

    def __init__(self, adapter: Any, pending: Any, nbytes: int, device: str) -> None:
        self._adapter = adapter
        self._pending = pending
        self._nbytes = nbytes
        self._device = device
        self._made: Any = None
        self._lock = threading.Lock()

    @property
    def is_loaded(self) -> bool:
        return self._pending is None

    def get(self) -> Any:
        with self._lock:
            if self._pending is not None:
                buffer = self._pending.read()
                self._made = self._adapter.storage(buffer, self._nbytes, self._device)
                self._pending = None
            return self._made


def _loaded(x: Any) -> Any:
    if isinstance(x, _LazyStorage):
        return x.get()
    if isinstance(x, LazyTensor):
        return x.load()
    if type(x) is tuple:
        return tuple(_loaded(i) for i in x)
    if type(x) is list:
        return [_loaded(i) for i in x]
    if type(x) is dict:
        return {k: _loaded(v) for k, v in x.items()}
    return x


def _forward(name: str) -> Callable[..., Any]:
    """The loaded tensor's method `name`, for an operator (operators are
    looked up on the type, never through __getattr__)."""

    def method(self: "LazyTensor", *args: Any) -> Any:
        return getattr(self.load(), name)(*_loaded(args))

    method.__name__ = name
    return method


class LazyTensor:
    """A tensor of a ``stowage.load(..., lazy=True)``, not read yet.

    ``shape``, ``dtype``, ``stride()``, ``storage_offset()``, ``ndim``,
    ``requires_grad`` and ``nbytes`` need no read. ``load()`` reads the
    tensor's storage (once for all the tensors on it) and returns the
    framework's tensor, the same object at every call; using the tensor
    (``x + 1``, ``x[0]``, ``torch.matmul(x, y)``, ``x.sum()``,
    ``numpy.asarray(x)``, ``module.load_state_dict`` with it) loads it first.
    """

    __slots__ = ("_build", "_storage", "_made", "_dtype_name", "shape", "dtype", "_stride", "_offset",
                 "requires_grad")

    def __init__(
        self,
        build: Callable[[Any], Any],
        storage: _LazyStorage,
        dtype_name: str,
        dtype: Any,
        shape: Any,
        stride: Tuple[int, ...],
        offset: int,
        requires_grad: bool,
    ) -> None:
        self._build = build
        self._storage = storage
        self._made: Any = None
        self._dtype_name = dtype_name
        self.shape = shape
        self.dtype = dtype
        self._stride = stride
        self._offset = offset
        self.requires_grad = requires_grad

    def load(self) -> Any:
        """The framework's tensor, its storage read now if it was not."""
        if self._made is None:
            self._made = self._build(self._storage.get())
        return self._made

    @property
    def is_loaded(self) -> bool:
        """Whether the tensor's storage has been read."""
        return self._storage.is_loaded

    def stride(self) -> Tuple[int, ...]:
        return self._stride

    def storage_offset(self) -> int:
        return self._offset

    @property
    def ndim(self) -> int:
        return len(self._stride)

    def dim(self) -> int:
        return len(self._stride)

    @property
    def nbytes(self) -> int:
        return self.numel() * self.dtype.itemsize

    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    def size(self, dim: Optional[int] = None) -> Any:
        return self.shape if dim is None else self.shape[dim]

    def __repr__(self) -> str:
        state = "loaded" if self.is_loaded else "not read"
        return f"LazyTensor(shape={tuple(self.shape)}, dtype={self._dtype_name}, {state})"

    def __len__(self) -> int:
        if not self._stride:
            raise TypeError("len() of a 0-d tensor")
        return int(self.shape[0])

    # Everything else is the loaded tensor's.
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.load(), name)

    @classmethod
    def __torch_function__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        return func(*_loaded(tuple(args)), **_loaded(kwargs or {}))

    def __array__(self, dtype: Any = None, copy: Any = None) -> Any:
        import numpy as np

        made = self.load()
        if hasattr(made, "numpy") and not isinstance(made, np.ndarray):
            made = made.detach().numpy() if hasattr(made, "detach") else made.numpy()
        return np.asarray(made, dtype=dtype)

    # Operators: the loaded tensor's.
    __getitem__ = _forward("__getitem__")
    __setitem__ = _forward("__setitem__")
    __iter__ = _forward("__iter__")
    __bool__ = _forward("__bool__")
    __float__ = _forward("__float__")
    __int__ = _forward("__int__")
    __index__ = _forward("__index__")
    __add__ = _forward("__add__")
    __radd__ = _forward("__radd__")
    __iadd__ = _forward("__iadd__")
    __sub__ = _forward("__sub__")
    __rsub__ = _forward("__rsub__")
    __isub__ = _forward("__isub__")
    __mul__ = _forward("__mul__")
    __rmul__ = _forward("__rmul__")
    __imul__ = _forward("__imul__")
    __truediv__ = _forward("__truediv__")
    __rtruediv__ = _forward("__rtruediv__")
    __itruediv__ = _forward("__itruediv__")
    __floordiv__ = _forward("__floordiv__")
    __rfloordiv__ = _forward("__rfloordiv__")
    __mod__ = _forward("__mod__")
    __rmod__ = _forward("__rmod__")
    __pow__ = _forward("__pow__")
    __rpow__ = _forward("__rpow__")
    __matmul__ = _forward("__matmul__")
    __rmatmul__ = _forward("__rmatmul__")
    __neg__ = _forward("__neg__")
    __pos__ = _forward("__pos__")
    __abs__ = _forward("__abs__")
    __invert__ = _forward("__invert__")
    __and__ = _forward("__and__")
    __rand__ = _forward("__rand__")
    __or__ = _forward("__or__")
    __ror__ = _forward("__ror__")
    __xor__ = _forward("__xor__")
    __rxor__ = _forward("__rxor__")
    __lt__ = _forward("__lt__")
    __le__ = _forward("__le__")
    __gt__ = _forward("__gt__")
    __ge__ = _forward("__ge__")


class LazyAdapter:
    """Wraps a framework adapter for a lazy load: tensors become
    ``LazyTensor``s; every other leaf is the wrapped adapter's, built now."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def lazy_storage(self, pending: Any, nbytes: int, device: str) -> _LazyStorage:
        return _LazyStorage(self._inner, pending, nbytes, device)

    def tensor(
        self,
        storage: Any,
        dtype: str,
        shape: Tuple[int, ...],
        stride: Tuple[int, ...],
        offset: int,
        requires_grad: bool,
        parameter: bool,
    ) -> Any:
        inner = self._inner
        if not isinstance(storage, _LazyStorage):  # no bytes (meta): nothing to read
            return inner.tensor(storage, dtype, shape, stride, offset, requires_grad, parameter)

        def build(made: Any) -> Any:
            return inner.tensor(made, dtype, shape, stride, offset, requires_grad, parameter)

        return LazyTensor(
            build,
            storage,
            dtype,
            inner.dtype(dtype),
            inner.size(shape),
            tuple(stride),
            offset,
            requires_grad,
        )

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._inner, name)

        def eager(*args: Any) -> Any:
            return method(*_loaded(args))

        return eager

