"""stowage as ``torch.distributed.checkpoint``'s storage layer.

``StorageReader(path)`` serves any checkpoint stowage reads to
``torch.distributed.checkpoint.load``: a distributed checkpoint folder, a
``.pt``/``.bin``/``.ckpt`` file, a ``.safetensors`` file or a Hugging Face
sharded set, on disk or by URL. DCP's planner decides which rank needs which
part of which tensor; the reader reads only those bytes::

    import torch.distributed.checkpoint as dcp
    from stowage.dcp import StorageReader

    state = model.state_dict()           # sharded as this job shards it
    dcp.load(state, storage_reader=StorageReader("pytorch_model.bin"))

For a source that is not a distributed checkpoint, the reader makes DCP's
``Metadata`` from the file: one chunk per tensor, named by its path joined
with ``.`` (as ``model.state_dict()`` names it), and one bytes item per
other value. Those values are read by stowage, with PyTorch's allowlist (or
``inert``/``allow_globals``), before DCP's planner sees them: the planner
``torch.load``s bytes items, so what it gets is stowage's re-encoding of
values already read safely, never the file's own pickle.

``StorageWriter(path)`` is ``torch.distributed.checkpoint.save``'s way out
through stowage, taking ``FileSystemWriter``'s arguments: each rank writes
its own data files (``__{rank}_{save}_{i}.distcp``, named by the save so
that an earlier checkpoint's stay whole until this one's ``.metadata``
replaces it; ``thread_count`` of them at once, each tensor chunk as ``torch.save`` saves
it, zstd-compressed if asked, as ``FileSystemWriter`` lays it out), each
whole or not at all, to a folder or an object-store prefix
(multipart uploads); the coordinator writes ``.metadata`` last, once every
rank's file is complete, so a failed save never leaves a ``.metadata`` that
names missing data. PyTorch's ``FileSystemReader`` reads the result, at any
world size.

Importing this module imports torch; ``import stowage`` does not.
"""

from __future__ import annotations

import dataclasses
import io
import os
import pickle
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

import torch
from torch.distributed.checkpoint import StorageReader as _StorageReader
from torch.distributed.checkpoint import StorageWriter as _StorageWriter
from torch.distributed.checkpoint.filesystem import CURRENT_DCP_VERSION, _StorageInfo, _StoragePrefix
from torch.distributed.checkpoint.metadata import (
    BytesStorageMetadata,
    ChunkStorageMetadata,
    Metadata,
    TensorProperties,
    TensorStorageMetadata,
)
from torch.distributed.checkpoint.planner import (
    LoadItemType,
    LoadPlan,
    LoadPlanner,
    ReadItem,
    SavePlan,
    SavePlanner,
    WriteItemType,
)
from torch.distributed.checkpoint.storage import WriteResult
from torch.futures import Future

from . import _stowage
from ._safe_open import _TENSOR, SafeOpen, _ValuesAdapter
from ._stowage import StowageError

__all__ = ["StorageReader", "StorageWriter"]

_METADATA = ".metadata"


def _join(folder: str, name: str) -> str:
    return _stowage.Location(folder).join(name)


def _region(req: ReadItem) -> Tuple[List[int], List[int]]:
    """Where ``req``'s part starts in the saved tensor, and its extent: the
    plan's offsets are within the chunk it names."""
    offsets, lengths = list(req.storage_offsets), list(req.lengths)
    chunk = list(req.storage_index.offset or [0] * len(offsets))
    return [c + o for c, o in zip(chunk, offsets)], lengths


def _tensor_entry(
    dtype: str,
    shape: Sequence[int],
    chunks: Sequence[Tuple[Sequence[int], Sequence[int]]],
    sizes: Optional[Dict[Tuple[int, ...], torch.Size]] = None,
) -> TensorStorageMetadata:
    """DCP's entry for a tensor of ``dtype`` (torch's name) and ``shape``,
    stored as ``chunks`` (``(offsets, sizes)`` each). ``sizes`` keeps one
    ``torch.Size`` per extent for every chunk that has it (a rank's shards
    mostly share theirs): a ``Size`` is immutable, so sharing it is safe."""
    sizes = {} if sizes is None else sizes

    def size(n: Sequence[int]) -> torch.Size:
        key = tuple(n)
        found = sizes.get(key)
        if found is None:
            found = sizes[key] = torch.Size(key)
        return found

    return TensorStorageMetadata(
        properties=TensorProperties(dtype=getattr(torch, dtype)),
        size=torch.Size(shape),
        chunks=[ChunkStorageMetadata(offsets=torch.Size(o), sizes=size(n)) for o, n in chunks],
    )


