"""Loads by URL from a local S3 server (moto, as the Rust tests use), with
range requests: stowage.load and safe_open of an s3:// object."""

import os
import socket

import pytest
import torch

import stowage
from _compare import assert_same

moto_server = pytest.importorskip("moto.server", reason="moto is not installed (.ci/run installs it)")
boto3 = pytest.importorskip("boto3")


@pytest.fixture(scope="module")
def s3(fixtures):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    env = {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ALLOW_HTTP": "true",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": "us-east-1",
        "STOWAGE_REMOTE_RETRIES": "0",
        "STOWAGE_REMOTE_TIMEOUT": "10",
    }
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    client = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="testing",
                          aws_secret_access_key="testing", region_name="us-east-1")
    client.create_bucket(Bucket="stowage-py")
    for name in ("training_checkpoint.pt", "views.pt"):
        client.upload_file(str(fixtures / name), "stowage-py", name)
    try:
        yield "s3://stowage-py"
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        server.stop()


@pytest.mark.parametrize("name", ["training_checkpoint.pt", "views.pt"])
def test_a_url_loads_as_the_file_does(s3, fixtures, name):
    expected = torch.load(fixtures / name, weights_only=True)
    assert_same(stowage.load(f"{s3}/{name}"), expected)


def test_safe_open_by_url_reads_one_tensor(s3, fixtures):
    expected = torch.load(fixtures / "training_checkpoint.pt", weights_only=True)
    with stowage.safe_open(f"{s3}/training_checkpoint.pt") as f:
        assert torch.equal(f.get_tensor("model.weight"), expected["model"]["weight"])
        # A slice by range requests: the rows it covers.
        w = expected["model"]["weight"]
        assert torch.equal(f.get_slice("model.weight")[1:3], w[1:3])
        assert torch.equal(f.get_slice("model.weight")[-1, ::2], w[-1, ::2])


def test_each_call_reports_its_own_transfer(s3, fixtures):
    """stowage.inspect by URL twice in one process: each result's
    "transfer" counts that call's requests and bytes alone, the same both
    times, not the process's running total (issue 39, item 5)."""
    url = f"{s3}/training_checkpoint.pt"
    first = stowage.inspect(url)["transfer"]
    second = stowage.inspect(url)["transfer"]
    assert first["requests"] > 0 and first["bytes_received"] > 0, first
    assert second == first, (first, second)
    # A local file after them transferred nothing, and has no "transfer".
    assert "transfer" not in stowage.inspect(fixtures / "training_checkpoint.pt")


def test_a_missing_object_is_an_error(s3):
    with pytest.raises(FileNotFoundError) as info:
        stowage.load(f"{s3}/absent.pt")
    assert "absent.pt" in str(info.value)


def test_a_lazy_load_by_url_reads_on_use(s3, fixtures):
    expected = torch.load(fixtures / "views.pt", weights_only=True)
    got = stowage.load(f"{s3}/views.pt", lazy=True)
    from test_lazy import loaded, unread

    assert unread(got), "a lazy load by URL read tensors"
    assert_same(loaded(got), expected)


def test_dcp_reads_and_writes_by_url(s3, fixtures):
    import torch.distributed.checkpoint as dcp

    from stowage.dcp import StorageReader, StorageWriter

    state = {"w": torch.arange(12.0).view(3, 4), "step": 9}
    dcp.save(state, storage_writer=StorageWriter(f"{s3}/dcp-ok"), no_dist=True)
    back = {"w": torch.zeros(3, 4), "step": 0}
    dcp.load(back, storage_reader=StorageReader(f"{s3}/dcp-ok/"), no_dist=True)
    assert torch.equal(back["w"], state["w"]) and back["step"] == 9
    # A file read by URL through the reader, as a DCP source.
    expected = torch.load(fixtures / "views.pt", weights_only=True)
    views = {k: torch.zeros(v.shape, dtype=v.dtype) for k, v in expected.items() if isinstance(v, torch.Tensor)}
    assert views
    dcp.load(views, storage_reader=StorageReader(f"{s3}/views.pt"), no_dist=True)
    for k, v in views.items():
        assert torch.equal(v, expected[k]), k


