"""The Python values stowage makes for what it never imports or calls."""

from __future__ import annotations

from typing import Any


class InertObject:
    """An object of a class outside the allowlist, loaded with ``inert=True``.

    Nothing was imported or called to make it: ``module`` and ``name`` name
    the class, ``args`` are the constructor's arguments as the pickle gives
    them, and ``state`` is what the pickle's ``BUILD`` set (usually the
    object's ``__dict__``), with its tensors loaded as usual.
    """

    __slots__ = ("module", "name", "args", "state")

    def __init__(self, module: str, name: str, args: Any, state: Any) -> None:
        self.module = module
        self.name = name
        self.args = args
        self.state = state

    @property
    def qualified_name(self) -> str:
        return f"{self.module}.{self.name}"

    def __repr__(self) -> str:
        return f"InertObject({self.qualified_name}, args={self.args!r}, state={self.state!r})"


class GlobalRef:
    """A class or function the pickle names as a value, never imported."""

    __slots__ = ("module", "name")

    def __init__(self, module: str, name: str) -> None:
        self.module = module
        self.name = name

    def __eq__(self, other: object) -> bool:
        return isinstance(other, GlobalRef) and (self.module, self.name) == (
            other.module,
            other.name,
        )

    def __hash__(self) -> int:
        return hash((self.module, self.name))

    def __repr__(self) -> str:
        return f"GlobalRef({self.module}.{self.name})"