def _flat_values(tree: Any) -> Iterator[Tuple[str, Any]]:
    """The non-tensor leaves of ``tree`` (a loaded object whose tensors are
    ``_TENSOR`` markers) under the names PyTorch's ``flatten_state_dict``
    gives them: the walk of ``torch.distributed.checkpoint._traverse.
    traverse_state_dict``, keys joined with ``.``. A mapping is always
    walked into; a list only when it holds a tensor, a mapping, or a list
    that is walked into; anything else is a leaf."""

    def terminal(value: Any) -> bool:
        if isinstance(value, dict):
            return False
        if not isinstance(value, list):
            return True
        for entry in value:
            if isinstance(entry, (dict, list)) and not terminal(entry):
                return False
            if entry is _TENSOR:
                return False
        return True

    def walk(path: Tuple[Any, ...], value: Any) -> Iterator[Tuple[str, Any]]:
        if isinstance(value, dict):
            for k, v in value.items():
                yield from walk(path + (str(k),), v)
        elif terminal(value):
            if value is not _TENSOR:
                yield ".".join(map(str, path)), value
        elif isinstance(value, (list, tuple)):
            for i, v in enumerate(value):
                yield from walk(path + (i,), v)

    if isinstance(tree, dict):
        for key, value in tree.items():
            yield from walk((str(key),), value)


def _at(tree: Any, path: List[Any]) -> Any:
    """The value at ``path`` (dict keys and list indices) in ``tree``."""
    for key in path:
        tree = tree[key]
    return tree