def test_an_interrupted_dcp_write_by_url_leaves_nothing(s3):
    import boto3
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.api import CheckpointException

    from stowage.dcp import StorageWriter

    state = {"a": torch.ones(1 << 16), "b": torch.empty(4, device="meta")}
    with pytest.raises(CheckpointException, match="a tensor on meta"):
        dcp.save(state, storage_writer=StorageWriter(f"{s3}/dcp-bad"), no_dist=True)
    client = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"])
    listed = client.list_objects_v2(Bucket="stowage-py", Prefix="dcp-bad/")
    assert listed.get("KeyCount", 0) == 0, listed.get("Contents")
    uploads = client.list_multipart_uploads(Bucket="stowage-py", Prefix="dcp-bad/")
    assert not uploads.get("Uploads"), uploads["Uploads"]


def test_threads_reading_one_storage_by_url_wait_without_the_gil(s3, fixtures):
    # Tensors of views.pt share one storage: one thread reads it while the
    # others wait for it. Waiting with the GIL held would starve this
    # process's own S3 server (moto, in a thread) until the read timed out.
    import threading
    import time

    expected = torch.load(fixtures / "views.pt", weights_only=True)
    f = stowage.safe_open(f"{s3}/views.pt")
    names = [n for n in f.keys()]
    got, errors = {}, []

    def work(name):
        try:
            got[name] = f.get_tensor(name)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(names[i % len(names)],)) for i in range(8)]
    start = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert time.monotonic() - start < 5
    for name, t in got.items():
        assert torch.equal(t, expected[name]), name


def test_dcp_by_url_under_torchrun(s3, tmp_path):
    """Every rank of a torchrun job writes its file to the store, and a job
    of another size reads them back by URL, resharded."""
    from test_dcp import state_dict, torchrun

    reference = tmp_path / "reference.pt"
    torch.save(state_dict(), reference)
    url = f"{s3}/dcp-ranks"
    torchrun(2, "save", "stowage", url, reference, 0)
    torchrun(3, "load", "stowage", url, reference, 1)


def test_a_corrupt_dcp_metadata_by_url_is_reported_as_such(s3):
    """A URL whose .metadata is there but damaged is a DCP folder with a
    defect, not some other kind of source."""
    from stowage.dcp import StorageReader

    client = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"])
    client.put_object(Bucket="stowage-py", Key="dcp-corrupt/.metadata", Body=b"\x80\x04not a pickle")
    with pytest.raises(stowage.CorruptCheckpointError, match=r"\.metadata"):
        StorageReader(f"{s3}/dcp-corrupt").read_metadata()


@pytest.mark.parametrize("form", ["bin", "safetensors", "sharded"])
def test_files_and_sets_by_url_load_into_a_sharded_model(s3, tmp_path, form):
    """A .bin, a .safetensors file and a sharded set, read by URL through
    the reader into a 2-rank sharded model under torchrun."""
    from test_dcp import state_dict, torchrun

    sd = state_dict()
    reference = tmp_path / "reference.pt"
    torch.save(sd, reference)
    client = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"])
    if form == "bin":
        torch.save(sd, tmp_path / "pytorch_model.bin")
        client.upload_file(str(tmp_path / "pytorch_model.bin"), "stowage-py", "forms/pytorch_model.bin")
        url = f"{s3}/forms/pytorch_model.bin"
    elif form == "safetensors":
        stowage.save(sd, tmp_path / "model.safetensors")
        client.upload_file(str(tmp_path / "model.safetensors"), "stowage-py", "forms/model.safetensors")
        url = f"{s3}/forms/model.safetensors"
    else:
        stowage.save(sd, tmp_path / "set", to="safetensors", max_shard_size="300B")
        for f in (tmp_path / "set").iterdir():
            client.upload_file(str(f), "stowage-py", f"forms/set/{f.name}")
        url = f"{s3}/forms/set/"
    torchrun(2, "load", "stowage", url, reference, 0)


def test_a_manifest_by_url_is_the_files(s3, fixtures):
    assert stowage.manifest(f"{s3}/views.pt") == stowage.manifest(fixtures / "views.pt")
