"""What the framework adapters share: the values that are the same in every
framework (containers' state, inert objects, numpy values). The extension's
walk (``src/convert.rs``) calls these methods, one per kind of leaf."""

from __future__ import annotations

import builtins
import collections
import datetime as _dt
import os
import pathlib
from typing import Any, Optional, Tuple

import numpy as np

from ._objects import GlobalRef, InertObject
from ._stowage import StowageError


class BaseAdapter:
    # Values outside torch, as plain Python: names and tuples. The torch
    # adapter makes torch's objects of them instead.
    def device(self, name: str) -> Any:
        return name

    def size(self, dims: Tuple[int, ...]) -> Any:
        return tuple(dims)

    def qscheme(self, name: str) -> Any:
        return name

    def layout(self, name: str) -> Any:
        return name

    # Python's data types, as the pickle held them (nothing is called but
    # their constructors, with the decoded fields).
    def datetime(
        self, date: Tuple[int, int, int], time: Tuple[int, int, int, int], fold: bool, tz: Any
    ) -> _dt.datetime:
        return _dt.datetime(*date, *time, tzinfo=tz, fold=int(fold))

    def date(self, year: int, month: int, day: int) -> _dt.date:
        return _dt.date(year, month, day)

    def time(self, time: Tuple[int, int, int, int], fold: bool, tz: Any) -> _dt.time:
        return _dt.time(*time, tzinfo=tz, fold=int(fold))

    def timedelta(self, days: int, seconds: int, microseconds: int) -> _dt.timedelta:
        return _dt.timedelta(days=days, seconds=seconds, microseconds=microseconds)

    def timezone(self, days: int, seconds: int, microseconds: int, name: Optional[str]) -> _dt.timezone:
        offset = _dt.timedelta(days=days, seconds=seconds, microseconds=microseconds)
        return _dt.timezone(offset) if name is None else _dt.timezone(offset, name)

    def path(self, cls: str, path: str) -> pathlib.PurePath:
        # `cls` is one of pathlib's six classes (stowage's table); a concrete
        # path of the other system cannot be made here, so it is its pure form.
        if cls == "WindowsPath" and os.name != "nt":
            cls = "PureWindowsPath"
        elif cls == "PosixPath" and os.name == "nt":
            cls = "PurePosixPath"
        return getattr(pathlib, cls)(path)

    def slice(self, start: Optional[int], stop: Optional[int], step: Optional[int]) -> slice:
        return builtins.slice(start, stop, step)

    def range(self, start: int, stop: int, step: int) -> range:
        return builtins.range(start, stop, step)

    def builtin_type(self, name: str) -> type:
        # `name` is from stowage's own table of builtin types, not the file's text.
        return getattr(builtins, name)

    def ordered_dict(self) -> "collections.OrderedDict[Any, Any]":
        return collections.OrderedDict()

    def set_state(self, obj: Any, state: Any) -> None:
        # An OrderedDict's BUILD state is its __dict__ (a state dict's
        # `_metadata`), as pickle's BUILD sets it.
        if not isinstance(state, dict):
            raise StowageError(f"the state of a {type(obj).__name__} is a {type(state).__name__}, not a dict")
        for key, value in state.items():
            setattr(obj, key, value)

    def tensor_state(self, t: Any, state: Any) -> Any:
        raise StowageError("a tensor's Python attributes have no place on an array; load with framework='torch'")

    def quantized(self, *args: Any) -> Any:
        raise StowageError("a quantized tensor has no numpy form; load with framework='torch'")

    def sparse_coo(self, *args: Any) -> Any:
        raise StowageError("a sparse tensor has no numpy form; load with framework='torch'")

    def sparse_compressed(self, *args: Any) -> Any:
        raise StowageError("a sparse tensor has no numpy form; load with framework='torch'")

    def nested(self, *args: Any) -> Any:
        raise StowageError("a nested tensor has no numpy form; load with framework='torch'")

    def inert(self, module: str, name: str, args: Any, state: Any) -> InertObject:
        return InertObject(module, name, args, state)

    def global_ref(self, module: str, name: str) -> GlobalRef:
        return GlobalRef(module, name)

    @staticmethod
    def _bytes_of(storage: Any) -> np.ndarray:
        """The storage's bytes as a uint8 numpy array sharing them."""
        return np.asarray(storage, dtype=np.uint8)

    def ndarray(
        self,
        storage: Any,
        code: str,
        shape: Tuple[int, ...],
        stride: Tuple[int, ...],
        offset: int,
        itemsize: int,
    ) -> np.ndarray:
        dtype = np.dtype(code)
        data = self._bytes_of(storage)
        return np.ndarray(
            shape,
            dtype=dtype,
            buffer=data,
            offset=offset * itemsize,
            strides=tuple(s * itemsize for s in stride),
        )

    def numpy_scalar(self, code: str, value: Any) -> Any:
        return np.dtype(code).type(value)

    def numpy_dtype(self, code: str) -> np.dtype:
        return np.dtype(code)


FRAMEWORKS = ("torch", "numpy", "jax", "mlx")


# safetensors' names for the frameworks (``safe_open(path, framework="pt")``).
_ALIASES = {"pt": "torch", "pytorch": "torch", "np": "numpy", "flax": "jax"}


def adapter_for(framework: str) -> BaseAdapter:
    """The adapter that builds ``framework``'s objects (torch is imported
    only for ``"torch"``). safetensors' names are taken too: ``"pt"``,
    ``"pytorch"``, ``"np"``, ``"flax"``."""
    framework = _ALIASES.get(framework, framework)
    if framework == "torch":
        try:
            from . import _torch
        except ImportError as e:
            raise ImportError(
                f"framework='torch' needs torch ({e}); install it, or load with framework='numpy'"
            ) from e
        return _torch.Adapter()
    if framework in ("numpy", "np"):
        from . import _numpy

        return _numpy.Adapter()
    if framework in ("jax", "mlx"):
        # Imported only when asked for; each is an optional package.
        import importlib

        try:
            module = importlib.import_module(f"._{framework}", __package__)
        except ImportError as e:
            raise ImportError(f"framework={framework!r} needs {framework} ({e}); install it") from e
        adapter: BaseAdapter = module.Adapter()
        return adapter
    raise ValueError(
        f"framework {framework!r}: stowage builds {', '.join(FRAMEWORKS)} objects"
        f" (or, by safetensors' names, {', '.join(_ALIASES)})"
    )