class StorageReader(_StorageReader):
    """A ``torch.distributed.checkpoint.StorageReader`` over stowage.

    path: a path or URL of anything ``stowage.load`` reads (named as
        ``FileSystemReader`` names it).
    concurrency: how many tensor reads each rank has in flight (threads; the
        reads release the GIL).
    inert, allow_globals: as for ``stowage.load``, for a file whose values
        name classes outside PyTorch's allowlist.
    """

    def __init__(
        self,
        path: Union[str, "os.PathLike[str]"],
        *,
        concurrency: int = 8,
        inert: bool = False,
        allow_globals: Iterable[str] = (),
    ) -> None:
        super().__init__()
        if concurrency < 1:
            raise ValueError(f"concurrency {concurrency}: at least 1")
        self.src = os.fspath(path)
        self.concurrency = concurrency
        self._inert = inert
        self._allow_globals = tuple(allow_globals)
        self._opened: Optional[SafeOpen] = None
        self._values: Optional[Dict[str, Any]] = None
        self._dcp: Any = None  # a DCP folder's chunks, when src is one

    def _dcp_source(self) -> Any:
        """``src`` as a DCP folder (its chunks as saved), or None when it is
        not one."""
        if self._dcp is None:
            self._dcp = False
            remote = _stowage.Location(self.src).is_remote
            if remote or os.path.isfile(os.path.join(self.src, _METADATA)):
                from ._torch import Adapter

                try:
                    self._dcp = _stowage.DcpSource(self.src, Adapter())
                except FileNotFoundError:
                    if not remote:
                        raise
                    # No `.metadata` under the URL: a file, or a sharded set.
                    # Any other failure (a corrupt `.metadata`, a refused
                    # request) is the folder's, and is raised as it is.
        return self._dcp or None

    def _open(self) -> SafeOpen:
        if self._opened is None:
            src = self.src
            if self._dcp_source() is not None:
                # A DCP folder's URL, which DCP gives without the trailing
                # `/` that names a folder to stowage.load.
                src = _stowage.Location(src).folder()
            self._opened = SafeOpen(src, "torch", inert=self._inert, allow_globals=self._allow_globals)
        return self._opened

    def _value_table(self) -> Dict[str, Any]:
        """Every value by its DCP name: a DCP folder's as its ``.metadata``
        names them; anything else's as PyTorch's ``flatten_state_dict``
        names what it holds."""
        if self._values is None:
            opened = self._open()
            source = self._dcp_source()
            if opened.format == "safetensors" and source is None:
                # A safetensors file's metadata is its header's strings, not values.
                self._values = {}
            elif source is not None:
                tree = opened._handle().root(_ValuesAdapter())
                self._values = {name: _at(tree, path) for name, path in source.values()}
            else:
                self._values = dict(_flat_values(opened._handle().root(_ValuesAdapter())))
        return self._values

    def reset(self, checkpoint_id: Union[str, "os.PathLike[str]", None] = None) -> None:
        if checkpoint_id is not None:
            self.src = os.fspath(checkpoint_id)
        self._opened = None
        self._values = None
        self._dcp = None

    def read_metadata(self, *args: Any, **kwargs: Any) -> Metadata:
        entries: Dict[str, Any] = {}
        source = self._dcp_source()
        if source is not None:
            # A DCP folder: its chunks as saved, each read by itself, and
            # its values' names as `.metadata` gives them (their values are
            # read when asked for, not here).
            sizes: Dict[Tuple[int, ...], torch.Size] = {}
            for name, dtype, shape, chunks in source.tensors():
                entries[name] = _tensor_entry(dtype, shape, chunks, sizes)
            value_names: Iterable[str] = (name for name, _ in source.values())
        else:
            # Anything else: one chunk per tensor, the whole of it.
            opened = self._open()
            for name in opened.keys():
                dtype, shape = opened._handle().tensor_info(name)
                entries[name] = _tensor_entry(dtype, shape, [([0] * len(shape), shape)])
            value_names = self._value_table()
        for name in value_names:
            entries.setdefault(name, BytesStorageMetadata())
        return Metadata(state_dict_metadata=entries)

    def set_up_storage_reader(self, metadata: Metadata, is_coordinator: bool, *args: Any, **kwargs: Any) -> None:
        if self._dcp_source() is None:
            self._open()

    def prepare_local_plan(self, plan: LoadPlan) -> LoadPlan:
        return plan

    def prepare_global_plan(self, plans: List[LoadPlan]) -> List[LoadPlan]:
        return plans

    def _read(self, req: ReadItem) -> torch.Tensor:
        """The part of the tensor ``req`` asks for, reading only its bytes
        where the layout allows."""
        name = req.storage_index.fqn
        at, lengths = _region(req)
        source = self._dcp_source()
        if source is not None:
            region: torch.Tensor = source.read_region(name, at, lengths)
            return region
        opened = self._open()
        if lengths:
            part = opened._handle().read_slice(name, [(o, n, 1) for o, n in zip(at, lengths)])
            if part is not None:
                return part
        whole = opened.get_tensor(name)
        for dim, (o, n) in enumerate(zip(at, lengths)):
            whole = whole.narrow(dim, o, n)
        return whole

    def _fill(self, req: ReadItem, target: torch.Tensor) -> Optional[torch.Tensor]:
        """Reads ``req``'s part straight into ``target`` where it can (a
        contiguous CPU tensor of the part's shape: a DCP folder's region, or
        a file's slice by runs): None. Otherwise the part, for the caller to
        copy."""
        at, lengths = _region(req)
        direct = (
            target.device.type == "cpu"
            and target.is_contiguous()
            and list(target.size()) == lengths
            and target.numel() > 0
        )
        if direct:
            name = req.storage_index.fqn
            into = target.reshape(-1).view(torch.uint8).numpy()
            source = self._dcp_source()
            if source is not None:
                source.read_region_into(name, at, lengths, into)
                return None
            if lengths and self._open()._handle().read_slice_into(name, [(o, n, 1) for o, n in zip(at, lengths)], into):
                return None
        return self._read(req)

    def read_data(self, plan: LoadPlan, planner: LoadPlanner) -> Future[None]:
        tensors = []
        for req in plan.items:
            if req.type == LoadItemType.BYTE_IO:
                name = req.storage_index.fqn
                values = self._value_table()
                if name not in values:
                    raise StowageError(f"{self.src}: no value {name!r} (the plan asks for one)")
                buffer = io.BytesIO()
                torch.save(values[name], buffer)
                buffer.seek(0)
                planner.load_bytes(req, buffer)
            else:
                tensors.append(req)
        # The planner's targets first (here, on this thread), then the reads,
        # `concurrency` at a time, then the commits, in plan order.
        targets = [planner.resolve_tensor(req).detach() for req in tensors]
        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            parts = pool.map(self._fill, tensors, targets)
            for req, target, part in zip(tensors, targets, parts):
                if part is not None:
                    if target.size() != part.size():
                        raise StowageError(
                            f"{self.src}: {req.storage_index.fqn}: the plan's target has shape "
                            f"{tuple(target.size())}, the read part {tuple(part.size())}"
                        )
                    target.copy_(part)
                planner.commit_tensor(req, target)
        done: Future[None] = Future()
        done.set_result(None)
        return done

    @classmethod
    def validate_checkpoint_id(cls, checkpoint_id: Union[str, "os.PathLike[str]"]) -> bool:
        src = os.fspath(checkpoint_id)
        return _stowage.Location(src).is_remote or os.path.exists(src)


