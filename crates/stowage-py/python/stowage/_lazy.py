"""``stowage.load(lazy=True)``: real tensors, each storage read on first use.

The walk hands this adapter each storage unread (a ``PendingStorage``); it
wraps it in a ``_LazyStorage`` that reads the bytes once and builds the
framework's storage on them with the wrapped adapter. Each tensor starts as
an ``_Unread`` placeholder (its shape, dtype and strides, and how to build
it), never handed to the caller: the dicts that hold tensors become
``LazyDict``s, which read a tensor when its entry is first read
(``sd["w"]``, ``sd.get("w")``, ``sd.items()``, ``dict(sd)``, ``**sd``, ``torch``'s
``load_state_dict``, ``safetensors``' ``save_file``) and give the
framework's tensor: the same object at every read, on a storage shared with
the other views of it and read at most once.

What stays lazy: tensors that are values of a dict (at any depth of dicts).
A tensor in a list or tuple is read, with everything in it, when the dict
entry holding the list is first read; a tensor at the root, or in a list at
the root, is read by the load. Values that are not plain tensors
(quantized, sparse and nested tensors, storages saved as values, numpy
arrays inside the pickle) are built while loading, their storages read then.
"""

from __future__ import annotations

import collections
import copy as _copy
import threading
from typing import Any, Callable, Dict, Iterator, List, Tuple


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

    def get(self) -> Any:
        with self._lock:
            if self._pending is not None:
                buffer = self._pending.read()
                self._made = self._adapter.storage(buffer, self._nbytes, self._device)
                self._pending = None
            return self._made


class _Unread:
    """A tensor not read yet: what builds it, once."""

    __slots__ = ("_build", "_storage", "_made", "_what", "_lock")

    def __init__(self, build: Callable[[Any], Any], storage: _LazyStorage, what: str) -> None:
        self._build = build
        self._storage = storage
        self._made: Any = None
        self._what = what
        self._lock = threading.Lock()

    def get(self) -> Any:
        with self._lock:
            if self._made is None:
                self._made = self._build(self._storage.get())
            return self._made

    @property
    def is_read(self) -> bool:
        """Whether its storage's bytes are read (through it or another view)."""
        return self._made is not None or self._storage._pending is None

    def __repr__(self) -> str:
        return f"<tensor not read: {self._what}>"


class _Held:
    """A list or tuple holding unread tensors, read whole, once, on first use."""

    __slots__ = ("_value", "_made", "_lock")

    def __init__(self, value: Any) -> None:
        self._value = value
        self._made: Any = None
        self._lock = threading.Lock()

    def get(self) -> Any:
        with self._lock:
            if self._made is None:
                items = [_read(x) for x in self._value]
                self._made = items if type(self._value) is list else tuple(items)
            return self._made

    @property
    def is_read(self) -> bool:
        return self._made is not None

    def __repr__(self) -> str:
        return f"<{type(self._value).__name__} of {len(self._value)} not read>"


_WAITING = (_Unread, _Held)


def _read(value: Any) -> Any:
    """`value` as the caller gets it: an unread tensor or list read now."""
    if type(value) in _WAITING:
        return value.get()
    return value


