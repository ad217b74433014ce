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


def test_a_missing_object_is_an_error(s3):
    with pytest.raises(FileNotFoundError) as info:
        stowage.load(f"{s3}/absent.pt")
    assert "absent.pt" in str(info.value)


def test_a_lazy_load_by_url_reads_on_use(s3, fixtures):
    expected = torch.load(fixtures / "views.pt", weights_only=True)
    got = stowage.load(f"{s3}/views.pt", lazy=True)
    from test_lazy import lazies, loaded

    assert lazies(got) and not any(t.is_loaded for t in lazies(got))
    assert_same(loaded(got), expected)
