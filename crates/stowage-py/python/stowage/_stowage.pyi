from typing import Any, List, Optional, final

from . import CorruptCheckpointError as CorruptCheckpointError
from . import StowageError as StowageError
from . import UnsafeGlobalError as UnsafeGlobalError

__version__: str

__all__ = [
    "__version__",
    "StorageBuffer",
    "StowageError",
    "UnsafeGlobalError",
    "CorruptCheckpointError",
    "load",
]

@final
class StorageBuffer:
    def __len__(self) -> int: ...

def load(
    src: str,
    adapter: Any,
    *,
    mmap: bool = False,
    inert: bool = False,
    allow_globals: List[str] = ...,
    map_location: Optional[str] = None,
) -> Any: ...