def _local_only(dst: str) -> None:
    """``overwrite=False`` is checked in a local folder only."""
    if _stowage.Location(dst).is_remote:
        raise ValueError(
            f"overwrite=False for {dst}: the check is made in a local folder only"
            " (an object store's prefix is not looked up)"
        )


class StorageWriter(_StorageWriter):
    """A ``torch.distributed.checkpoint.StorageWriter`` over stowage.

    path: a folder, or an object-store prefix (``s3://bucket/ckpt``).
    zstd: compress each item as one zstd frame (``stream.zstd/1``, as
        ``FileSystemWriter(_extensions=[ZStandard()])`` does; PyTorch's
        reader needs ``zstandard`` or ``pyzstd`` to read it).
    thread_count: how many files each rank writes at once, the items split
        over them by size as ``FileSystemWriter`` splits them.
    sync_files: fsync each file before it is renamed into place (local
        folders).
    overwrite: False raises ``RuntimeError`` when ``path`` (a local
        folder) holds a checkpoint already, as ``FileSystemWriter`` does.

    ``FileSystemWriter``'s other arguments are taken as it takes them where
    they change nothing here: ``single_file_per_rank=True`` (one file per
    rank and thread is all this writer writes; ``False`` is a
    ``ValueError``), ``per_thread_copy_ahead`` and
    ``cache_staged_state_dict`` (no effect: items are encoded from where
    they lie, nothing is staged) and ``serialization_format`` (the torch
    format only).

    A save over an earlier checkpoint never mixes the two: each save's files
    are named by its id (``__{rank}_{save}_{i}.distcp``), so the earlier
    ``.metadata`` names only the earlier save's files until the new
    ``.metadata`` replaces it, whole, after every rank has written. A save
    that fails midway leaves the earlier checkpoint as it was; one that
    succeeds then removes the data files its ``.metadata`` does not name
    (in a local folder; in an object store they stay, never read).
    """

    def __init__(
        self,
        path: Union[str, "os.PathLike[str]"],
        single_file_per_rank: bool = True,
        sync_files: bool = True,
        thread_count: int = 1,
        per_thread_copy_ahead: int = 10_000_000,
        cache_staged_state_dict: bool = False,
        overwrite: bool = True,
        *,
        zstd: bool = False,
        serialization_format: Any = None,
    ) -> None:
        super().__init__()
        if thread_count < 1:
            raise ValueError(f"thread_count {thread_count}: at least 1")
        if not single_file_per_rank:
            raise ValueError(
                "single_file_per_rank=False: stowage's writer writes each rank's items into"
                " thread_count files, never a file per item"
            )
        if serialization_format is not None and str(getattr(serialization_format, "value", serialization_format)) != "torch_save":
            raise ValueError(f"serialization_format {serialization_format}: stowage's writer writes torch_save only")
        self.dst = os.fspath(path)
        if not overwrite:
            _local_only(self.dst)
        self.zstd = zstd
        self.thread_count = thread_count
        self.sync = sync_files
        self.overwrite = overwrite
        self.save_id = uuid.uuid4().hex
        self.is_coordinator = False

    def reset(self, checkpoint_id: Union[str, "os.PathLike[str]", None] = None) -> None:
        if checkpoint_id is not None:
            self.dst = os.fspath(checkpoint_id)
        self.save_id = uuid.uuid4().hex

    def set_up_storage_writer(self, is_coordinator: bool, *args: Any, **kwargs: Any) -> None:
        self.is_coordinator = is_coordinator
        if not _stowage.Location(self.dst).is_remote:
            os.makedirs(self.dst, exist_ok=True)

    def prepare_local_plan(self, plan: SavePlan) -> SavePlan:
        # Where FileSystemWriter checks it, so that it raises as that does.
        if not self.overwrite:
            _local_only(self.dst)  # `reset` may have named an object store
            if os.path.exists(os.path.join(self.dst, _METADATA)):
                raise RuntimeError(f"{self.dst}: a checkpoint is there already and overwrite=False")
        return plan

    def prepare_global_plan(self, plans: List[SavePlan]) -> List[SavePlan]:
        # This save's own names: none is a name an earlier save's .metadata
        # may hold, so no file it names is rewritten while it is in place.
        save = self.save_id[:12]
        return [dataclasses.replace(p, storage_data=_StoragePrefix(f"__{i}_{save}_")) for i, p in enumerate(plans)]

    def _data(self, item: Any, planner: SavePlanner) -> Any:
        """What ``item`` stores: its bytes, or a compact CPU tensor."""
        value = planner.resolve_data(item)
        if item.type == WriteItemType.BYTE_IO:
            assert isinstance(value, io.BytesIO), type(value)
            return value.getvalue()
        assert isinstance(value, torch.Tensor), type(value)
        t = value.detach()
        if t.device.type not in ("cpu", "meta"):  # meta: refused by the writer, naming the item
            t = t.cpu()
        # torch.save writes a view's whole storage: a compact copy, as
        # FileSystemWriter's items hold exactly the chunk.
        if not t.is_contiguous() or t.untyped_storage().nbytes() != t.numel() * t.element_size():
            t = t.clone(memory_format=torch.contiguous_format)
        return t

    def write_data(self, plan: SavePlan, planner: SavePlanner) -> Future[List[WriteResult]]:
        from ._save import Encoder

        # The items encoded with the GIL; then the library splits them over
        # `thread_count` files as FileSystemWriter does and writes the files
        # at once without it, each whole or absent (`dcp::write_rank`).
        data = [self._data(item, planner) for item in plan.items]
        spans = _stowage.write_rank(
            self.dst,
            plan.storage_data.prefix,
            data,
            Encoder,
            files=self.thread_count,
            sync=self.sync,
            zstd=self.zstd,
        )
        results = [
            WriteResult(
                index=item.index,
                size_in_bytes=length,
                storage_data=_StorageInfo(
                    relative_path=name,
                    offset=offset,
                    length=length,
                    transform_descriptors=transforms or None,
                ),
            )
            for item, (name, offset, length, transforms) in zip(plan.items, spans)
        ]
        done: Future[List[WriteResult]] = Future()
        done.set_result(results)
        return done

    def finish(self, metadata: Metadata, results: List[List[WriteResult]]) -> None:
        # Called on the coordinator after every rank's write_data returned:
        # every file .metadata names is complete.
        storage = {}
        for per_rank in results:
            storage.update({r.index: r.storage_data for r in per_rank})
        metadata.version = CURRENT_DCP_VERSION
        metadata.storage_data = storage
        metadata.storage_meta = self.storage_meta()
        _stowage.write_items(
            _join(self.dst, _METADATA), [pickle.dumps(metadata)], None, sync=self.sync
        )
        self._remove_unnamed({info.relative_path for info in storage.values()})

    def _remove_unnamed(self, named: set) -> None:
        """Removes the data files of earlier saves, which the ``.metadata``
        just written does not name (a local folder's; in an object store
        they stay, never read)."""
        if _stowage.Location(self.dst).is_remote:
            return
        for entry in os.scandir(self.dst):
            if entry.name.startswith("__") and entry.name.endswith(".distcp") and entry.name not in named:
                os.remove(entry.path)

    def storage_meta(self) -> Any:
        from torch.distributed.checkpoint.metadata import StorageMeta

        return StorageMeta(checkpoint_id=self.dst, save_id=self.save_id)

    @classmethod
    def validate_checkpoint_id(cls, checkpoint_id: Union[str, "os.PathLike[str]"]) -> bool:
        return True
