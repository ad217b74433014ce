"""stowage: load PyTorch checkpoints without running their pickles.

``stowage.load`` reads ``torch.save`` files (zip and legacy formats),
safetensors files, Hugging Face sharded sets and PyTorch Distributed
Checkpoint folders, on disk or by URL (``s3://``, ``gs://``, ``az://``,
``http(s)://``), and returns what ``torch.load(src, weights_only=True)``
returns, without torch's unpickler: a global the file names is never
imported or called. Tensors that viewed one storage in the file view one
storage after the load.

torch is optional: ``framework="numpy"`` gives numpy arrays without importing
it.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import sys
from typing import Any, BinaryIO, Dict, Iterable, Iterator, Optional, Union

from . import _stowage
from ._adapter import adapter_for
from ._lazy import LazyAdapter, LazyDict, lazy_tree
from ._objects import GlobalRef, InertObject
from ._safe_open import SafeOpen, TensorSlice
from ._stowage import CorruptCheckpointError, StowageError, UnsafeGlobalError

__version__: str = _stowage.__version__

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

def load(
    src: Union[str, "os.PathLike[str]", BinaryIO],
    map_location: Any = None,
    *,
    weights_only: Optional[bool] = None,
    framework: str = "torch",
    mmap: Optional[bool] = None,
    lazy: bool = False,
    inert: bool = False,
    allow_globals: Iterable[str] = (),
    huge_pages: bool = False,
    expect: Any = None,
) -> Any:
    """Load a checkpoint as ``torch.load(src, weights_only=True)`` would.

    ``src`` is a file (``.pt``, ``.bin``, ``.ckpt``, ``.safetensors``, ...), a
    folder or ``*.index.json`` of a sharded set, a distributed checkpoint
    folder, or a URL of any of these; or, as for ``torch.load``, a file
    object (``io.BytesIO``, an open file), read from its position to its end
    and loaded eagerly. The format is found from the content.

    framework: ``"torch"`` (tensors, ``torch.nn.Parameter`` kept) or
        ``"numpy"`` (``numpy.ndarray`` leaves; bfloat16 and float8 through
        ``ml_dtypes``; torch is not imported), ``"jax"`` (``jax.Array``
        leaves) or ``"mlx"`` (``mlx.core.array`` leaves), where those are
        installed: copies of the numpy views, since their arrays are
        immutable, so sharing is not kept there.
    mmap: map the file copy-on-write instead of reading it. As with
        ``torch.load(mmap=True)``, the file must not be truncated or
        written while the tensors live. ``None``, torch's default, is ``False``.
    lazy: read each storage on first use, from the file or the URL: every
        dict that holds tensors is a ``LazyDict`` (a ``dict``, or an
        ``OrderedDict`` as saved) whose entries are the framework's tensors,
        each read when its entry is first read (``sd["w"]``, ``items()``,
        ``load_state_dict``), on a storage shared with the other views of it
        and read at most once. A tensor in a list is read with its list; one
        at the root, by the load. Not with ``mmap`` (a mapping is already
        read on use).
    inert: load the globals outside the allowlist as ``InertObject``s
        instead of refusing them; nothing is imported or called.
    allow_globals: names (``"argparse.Namespace"``) to accept beside the
        allowlist: the data types stowage decodes are rebuilt as data, any
        other name as an ``InertObject``.
    map_location: ``None``, ``"cpu"`` or ``torch.device("cpu")``; ``"meta"``
        for tensors without data; or a dict of saved locations to one of
        these (``{"cuda:0": "cpu"}``). Every storage lands there: stowage has
        no device back end yet, so any other device is a ``ValueError``. Or,
        as for ``torch.load``, a function ``map_location(storage,
        location)``, called with each storage once read into CPU memory and
        the location the file gives it, which returns the storage to build
        the tensors on (``None``: where it was saved); with
        ``framework="torch"`` only, and not with ``lazy=True``.
    huge_pages: read each storage of 2 MiB or more into memory advised to
        use transparent huge pages (Linux): about 3x faster where the
        kernel has huge pages ready (a load after the first in a process
        here), slower where it must fault them in from a virtual machine's
        host (often a process's first load). Same resident memory. Eager
        loads only.
    expect: a content manifest (what ``stowage.manifest`` gives, or the path
        of a file ``stowage manifest -o`` wrote): every tensor read is
        hashed and checked against it; one that differs, is missing or is
        not listed raises ``CorruptCheckpointError`` naming the tensor, the
        expected digest and the found one. A lazy load checks the names
        when it returns, and each tensor when its storage is first read (a
        failed check keeps nothing, and fails again at the next read).
    weights_only: ``None`` or ``True``, as stowage always loads; ``False``
        is refused: stowage never runs the pickle (``inert=True`` gives the
        objects a full unpickle would build, as ``InertObject``s).

    Raises ``UnsafeGlobalError`` for a global outside the allowlist,
    ``CorruptCheckpointError`` for a damaged file, ``FileNotFoundError`` and
    ``OSError`` as Python's file functions do, ``StowageError`` otherwise.
    """
    if weights_only is False:
        raise ValueError(
            "weights_only=False: stowage never runs the pickle; inert=True loads the objects"
            " a full unpickle would build as InertObjects, never imported or called"
        )
    if isinstance(allow_globals, str):
        allow_globals = (allow_globals,)
    adapter: Any = adapter_for(framework)
    if callable(map_location) and not isinstance(map_location, dict):
        if framework != "torch" or lazy:
            raise ValueError(
                "map_location as a function takes torch storages as they are read: give"
                " framework='torch' and no lazy=True"
            )
        adapter = _Placed(adapter, map_location)
        map_location = None
    location = _map_location(map_location)
    if hasattr(src, "read"):
        if mmap or lazy or expect is not None:
            raise ValueError("mmap=True, lazy=True and expect= read from a path or URL, not a file object")
        data = src.read()  # type: ignore[union-attr]
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"the file object gave {type(data).__name__}, not bytes: open it in binary mode")
        with _collector_paused():
            return _stowage.load_bytes(
                bytes(data), adapter, inert=inert, allow_globals=list(allow_globals), map_location=location
            )
    if lazy:
        adapter = LazyAdapter(adapter)
    with _collector_paused():
        loaded = _stowage.load(
            os.fspath(src),  # type: ignore[arg-type]
            adapter,
            mmap=bool(mmap),
            lazy=lazy,
            inert=inert,
            allow_globals=list(allow_globals),
            map_location=location,
            huge_pages=huge_pages,
            # A lazy load checks the names now, and each storage's tensors
            # when the storage is first read (the library's check).
            expect=_manifest_text(expect),
        )
    if not lazy:
        return loaded
    return lazy_tree(loaded)


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off while a load builds its
    objects, and back as it was after. Every few hundred objects made start a
    collection, and each long one walks every object the process holds
    (torch's own included): a third of the time of a load of 20,000 small
    tensors. A load makes no cycles but those of the saved object, which
    the next collection finds."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _manifest_text(expect: Any) -> Optional[str]:
    """``expect`` as a manifest's JSON text: a dict as ``manifest()`` gives
    it, or the path of a manifest file."""
    if expect is None:
        return None
    if isinstance(expect, dict):
        return json.dumps(expect)
    with open(os.fspath(expect), encoding="utf-8") as f:
        return f.read()


def _map_location(map_location: Any) -> Optional[str]:
    """``map_location`` as torch.load takes it, as the one device every
    storage lands on (``None``: the CPU)."""
    if map_location is None:
        return None
    if isinstance(map_location, dict):
        targets = {str(v) for v in map_location.values()}
        if len(targets) > 1:
            raise ValueError(
                f"map_location {map_location!r} maps storages to several devices; stowage loads"
                " every storage to one ('cpu', or 'meta')"
            )
        return targets.pop() if targets else None
    return str(map_location)


class _Placed:
    """An adapter whose storages, once read into CPU memory, go through
    ``map_location(storage, location)`` with the location the file gives
    each (``"cuda:0"``), as ``torch.load`` calls a function
    ``map_location``: what it returns is the storage the tensors are built
    on; ``None`` restores it where it was saved, as ``torch.load`` does."""

    def __init__(self, inner: Any, place: Any) -> None:
        self._inner = inner
        self._place = place

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def placed(self, storage: Any, location: str) -> Any:
        out = self._place(storage, location)
        if out is None:
            import torch.serialization

            out = torch.serialization.default_restore_location(storage, location)
        return out


def safe_open(
    filename: Union[str, "os.PathLike[str]"],
    framework: str = "torch",
    device: Any = "cpu",
    *,
    inert: bool = False,
    allow_globals: Iterable[str] = (),
) -> SafeOpen:
    """Open a checkpoint lazily, as ``safetensors.safe_open`` does, for any
    format ``load`` reads, with its API: ``keys()`` (sorted),
    ``offset_keys()`` (in the order of the bytes in the file),
    ``get_tensor(name)`` (reading only that tensor's storage),
    ``get_tensors()``, ``get_slice(name)`` (``get_shape()``, ``get_dtype()`` by safetensors'
    names, ``[...]`` reading only what it selects) and ``metadata()``; the
    handle closes when the ``with`` block ends. ``framework`` takes
    safetensors' names (``"pt"``, ``"pytorch"``, ``"np"``, ``"flax"``, ``"mlx"``) and
    stowage's (``"torch"``, ``"numpy"``, ``"jax"``). ``device`` is
    ``"cpu"``: any other device is a ``ValueError`` until stowage has a
    device back end.

        with stowage.safe_open("pytorch_model.bin", framework="pt") as f:
            w = f.get_tensor("model.embed.weight")
    """
    return SafeOpen(filename, framework, device, inert=inert, allow_globals=allow_globals)


def save(
    obj: Any,
    dst: Union[str, "os.PathLike[str]", BinaryIO],
    *,
    sync: bool = True,
    to: Optional[str] = None,
    max_shard_size: Optional[str] = None,
) -> None:
    """Save ``obj`` as ``torch.save`` would, for ``torch.load(dst,
    weights_only=True)`` to read back identical, sharing included.

    ``obj`` holds ``torch.Tensor`` and ``numpy.ndarray`` leaves (saved as
    tensors) inside dicts, ``OrderedDict``s, lists and tuples, beside
    ``None``, bools, ints, floats, complex numbers, str, bytes, torch dtypes,
    ``torch.Size`` and ``torch.device`` values. Tensors on one storage (and
    arrays on one buffer) are written as one storage. A tensor's (or an
    ``nn.Parameter``'s) Python attributes are written as ``torch.save``
    writes them, in a torch checkpoint; a tensor subclass is refused
    (``TypeError``) rather than written as a plain tensor. The name tells the
    format, by the rule ``stowage convert`` follows: ``.safetensors``,
    safetensors (tensors only, named by path); ``.pt``, ``.pth``, ``.bin``,
    ``.ckpt``, ``.tar`` (``checkpoint.pth.tar``) and ``.pkl``, the torch zip
    format; ``model.safetensors.index.json`` or
    ``pytorch_model.bin.index.json``, a sharded set in that folder; any
    other name raises ``ValueError``. An ``OrderedDict``'s attributes (a
    state dict's ``_metadata``, which ``load_state_dict`` reads for each
    module's version) are written as ``torch.save`` writes them.

    ``to`` writes a folder instead (unless ``dst`` is a file named for that
    format: ``to="safetensors"`` with ``x.safetensors`` writes that file):
    ``"safetensors"`` or ``"bin"``, a
    Hugging Face sharded set (shards of at most ``max_shard_size``, ``"5GB"``
    by default, and its index; a nested checkpoint keeps its structure and
    values there, as in one safetensors file); ``"dcp"``, a distributed
    checkpoint that ``torch.distributed.checkpoint.load`` reads.

    ``dst`` may also be a file object (``io.BytesIO``, a file open for
    writing), as for ``torch.save``: the torch zip format is written into it.

    The file is written crash-safely: a temporary renamed over ``dst``
    (fsynced first unless ``sync=False``), so ``dst`` is either the old file
    or the whole new one; a folder's set is replaced as a whole, the folder's
    other files kept. A value it cannot write raises ``TypeError`` naming its
    path and type, before anything is written.
    """
    from ._save import Encoder

    if hasattr(dst, "write"):
        # A file object: the torch zip format, as torch.save writes into one.
        if to is not None or max_shard_size is not None:
            raise ValueError("to= and max_shard_size= write folders: give a path, not a file object")
        dst.write(_stowage.save_bytes(obj, Encoder()))  # type: ignore[union-attr]
        return
    _stowage.save(obj, os.fspath(dst), Encoder(), sync=sync, to=to, max_shard_size=max_shard_size)  # type: ignore[arg-type]


def scan(*paths: Union[str, "os.PathLike[str]"], format: str = "json") -> Dict[str, Any]:
    """Read every pickle in each file (folders recursively) without loading
    anything, and name each global with its verdict: exactly the JSON of
    ``stowage scan --json``, as a dict (``docs/cli-contract.md``)::

        {"files": [{"path", "kind", "globals": [{"module", "name", "verdict",
        "risk", "count"}], "pickles": [...], "error"}]}

    A verdict is ``"allowed"`` (PyTorch's weights_only allowlist),
    ``"decoded"`` (data stowage reads when allowed) or ``"unsafe"``; an
    unsafe global's ``risk`` is ``"code"`` (it runs commands or code) or
    ``"import"`` (a class torch.load would import, as a whole-model save
    names them). Every pickle is read wherever it lies (any zip member, zips
    inside zips, a .npy object array), judged by content. A file it cannot
    read has its ``error`` set rather than raising.

    ``format="sarif"`` gives the SARIF 2.1.0 log of ``stowage scan --format
    sarif`` instead: one result per unsafe global, located by file, zip
    member and byte offset, for GitHub code scanning and other viewers.
    """
    return _stowage.scan(*(os.fspath(p) for p in paths), format=format)


def inspect(
    src: Union[str, "os.PathLike[str]"],
    *,
    hashes: bool = True,
    inert: bool = False,
) -> Dict[str, Any]:
    """What a checkpoint holds: exactly the JSON of ``stowage inspect
    --json``, as a dict (``docs/cli-contract.md``)::

        {"format", "byteorder", "storages": [{"key", "nbytes", "location",
        "storage_type"}], "tensors": [{"path", "dtype", "shape", "stride",
        "storage_offset", "storage_key", "storage_nbytes", "requires_grad",
        "parameter", "sha256"}], "values": [{"path", "type", "value"}]}

    ``hashes=False`` reads only the pickle and the archive's directory (no
    tensor bytes; every ``sha256`` is None). ``inert=True`` reads a file that
    names globals outside PyTorch's allowlist without importing them, and
    lists them under ``"objects"``.
    """
    return _stowage.inspect(os.fspath(src), hashes=hashes, inert=inert)


def manifest(
    src: Any,
    *,
    inert: bool = False,
    oms: bool = False,
    name: Optional[str] = None,
) -> Dict[str, Any]:
    """A checkpoint's content manifest: exactly the JSON of ``stowage
    manifest``, as a dict (``docs/manifest.md``)::

        {"format": "stowage-manifest/1", "root_sha256", "tensors": [{"dtype",
        "name", "shape", "sha256"}], "values_sha256"}

    The same checkpoint has the same manifest in every form stowage reads
    (``.pt``, safetensors, a sharded set, a DCP at any world size, by URL):
    each tensor's ``sha256`` is that of its logical elements, row-major and
    little-endian, whatever its container.

    ``src`` is a path or URL, or an object in memory (what ``save`` takes: a
    state dict of ``torch.Tensor`` or ``numpy.ndarray`` leaves, nested in
    dicts and lists): its manifest is that of the file ``stowage.save``
    would write, which is ``torch.save``'s but for numpy arrays (tensors
    there), the tensors hashed where they lie on every core, without the
    GIL. Taken before an asynchronous save and
    compared with ``manifest(path)`` once it is done, it tells whether the
    save wrote the bytes it was given. ``inert`` is for files only.

    ``oms=True`` gives it as an in-toto statement in OpenSSF Model Signing's
    v1.0 layout (``stowage manifest --oms``), one resource per tensor, its
    subject ``name`` (default: the file or folder name; ``"model"`` for an
    object), for a DSSE signer to sign as it is.
    """
    if not oms and name is not None:
        raise ValueError("name= names the model in an OMS statement: give oms=True")
    if not isinstance(src, (str, os.PathLike)):
        from ._save import Encoder

        if inert:
            raise ValueError("inert= is how a file's objects are read: an object in memory has none to read")
        torch = sys.modules.get("torch")
        if torch is not None and isinstance(src, torch.nn.Module):
            raise TypeError(f"a {type(src).__name__} module: give its state_dict(), whose manifest is that of the file saving it writes")
        oms_name = (name or "model") if oms else None
        return _stowage.manifest_of(src, Encoder(), oms_name=oms_name)
    path = os.fspath(src)
    if not oms:
        return _stowage.manifest(path, inert=inert)
    if name is None:
        name = os.path.basename(path.rstrip("/")) or "model"
    return _stowage.manifest(path, inert=inert, oms_name=name)


def diff(
    a: Union[str, "os.PathLike[str]"],
    b: Union[str, "os.PathLike[str]"],
    *,
    atol: float = 0.0,
    rtol: float = 0.0,
    content: bool = False,
) -> Dict[str, Any]:
    """Compares two checkpoints tensor by tensor (presence, dtype, shape,
    values, storage sharing) and value by value: exactly the JSON of
    ``stowage diff --json``, as a dict, ``{"same": bool, "differences":
    [...]}``. Elements are compared bit for bit unless ``atol`` or ``rtol``
    is given; then floating and complex elements match as in
    ``torch.allclose``.

    ``content=True`` compares by content instead, whatever the names and
    formats (``stowage diff --content --json``): ``{"identical", "changed",
    "moved", "only_in_a", "only_in_b", "a_bytes", "b_bytes",
    "shared_bytes"}``, the last the bytes of B's content A holds too.
    """
    if content:
        if atol or rtol:
            raise ValueError("content=True compares digests: no tolerance applies")
        return _stowage.diff_content(os.fspath(a), os.fspath(b))
    return _stowage.diff(os.fspath(a), os.fspath(b), atol=float(atol), rtol=float(rtol))


def convert(
    src: Union[str, "os.PathLike[str]"],
    dst: Union[str, "os.PathLike[str]"],
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
    manifest: Union[str, "os.PathLike[str]", None] = None,
) -> str:
    """``stowage convert``: rewrites ``src`` as ``dst``, whose extension names
    the format (``.pt``, ``.pth``, ``.bin``, ``.ckpt``: torch zip;
    ``.safetensors``), keeping sharing; or, with ``to="safetensors"``,
    ``"bin"`` or ``"dcp"``, as a folder (a Hugging Face sharded set of at
    most ``max_shard_size`` per shard, ``"5GB"`` by default, or a distributed
    checkpoint). The same options, and the same results, as the command;
    returns what it prints (what was written, and the values stored,
    dropped or tied).

    ``ranks`` (with ``to="dcp"``): the ranks' files of the distributed
    checkpoint, each tensor split over them along its first dimension (1
    by default, or ``world``'s).

    ``select`` keeps only the value at a dotted path (``"model"``,
    ``"state_dict"``), named relative to it: a training checkpoint's
    weights. ``state_dict=True`` writes what ``model.state_dict()`` gives
    for a module saved whole (``torch.save(model)``), read inertly: its
    parameters and persistent buffers under PyTorch's names.

    ``rank`` and ``world`` (a sharded set or a distributed checkpoint) write
    this process's part of the output, as one of ``world`` processes
    converting ``src`` into ``dst`` at once; the last to finish writes the
    index (or DCP's ``.metadata``), and the result is what one process
    writes (``docs/distributed.md``).

    ``manifest`` (a path) also writes the output's content manifest there,
    as ``stowage.manifest(dst)`` gives it (``convert --manifest``), each
    tensor hashed from its bytes as they are written rather than read back.
    """
    return _stowage.convert(
        os.fspath(src),
        os.fspath(dst),
        to=to,
        max_shard_size=max_shard_size,
        ranks=ranks,
        inert=inert,
        drop_values=drop_values,
        drop_objects=drop_objects,
        select=select,
        state_dict=state_dict,
        rank=rank,
        world=world,
        manifest=None if manifest is None else os.fspath(manifest),
    )