class LazyDict:
    """A dict of a ``stowage.load(..., lazy=True)`` whose tensors are read
    on first use: ``sd["w"]`` reads ``w``'s storage (once for all the
    tensors on it) and gives the framework's tensor, the same object at every
    read. It is a ``dict`` (or a ``collections.OrderedDict``, as saved), so
    code that takes a state dict takes it: ``load_state_dict``
    (``assign=True`` included), ``safetensors``' ``save_file``, ``dict(sd)``,
    ``{**sd}``. Reading every value (``items()``, ``values()``, ``==``,
    pickling) reads every tensor; keys, ``len`` and ``in`` read none.

    ``torch.save`` of one writes it as a ``collections.OrderedDict`` (the
    nearest type ``torch.load(weights_only=True)`` reads back); save
    ``dict(sd)`` to keep a plain dict.
    """

    __slots__ = ()

    def unread(self) -> List[Any]:
        """The keys whose tensors' bytes have not been read yet (through
        this entry or any other view of their storage)."""
        items = super().items()  # type: ignore[misc]
        return [k for k, v in items if type(v) in _WAITING and not v.is_read]

    def _read_all(self) -> None:
        for key, value in list(super().items()):  # type: ignore[misc]
            if type(value) in _WAITING:
                self[key]

    def __getitem__(self, key: Any) -> Any:
        value = super().__getitem__(key)  # type: ignore[misc]
        if type(value) in _WAITING:
            value = value.get()
            super().__setitem__(key, value)  # type: ignore[misc]
        return value

    def get(self, key: Any, default: Any = None) -> Any:
        return self[key] if key in self else default  # type: ignore[operator]

    def setdefault(self, key: Any, default: Any = None) -> Any:
        if key in self:  # type: ignore[operator]
            return self[key]
        super().__setitem__(key, default)  # type: ignore[misc]
        return default

    def pop(self, key: Any, *default: Any) -> Any:
        if key in self:  # type: ignore[operator]
            value = self[key]
            super().__delitem__(key)  # type: ignore[misc]
            return value
        return super().pop(key, *default)  # type: ignore[misc]

    def popitem(self, *last: Any) -> Tuple[Any, Any]:
        key, value = super().popitem(*last)  # type: ignore[misc]
        return key, _read(value)

    def __iter__(self) -> Iterator[Any]:
        # Defined so that `dict(sd)` and `{**sd}` take each value through
        # `__getitem__`, not straight from the table.
        return super().__iter__()  # type: ignore[misc,no-any-return]

    def values(self) -> Any:
        self._read_all()
        return super().values()  # type: ignore[misc]

    def items(self) -> Any:
        self._read_all()
        return super().items()  # type: ignore[misc]

    def __eq__(self, other: Any) -> bool:
        self._read_all()
        if isinstance(other, LazyDict):
            other._read_all()
        return super().__eq__(other)  # type: ignore[misc,no-any-return]

    def __ne__(self, other: Any) -> bool:
        return not self == other

    __hash__ = None  # type: ignore[assignment]

    def copy(self) -> Any:
        """A shallow copy, as lazy as this one (a tensor read through either
        is the same object)."""
        other = type(self)()
        for key, value in super().items():  # type: ignore[misc]
            super(LazyDict, other).__setitem__(key, value)  # type: ignore[misc]
        other.__dict__.update(self.__dict__)
        return other

    __copy__ = copy

    def __deepcopy__(self, memo: Dict[int, Any]) -> Any:
        self._read_all()
        plain: Any = collections.OrderedDict() if isinstance(self, collections.OrderedDict) else {}
        memo[id(self)] = plain
        for key, value in super().items():  # type: ignore[misc]
            plain[_copy.deepcopy(key, memo)] = _copy.deepcopy(value, memo)
        if self.__dict__:
            plain.__dict__.update(_copy.deepcopy(self.__dict__, memo))
        return plain

    def __or__(self, other: Any) -> Any:
        self._read_all()
        return dict(self) | other

    def __ror__(self, other: Any) -> Any:
        self._read_all()
        return other | dict(self)

    def __reduce_ex__(self, protocol: Any) -> Any:
        self._read_all()
        state = dict(self.__dict__) or None
        return (collections.OrderedDict, (), state, None, iter(super().items()))  # type: ignore[misc]


class _LazyPlainDict(LazyDict, dict):  # type: ignore[type-arg]
    """A lazy ``dict``."""


class _LazyOrderedDict(LazyDict, collections.OrderedDict):  # type: ignore[type-arg,misc]
    """A lazy ``collections.OrderedDict`` (a ``state_dict()``, its ``_metadata`` kept)."""


def lazy_tree(root: Any) -> Any:
    """The loaded tree with every dict that holds unread tensors a
    ``LazyDict`` (each object once: sharing kept), and what cannot be lazy
    (the root, lists at the root) read now. A load given a manifest checks
    each storage's tensors when the storage is read (the library does)."""
    memo: Dict[int, Tuple[Any, bool]] = {}

    def walk(obj: Any) -> Tuple[Any, bool]:
        """What to keep in place of `obj`, and whether it waits on a read."""
        known = memo.get(id(obj))
        if known is not None:
            return known
        kind = type(obj)
        if kind is _Unread:
            return obj, True
        if kind is dict or kind is collections.OrderedDict:
            memo[id(obj)] = (obj, False)  # a dict holding itself keeps the original
            walked = [(k, walk(v)) for k, v in obj.items()]
            if not any(waits for _, (_, waits) in walked):
                return obj, False
            lazy: Any = _LazyPlainDict() if kind is dict else _LazyOrderedDict()
            for key, (value, _) in walked:
                super(LazyDict, lazy).__setitem__(key, value)
            lazy.__dict__.update(getattr(obj, "__dict__", {}))
            memo[id(obj)] = (lazy, True)
            return lazy, True
        if kind is list or kind is tuple:
            memo[id(obj)] = (obj, False)
            walked_items = [walk(x) for x in obj]
            if not any(waits for _, waits in walked_items):
                return obj, False
            held = _Held([v for v, _ in walked_items] if kind is list else tuple(v for v, _ in walked_items))
            memo[id(obj)] = (held, True)
            return held, True
        return obj, False

    top, _ = walk(root)
    return _read(top)


class LazyAdapter:
    """Wraps a framework adapter for a lazy load: tensors start unread;
    every other leaf is the wrapped adapter's, built now."""

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

        return _Unread(build, storage, f"{dtype}{list(shape)}")

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._inner, name)

        def eager(*args: Any) -> Any:
            return method(*_read_deep(args))

        return eager


def _read_deep(x: Any) -> Any:
    """`x` with every unread tensor or storage in it read (the arguments of
    a value built while loading)."""
    kind = type(x)
    if kind in _WAITING or kind is _LazyStorage:
        return x.get()
    if kind is tuple:
        return tuple(_read_deep(i) for i in x)
    if kind is list:
        return [_read_deep(i) for i in x]
    if kind is dict:
        return {k: _read_deep(v) for k, v in x.items()}
    return x
