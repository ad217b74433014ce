import os
from typing import Any, BinaryIO, Dict, Iterable, List, Literal, Optional, Tuple, Union

__version__: str

__all__ = [
    "load",
    "save",
    "scan",
    "inspect",
    "manifest",
    "diff",
    "convert",
    "safe_open",
    "SafeOpen",
    "TensorSlice",
    "LazyDict",
    "InertObject",
    "GlobalRef",
    "StowageError",
    "UnsafeGlobalError",
    "CorruptCheckpointError",
    "__version__",
]

from ._lazy import LazyDict as LazyDict

_Path = Union[str, "os.PathLike[str]"]

def load(
    src: Union[_Path, BinaryIO],
    map_location: Any = None,
    *,
    weights_only: Optional[bool] = None,
    framework: Literal["torch", "pt", "pytorch", "numpy", "np", "jax", "flax", "mlx"] = "torch",
    mmap: Optional[bool] = None,
    lazy: bool = False,
    inert: bool = False,
    allow_globals: Iterable[str] = (),
    huge_pages: bool = False,
    expect: Any = None,
) -> Any:
    """Load a checkpoint as torch.load(src, weights_only=True) would, without torch's unpickler."""
    ...

def save(
    obj: Any,
    dst: Union[_Path, BinaryIO],
    *,
    sync: bool = True,
    to: Optional[str] = None,
    max_shard_size: Optional[str] = None,
) -> None:
    """Save obj as torch.save would, for torch.load(dst, weights_only=True) to read back identical; to= writes a sharded set or a DCP folder."""
    ...

def scan(*paths: _Path, format: str = "json") -> Dict[str, Any]:
    """The JSON of stowage scan --json (or, with format="sarif", its SARIF 2.1.0 log), as a dict: every global each pickle names, with its verdict."""
    ...

def inspect(src: _Path, *, hashes: bool = True, inert: bool = False) -> Dict[str, Any]:
    """The JSON of stowage inspect --json, as a dict: storages, tensors, values (and objects)."""
    ...

def manifest(
    src: Union[_Path, Any], *, inert: bool = False, oms: bool = False, name: Optional[str] = None
) -> Dict[str, Any]:
    """A checkpoint's content manifest (stowage manifest's JSON): the same in every format.

    src is a path or URL, or an object in memory (a state dict): then the manifest of the file stowage.save would write."""
    ...

def diff(a: _Path, b: _Path, *, atol: float = 0.0, rtol: float = 0.0, content: bool = False) -> Dict[str, Any]:
    """The JSON of stowage diff --json, as a dict: {"same": bool, "differences": [...]}."""
    ...

def convert(
    src: _Path,
    dst: _Path,
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
    manifest: Optional[_Path] = None,
) -> str:
    """stowage convert: src rewritten as dst (format by extension, or a folder with to=); what it prints."""
    ...

def safe_open(
    filename: _Path,
    framework: Literal["torch", "pt", "pytorch", "numpy", "np", "jax", "flax", "mlx"] = "torch",
    device: Any = "cpu",
    *,
    inert: bool = False,
    allow_globals: Iterable[str] = (),
) -> SafeOpen:
    """Open a checkpoint lazily, as safetensors.safe_open does, for any format load reads."""
    ...

class TensorSlice:
    def __init__(self, opened: SafeOpen, name: str) -> None: ...
    def get_shape(self) -> List[int]: ...
    def get_dtype(self) -> str: ...
    def __getitem__(self, index: Any) -> Any: ...

class SafeOpen:
    def __init__(
        self,
        filename: _Path,
        framework: str = "torch",
        device: Any = "cpu",
        *,
        inert: bool = False,
        allow_globals: Iterable[str] = (),
    ) -> None: ...
    def __enter__(self) -> SafeOpen: ...
    def __exit__(self, *exc: Any) -> None: ...
    def keys(self) -> List[str]: ...
    def offset_keys(self) -> List[str]: ...
    def __contains__(self, name: str) -> bool: ...
    def __len__(self) -> int: ...
    def get_tensor(self, name: str) -> Any: ...
    def get_tensors(self) -> Dict[str, Any]: ...
    def get_slice(self, name: str) -> TensorSlice: ...
    def metadata(self) -> Optional[Dict[str, Any]]: ...
    @property
    def format(self) -> str: ...
    @property
    def layout(self) -> str: ...

class InertObject:
    """An object of a class outside the allowlist, loaded with inert=True; never imported or called."""

    module: str
    name: str
    args: Any
    state: Any
    def __init__(self, module: str, name: str, args: Any, state: Any) -> None: ...
    @property
    def qualified_name(self) -> str: ...

class GlobalRef:
    """A class or function the pickle names as a value, never imported."""

    module: str
    name: str
    def __init__(self, module: str, name: str) -> None: ...

class StowageError(Exception):
    """Base class of every error stowage raises about a checkpoint."""

    file: Optional[str]

class UnsafeGlobalError(StowageError):
    """A global outside PyTorch's weights_only allowlist; it was never imported or called."""

    module: str
    name: str

class CorruptCheckpointError(StowageError):
    """The file is damaged or not a checkpoint of the format it claims."""

    entry: Optional[str]
