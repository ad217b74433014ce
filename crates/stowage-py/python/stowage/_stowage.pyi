from typing import Any, Dict, List, Optional, Tuple, Union, final

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
    "Location",
    "StowageError",
    "UnsafeGlobalError",
    "CorruptCheckpointError",
    "load",
    "load_bytes",
    "save",
    "save_bytes",
    "write_items",
    "write_rank",
    "scan",
    "inspect",
    "manifest",
    "manifest_of",
    "diff",
    "diff_content",
    "convert",
]

@final
class StorageBuffer:
    def __len__(self) -> int: ...

@final
class DcpSource:
    def __new__(cls, src: str, adapter: Any) -> DcpSource: ...
    def tensors(self) -> List[Tuple[str, str, Tuple[int, ...], List[Tuple[Tuple[int, ...], Tuple[int, ...]]]]]: ...
    def read_region(self, fqn: str, offsets: List[int], sizes: List[int]) -> Any: ...
    def values(self) -> List[Tuple[str, List[Union[str, int]]]]: ...
    def read_region_into(self, fqn: str, offsets: List[int], sizes: List[int], target: Any) -> None: ...

@final
class Location:
    def __new__(cls, src: str) -> Location: ...
    @property
    def is_remote(self) -> bool: ...
    def folder(self) -> str: ...
    def join(self, name: str) -> str: ...

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
    huge_pages: bool = False,
    expect: Optional[str] = None,
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
    def layout(self) -> str: ...

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
def scan(*paths: str, format: str = "json") -> Dict[str, Any]: ...
def inspect(src: str, *, hashes: bool = True, inert: bool = False) -> Dict[str, Any]: ...
def manifest(src: str, *, inert: bool = False, oms_name: Optional[str] = None) -> Dict[str, Any]: ...
def manifest_of(obj: Any, encoder: Any, *, oms_name: Optional[str] = None) -> Dict[str, Any]: ...
def diff(a: str, b: str, *, atol: float = 0.0, rtol: float = 0.0) -> Dict[str, Any]: ...
def diff_content(a: str, b: str) -> Dict[str, Any]: ...
def convert(
    src: str,
    dst: str,
    *,
    to: Optional[str] = None,
    max_shard_size: Optional[str] = None,
    ranks: Optional[int] = None,
    inert: bool = False,
    drop_values: bool = False,
    drop_objects: bool = False,
    select: Optional[str] = None,
    state_dict: bool = False,
    rank: Optional[int] = None,
    world: Optional[int] = None,
    manifest: Optional[str] = None,
) -> str: ...

def write_items(
    dst: str, items: List[Any], new_encoder: Any, *, sync: bool = True, zstd: bool = False
) -> List[Tuple[int, int, List[str]]]: ...
def write_rank(
    dst: str,
    prefix: str,
    items: List[Any],
    new_encoder: Any,
    *,
    files: int = 1,
    sync: bool = True,
    zstd: bool = False,
) -> List[Tuple[str, int, int, List[str]]]: ...
