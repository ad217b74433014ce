from typing import Any, Dict, List, Optional, Tuple, final

from . import CorruptCheckpointError as CorruptCheckpointError
from . import StowageError as StowageError
from . import UnsafeGlobalError as UnsafeGlobalError

__version__: str

__all__ = [
    "__version__",
    "StorageBuffer",
    "PendingStorage",
    "SafeOpen",
    "DcpSource",
    "StowageError",
    "UnsafeGlobalError",
    "CorruptCheckpointError",
    "load",
    "load_bytes",
    "save",
    "save_bytes",
    "write_items",
    "scan",
    "cli",
]

@final
class StorageBuffer:
    def __len__(self) -> int: ...

@final
class DcpSource:
    def __new__(cls, src: str, adapter: Any) -> DcpSource: ...
    def tensors(self) -> List[Tuple[str, str, List[int], List[Tuple[List[int], List[int]]]]]: ...
    def read_region(self, fqn: str, offsets: List[int], sizes: List[int]) -> Any: ...
    def read_region_into(self, fqn: str, offsets: List[int], sizes: List[int], target: Any) -> None: ...

@final
class PendingStorage:
    def read(self) -> StorageBuffer: ...
    def __len__(self) -> int: ...

def load(
    src: str,
    adapter: Any,
    *,
    mmap: bool = False,
    lazy: bool = False,
    inert: bool = False,
    allow_globals: List[str] = ...,
    map_location: Optional[str] = None,
) -> Any: ...

@final
class SafeOpen:
    def __new__(
        cls, src: str, adapter: Any, *, inert: bool = False, allow_globals: List[str] = ...
    ) -> SafeOpen: ...
    def keys(self) -> List[str]: ...
    def __contains__(self, key: str, /) -> bool: ...
    def __len__(self) -> int: ...
    def get_tensor(self, name: str) -> Any: ...
    def tensor_info(self, name: str) -> Tuple[str, List[int]]: ...
    def safetensors_dtype(self, name: str) -> str: ...
    def offset_keys(self) -> List[str]: ...
    def read_slice(self, name: str, ranges: List[Tuple[int, int, int]]) -> Optional[Any]: ...
    def read_slice_into(self, name: str, ranges: List[Tuple[int, int, int]], target: Any) -> bool: ...
    def root(self, adapter: Any) -> Any: ...
    def safetensors_metadata(self) -> Optional[Dict[str, str]]: ...
    def format(self) -> str: ...

def load_bytes(
    data: bytes,
    adapter: Any,
    *,
    inert: bool = False,
    allow_globals: List[str] = ...,
    map_location: Optional[str] = None,
) -> Any: ...
def save_bytes(obj: Any, encoder: Any) -> bytes: ...
def save(
    obj: Any,
    dst: str,
    encoder: Any,
    *,
    sync: bool = True,
    to: Optional[str] = None,
    max_shard_size: Optional[str] = None,
) -> None: ...
def scan(*paths: str, format: str = "json") -> str: ...
def cli(args: List[str]) -> Tuple[int, bytes]: ...

def write_items(
    dst: str, items: List[Any], new_encoder: Any, *, sync: bool = True, zstd: bool = False
) -> List[Tuple[int, int, List[str]]]: ...
