//! Checkpoints in object storage (the `remote` feature), against servers the
//! tests start on 127.0.0.1 (`servers`): moto's S3 server and an HTTP server
//! with `Range` support. Checkpoints written by PyTorch (the fixtures, and
//! files made here with torch) are uploaded, then loaded by URL eagerly,
//! lazily and as metadata only, and compared with the local files' loads.
//! The tests count the process's transfers, so they run one at a time.

use crate::common;
use crate::servers;

use std::io::ErrorKind;
use std::path::Path;
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use crate::servers::Server;
use stowage::io::remote::{totals, RemoteError, RemoteFailure, RemoteOptions, Transfer};
use stowage::{load_with, LoadMode, LoadOptions};
use stowage::{Checkpoint, Error};
use stowage_zip::{ZipLimits, ZipReader};

/// One test at a time: they read the process-wide transfer totals.
fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The S3 server every test shares (it stops when the test process ends),
/// with the environment pointing the client at it.
fn moto() -> Option<&'static Server> {
    static MOTO: OnceLock<Option<Server>> = OnceLock::new();
    MOTO.get_or_init(|| {
        let server = servers::moto()?;
        for (k, v) in servers::s3_env(&server) {
            std::env::set_var(k, v);
        }
        // Local servers: fail fast rather than retry.
        std::env::set_var("STOWAGE_REMOTE_RETRIES", "0");
        std::env::set_var("STOWAGE_REMOTE_TIMEOUT", "10");
        Some(server)
    })
    .as_ref()
}

fn delta(before: Transfer) -> Transfer {
    let now = totals();
    Transfer {
        requests: now.requests - before.requests,
        bytes_received: now.bytes_received - before.bytes_received,
        bytes_sent: now.bytes_sent - before.bytes_sent,
        whole_gets: now.whole_gets - before.whole_gets,
        stores: now.stores - before.stores,
    }
}

fn options(lazy: bool, fake: bool) -> LoadOptions {
    // The servers' settings (retries, timeouts) are in the environment.
    let options = LoadOptions::from_env();
    match (lazy, fake) {
        (_, true) => options.with_mode(LoadMode::Fake),
        (true, false) => options.with_mode(LoadMode::Lazy),
        (false, false) => options,
    }
}

/// Panics unless `a` and `b` hold the same tensors, storages and bytes
/// (bytes compared only when `bytes`).
fn assert_same(a: &Checkpoint, b: &Checkpoint, bytes: bool, what: &str) {
    assert_eq!(a.format(), b.format(), "{what}");
    assert_eq!(a.byteorder(), b.byteorder(), "{what}");
    assert_eq!(a.storages().len(), b.storages().len(), "{what}");
    for (x, y) in a.storages().iter().zip(b.storages()) {
        assert_eq!(x.key, y.key, "{what}");
        assert_eq!(x.storage.nbytes(), y.storage.nbytes(), "{what} {}", x.key);
        if bytes {
            let (bx, by) = (x.storage.bytes().unwrap(), y.storage.bytes().unwrap());
            assert!(*bx == *by, "{what}: storage {} differs", x.key);
        }
    }
    let (ta, tb) = (a.tensors().unwrap(), b.tensors().unwrap());
    assert_eq!(ta.len(), tb.len(), "{what}");
    for ((pa, x), (pb, y)) in ta.iter().zip(&tb) {
        assert_eq!(pa, pb, "{what}");
        let (x, y) = (&x.tensor, &y.tensor);
        assert_eq!(x.dtype(), y.dtype(), "{what} {pa:?}");
        assert_eq!(x.shape(), y.shape(), "{what} {pa:?}");
        assert_eq!(x.stride(), y.stride(), "{what} {pa:?}");
        assert_eq!(x.storage_offset(), y.storage_offset(), "{what} {pa:?}");
    }
}

/// Loads `url` and `local` in each mode and compares them.
fn compare_modes(url: &str, local: &Path) {
    for (lazy, fake) in [(false, false), (true, false), (false, true)] {
        let what = format!("{url} lazy={lazy} fake={fake}");
        let mine = load_with(url, &options(lazy, fake));
        let theirs = load_with(local, &options(lazy, fake));
        match (mine, theirs) {
            (Ok(a), Ok(b)) => assert_same(&a, &b, !fake, &what),
            (Err(_), Err(_)) => {}
            (a, b) => panic!("{what}: {:?} vs {:?}", a.err(), b.err()),
        }
    }
}

#[test]
fn every_fixture_loads_over_s3_as_from_its_file() {
    let _one = serial();
    let Some(server) = moto() else { return };
    let names = common::fixture_names();
    let pairs: Vec<String> = names
        .iter()
        .map(|n| format!("{}=fixtures/{n}", common::fixture(n).display()))
        .collect();
    let mut args = vec!["put"];
    args.extend(pairs.iter().map(String::as_str));
    servers::s3(server, &args);
    for name in &names {
        let url = format!("s3://{}/fixtures/{name}", servers::BUCKET);
        compare_modes(&url, &common::fixture(name));
    }
}

#[test]
fn sharded_sets_load_by_the_url_of_their_index_or_folder() {
    let _one = serial();
    let Some(server) = moto() else { return };
    for kind in ["safetensors", "bin"] {
        let dir = common::fixtures_dir().join("sharded").join(kind);
        let mut pairs = Vec::new();
        for entry in std::fs::read_dir(&dir).unwrap() {
            let p = entry.unwrap().path();
            let name = p.file_name().unwrap().to_str().unwrap().to_owned();
            pairs.push(format!("{}=sets/{kind}/{name}", p.display()));
        }
        let mut args = vec!["put"];
        args.extend(pairs.iter().map(String::as_str));
        servers::s3(server, &args);
        let local = load_with(&dir, &LoadOptions::from_env()).unwrap();
        let folder = format!("s3://{}/sets/{kind}/", servers::BUCKET);
        let by_folder = load_with(&folder, &LoadOptions::from_env()).unwrap();
        assert_same(&by_folder, &local, true, &folder);
        let index = if kind == "bin" {
            "pytorch_model.bin.index.json"
        } else {
            "model.safetensors.index.json"
        };
        let by_index = load_with(format!("{folder}{index}"), &options(true, false)).unwrap();
        assert_same(&by_index, &local, true, index);
    }
}

/// A sharded set of 100 shards by URL builds one store client (a
/// connection pool and a credential chain) for all its files, and a meter
/// given in the options counts that load alone (issue 39).
#[test]
fn one_store_client_serves_every_shard_of_a_set() {
    use stowage::checkpoint::sharded::{save_sharded, ShardOptions};
    use stowage::checkpoint::PyValue;
    let _one = serial();
    let Some(server) = moto() else { return };
    let dir = tempfile::tempdir().unwrap();
    let tensors: Vec<(String, PyValue)> = (0..100)
        .map(|i| {
            let t = stowage::Tensor::from_vec(vec![i as f32; 16], &[16]).unwrap();
            (format!("layer{i:03}.weight"), PyValue::from(t))
        })
        .collect();
    let ckpt = Checkpoint::from_value(PyValue::Dict(
        tensors
            .into_iter()
            .map(|(k, v)| (PyValue::Str(k), v))
            .collect(),
    ))
    .unwrap();
    let options = ShardOptions::default().with_max_shard_size(64);
    let saved = save_sharded(dir.path(), &ckpt, &options).unwrap();
    assert_eq!(saved.files.len(), 100);
    let folder = servers::put_dir(server, dir.path(), "many-shards");
    let meter = stowage::io::remote::Meter::new();
    let with_meter =
        LoadOptions::from_env().with_remote(RemoteOptions::from_env().with_meter(meter.clone()));
    let before = totals();
    let by_url = load_with(&folder, &with_meter).unwrap();
    let t = meter.transfer();
    let local = load_with(dir.path(), &LoadOptions::from_env()).unwrap();
    assert_same(&by_url, &local, true, &folder);
    assert_eq!(local.tensors().unwrap().len(), 100);
    assert_eq!(t.stores, 1, "{t:?}");
    assert!(t.requests > 100, "{t:?}");
    // Nothing else ran meanwhile (the tests run one at a time): the meter
    // saw what the process did.
    assert_eq!(delta(before), t);
}

/// A distributed checkpoint by the URL of its folder: every fixture layout
/// (four ranks, one rank, safetensors items, zstd items) loads as from its
/// folder in every mode; a bigger one made by PyTorch costs one ranged
/// request per item, and a lazy load touching one tensor about its bytes.
#[test]
fn dcp_folders_load_by_url() {
    let _one = serial();
    let Some(server) = moto() else { return };
    for name in ["four", "one", "safetensors", "zstd", "hf"] {
        let dir = common::fixtures_dir().join("dcp").join(name);
        let url = servers::put_dir(server, &dir, &format!("dcp/{name}"));
        for (lazy, fake) in [(false, false), (true, false), (false, true)] {
            let what = format!("{url} lazy={lazy} fake={fake}");
            let mine =
                load_with(&url, &options(lazy, fake)).unwrap_or_else(|e| panic!("{what}: {e}"));
            let theirs = load_with(&dir, &options(lazy, fake)).unwrap();
            assert_same(&mine, &theirs, !fake, &what);
            assert_eq!(common::describe(&mine), common::describe(&theirs), "{what}");
        }
    }

    let dir = tempfile::tempdir().unwrap();
    if !servers::torch_dcp(dir.path(), 4, 1) {
        servers::skip("dcp.save failed");
        return;
    }
    let url = servers::put_dir(server, dir.path(), "dcp/made");
    let local = load_with(dir.path(), &LoadOptions::from_env()).unwrap();
    let files = std::fs::read_dir(dir.path()).unwrap().count() as u64;
    let folder: u64 = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum();
    // Eager: the `.metadata` probe and its reads, a HEAD per data file, then
    // one request per item (four tensors and `epoch`) at most.
    let before = totals();
    let eager = load_with(&url, &LoadOptions::from_env()).unwrap();
    let t = delta(before);
    assert_same(&eager, &local, true, "eager DCP");
    assert!(t.requests <= 3 + files + 5, "{t:?}");
    assert!(t.bytes_received <= folder + (320 << 10), "{t:?}");
    // Lazy: the metadata and the values, then one tensor's item when touched.
    let before = totals();
    let lazy = load_with(&url, &options(true, false)).unwrap();
    let opened = delta(before);
    assert!(opened.bytes_received < 1 << 20, "{opened:?}");
    let tensors = lazy.tensors().unwrap();
    let (_, t2) = tensors
        .iter()
        .find(|(p, _)| stowage::checkpoint::dotted(p) == "t2")
        .unwrap();
    let before = totals();
    let bytes = common::tensor_bytes(&t2.tensor).unwrap();
    let read = delta(before);
    let (_, l2) = local
        .tensors()
        .unwrap()
        .into_iter()
        .find(|(p, _)| stowage::checkpoint::dotted(p) == "t2")
        .unwrap();
    assert!(
        bytes == common::tensor_bytes(&l2.tensor).unwrap(),
        "t2's bytes differ"
    );
    assert!(
        read.bytes_received >= 1 << 20 && read.bytes_received < (1 << 20) + (64 << 10),
        "{read:?}"
    );
    assert!(read.requests <= 2, "{read:?}");
}

#[test]
fn metadata_and_one_lazy_tensor_cost_only_their_bytes() {
    let _one = serial();
    let Some(server) = moto() else { return };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("eight.pt");
    assert!(servers::torch_checkpoint(&file, 8, 4), "torch.save failed");
    let url = servers::put(server, &file, "eight.pt");
    let size = std::fs::metadata(&file).unwrap().len();

    // Metadata only: the head and tail blocks, and the HEAD.
    let before = totals();
    let fake = load_with(&url, &options(false, true)).unwrap();
    let t = delta(before);
    assert_eq!(fake.tensors().unwrap().len(), 8);
    assert!(t.bytes_received < 1 << 20, "{t:?}");
    assert!(t.requests <= 4, "{t:?}");

    // Lazy: touching one 4 MiB tensor fetches about that tensor.
    let before = totals();
    let lazy = load_with(&url, &options(true, false)).unwrap();
    let tensors = lazy.tensors().unwrap();
    let (_, t3) = tensors
        .iter()
        .find(|(p, _)| format!("{p:?}").contains("t3"))
        .unwrap();
    let local = stowage::load(&file).unwrap();
    let local_tensors = local.tensors().unwrap();
    let (_, l3) = local_tensors
        .iter()
        .find(|(p, _)| format!("{p:?}").contains("t3"))
        .unwrap();
    let (a, b) = (
        common::tensor_bytes(&t3.tensor).unwrap(),
        common::tensor_bytes(&l3.tensor).unwrap(),
    );
    assert!(a == b, "t3's bytes differ");
    let t = delta(before);
    let four = 4u64 << 20;
    assert!(
        t.bytes_received >= four && t.bytes_received < four + (1 << 20),
        "{t:?}"
    );
    // The load: the first and last blocks; the read: the tensor's local
    // header and bytes in one request.
    assert!(t.requests <= 3, "{t:?}");

    // Eager: every byte, in a few concurrent requests.
    let before = totals();
    let eager = load_with(&url, &LoadOptions::from_env()).unwrap();
    let t = delta(before);
    assert_same(&eager, &local, true, "eager");
    assert!(
        t.bytes_received >= 8 * four && t.bytes_received < size + (1 << 20),
        "{t:?}"
    );
    // HEAD, the head and tail blocks, then the 32 MiB of records with their
    // local headers in requests of at most 16 MiB: no request per header.
    assert!(t.requests <= 3 + 3, "{t:?}");
}

/// `LoadOptions::remote` reaches the requests: coalescing and request size
/// change how many ranged `GET`s an eager load sends; store options reach the
/// store (an unknown key is refused, naming it; an endpoint is used).
#[test]
fn load_options_carry_the_remote_options() {
    use stowage::io::remote::RemoteOptions;
    let _one = serial();
    let Some(server) = moto() else { return };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("four.pt");
    assert!(servers::torch_checkpoint(&file, 4, 1), "torch.save failed");
    let url = servers::put(server, &file, "options/four.pt");
    let local = stowage::load(&file).unwrap();
    let eager = |remote: RemoteOptions| {
        let before = totals();
        let options = LoadOptions::from_env().with_remote(remote);
        let ckpt = load_with(&url, &options).unwrap();
        assert_same(&ckpt, &local, true, &url);
        delta(before)
    };
    let defaults = RemoteOptions::from_env();
    // The four 1 MiB records and their local headers lie a few bytes apart:
    // one request by default ...
    let merged = eager(defaults.clone());
    // ... one per record and one per header when no gap is bridged, or when a
    // request holds one record at most.
    let apart = eager(defaults.clone().with_coalesce_gap(0));
    let small = eager(
        defaults
            .clone()
            .with_max_request(1 << 20)
            .with_concurrency(1),
    );
    assert_eq!(apart.requests, merged.requests + 7, "{merged:?} {apart:?}");
    assert_eq!(small.requests, merged.requests + 7, "{merged:?} {small:?}");
    assert_eq!(
        apart.bytes_received,
        merged.bytes_received - merged_gaps(&file)
    );

    let with_store = |store_options: Vec<(String, String)>| {
        LoadOptions::default().with_remote(
            defaults
                .clone()
                .with_store_options(store_options)
                .with_retries(0),
        )
    };
    let err = load_with(&url, &with_store(vec![("no_such_key".into(), "1".into())])).unwrap_err();
    assert!(err.to_string().contains("no_such_key"), "{err}");
    // An endpoint where nothing listens: the store uses it, and fails.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = closed.local_addr().unwrap().port();
    drop(closed);
    let endpoint = vec![("aws_endpoint".into(), format!("http://127.0.0.1:{port}"))];
    assert!(load_with(&url, &with_store(endpoint)).is_err());
}

/// Bytes between what an eager load reads of a torch zip archive's storage
/// records (each local header's fixed part and name, and the data): the
/// extra fields' padding, which coalescing fetches and drops.
fn merged_gaps(file: &Path) -> u64 {
    let zip = ZipReader::new(std::fs::read(file).unwrap(), &ZipLimits::default()).unwrap();
    let root = zip.root().to_owned();
    let mut spans: Vec<(u64, u64)> = zip
        .entries()
        .iter()
        .filter(|e| zip.name(e).starts_with(&format!("{root}/data/")))
        .flat_map(|e| {
            let header = e.local_header_offset;
            let start = zip.data_offset(e).unwrap();
            let name = ZipReader::<Vec<u8>>::local_header_len(e) as u64;
            [(header, header + name), (start, start + e.compressed_size)]
        })
        .collect();
    spans.sort_unstable();
    spans.windows(2).map(|w| w[1].0 - w[0].1).sum()
}

/// An archive whose records are not where PyTorch's writer puts them (here
/// aligned to 16 bytes, not 64): an eager or lazy load's guess of each
/// record's data offset fails, and the records are read again where their
/// local headers say.
#[test]
fn records_placed_by_another_writer_load_eagerly_and_lazily() {
    let _one = serial();
    let Some(server) = moto() else { return };
    let original = std::fs::read(common::fixture("views")).unwrap();
    let zip = ZipReader::new(original, &ZipLimits::default()).unwrap();
    let root = zip.root().to_owned();
    let mut w = stowage_zip::ZipWriter::new(Vec::new(), "views", 16);
    for e in zip.entries() {
        let name = zip.name(e).strip_prefix(&format!("{root}/")).unwrap();
        w.write_record(name, &zip.read_to_vec(e).unwrap()).unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("views.pt");
    std::fs::write(&file, w.finish().unwrap()).unwrap();
    let rewritten = ZipReader::new(std::fs::read(&file).unwrap(), &ZipLimits::default()).unwrap();
    let moved = rewritten
        .entries()
        .iter()
        .filter(|e| rewritten.name(e).contains("/data/"))
        .filter(|e| rewritten.likely_data_offset(e) != Some(rewritten.data_offset(e).unwrap()))
        .count();
    assert!(
        moved > 0,
        "the rewrite must move some record off PyTorch's place"
    );
    let url = servers::put(server, &file, "moved/views.pt");
    // Eagerly, and lazily (each storage's first read guesses too).
    for lazy in [false, true] {
        let loaded = load_with(&url, &options(lazy, false)).unwrap();
        assert_same(&loaded, &stowage::load(&file).unwrap(), true, &url);
        assert_same(
            &loaded,
            &common::load_fixture("views"),
            true,
            "the original",
        );
    }
}

/// `az://container/path` against Azurite, Azure's blob emulator: fixtures
/// uploaded by Azure's own SDK load as from their files in every mode
/// (objects below a folder too), a save commits a whole checkpoint, a
/// distributed checkpoint loads by its folder's URL, and a missing object is
/// not found, naming the URL.
#[test]
fn azure_blobs_through_azurite() {
    let _one = serial();
    let Some(server) = servers::azurite() else {
        return;
    };
    for (k, v) in servers::azure_env(&server) {
        std::env::set_var(k, v);
    }
    let names = ["nested", "same_object", "legacy_format", "views"];
    let pairs: Vec<String> = names
        .iter()
        .map(|n| format!("{}=fixtures/{n}.pt", common::fixture(n).display()))
        .collect();
    let mut args = vec!["put"];
    args.extend(pairs.iter().map(String::as_str));
    servers::az(&server, &args);
    for name in names {
        let url = format!("az://{}/fixtures/{name}.pt", servers::CONTAINER);
        compare_modes(&url, &common::fixture(name));
    }
    let url = format!("az://{}/saved/dir/nested.pt", servers::CONTAINER);
    let local = common::load_fixture("nested");
    stowage::save(&url, &local).unwrap();
    assert_eq!(
        servers::az(&server, &["ls", "saved/"]),
        ["saved/dir/nested.pt"]
    );
    let back = load_with(&url, &LoadOptions::from_env()).unwrap();
    assert_same(&back, &local, true, &url);
    assert_eq!(common::object_groups(&back), common::object_groups(&local));

    let dir = common::fixtures_dir().join("dcp").join("four");
    let mut pairs = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let p = entry.unwrap().path();
        pairs.push(format!(
            "{}=dcp/four/{}",
            p.display(),
            p.file_name().unwrap().to_str().unwrap()
        ));
    }
    let mut args = vec!["put"];
    args.extend(pairs.iter().map(String::as_str));
    servers::az(&server, &args);
    let folder = format!("az://{}/dcp/four/", servers::CONTAINER);
    let by_url = load_with(&folder, &LoadOptions::from_env()).unwrap();
    assert_same(
        &by_url,
        &load_with(&dir, &LoadOptions::from_env()).unwrap(),
        true,
        &folder,
    );

    let missing = format!("az://{}/absent.pt", servers::CONTAINER);
    let err = load_with(&missing, &LoadOptions::from_env()).unwrap_err();
    let Error::InFile { path, source } = &err else {
        panic!("{err:?}")
    };
    assert_eq!(path.to_str(), Some(missing.as_str()));
    assert!(
        matches!(&**source, Error::Io(e) if e.kind() == ErrorKind::NotFound),
        "{err:?}"
    );
}

/// `gs://bucket/path` against `fake-gcs-server`: fixtures uploaded over
/// its JSON API load as from their files in every mode, and a distributed
/// checkpoint by its folder's URL. (Saving to `gs://` is not tested: the
/// emulator has no XML multipart upload, which `object_store` writes with.)
#[test]
fn gcs_objects_through_fake_gcs_server() {
    let _one = serial();
    let Some(server) = servers::fake_gcs() else {
        return;
    };
    for (k, v) in servers::gcs_env(&server) {
        std::env::set_var(k, v);
    }
    let names = ["nested", "same_object", "legacy_format", "views"];
    let mut pairs: Vec<String> = names
        .iter()
        .map(|n| format!("{}=fixtures/{n}.pt", common::fixture(n).display()))
        .collect();
    let dir = common::fixtures_dir().join("dcp").join("four");
    for entry in std::fs::read_dir(&dir).unwrap() {
        let p = entry.unwrap().path();
        pairs.push(format!(
            "{}=dcp/four/{}",
            p.display(),
            p.file_name().unwrap().to_str().unwrap()
        ));
    }
    let mut args = vec!["put"];
    args.extend(pairs.iter().map(String::as_str));
    servers::gcs(&server, &args);
    for name in names {
        let url = format!("gs://{}/fixtures/{name}.pt", servers::GCS_BUCKET);
        compare_modes(&url, &common::fixture(name));
    }
    let folder = format!("gs://{}/dcp/four/", servers::GCS_BUCKET);
    let by_url = load_with(&folder, &LoadOptions::from_env()).unwrap();
    assert_same(
        &by_url,
        &load_with(&dir, &LoadOptions::from_env()).unwrap(),
        true,
        &folder,
    );
    let missing = format!("gs://{}/absent.pt", servers::GCS_BUCKET);
    let err = load_with(&missing, &LoadOptions::from_env()).unwrap_err();
    let Error::InFile { source, .. } = &err else {
        panic!("{err:?}")
    };
    assert!(
        matches!(&**source, Error::Io(e) if e.kind() == ErrorKind::NotFound),
        "{err:?}"
    );
}

#[test]
fn saves_to_s3_commit_only_whole_checkpoints() {
    let _one = serial();
    let Some(server) = moto() else { return };
    let local = common::load_fixture("nested");
    let url = format!("s3://{}/saved/nested.pt", servers::BUCKET);
    stowage::save(&url, &local).unwrap();
    let back = load_with(&url, &LoadOptions::from_env()).unwrap();
    assert_same(&back, &local, true, "saved torch zip");
    // The archive's root folder is the key's stem, as for a local file.
    let object = stowage::io::remote::RemoteObject::open(&url).unwrap();
    let zip = ZipReader::new(object, &ZipLimits::default()).unwrap();
    assert_eq!(zip.root(), "nested");

    let st = format!("s3://{}/saved/nested.safetensors", servers::BUCKET);
    let dense = common::load_fixture("params");
    stowage::checkpoint::safetensors::save(&st, &dense).unwrap();
    let back = load_with(&st, &LoadOptions::from_env()).unwrap();
    assert_eq!(
        back.tensors().unwrap().len(),
        dense.tensors().unwrap().len()
    );

    // A save that fails (fake tensors have no bytes) leaves nothing under the key.
    let fake = LoadOptions::default().with_mode(LoadMode::Fake);
    let hollow = load_with(common::fixture("params"), &fake).unwrap();
    let failed = format!("s3://{}/failed/params.pt", servers::BUCKET);
    let err = stowage::save(&failed, &hollow).unwrap_err();
    assert!(matches!(&err, Error::InFile { path, .. } if path.to_str() == Some(failed.as_str())));
    assert!(servers::keys(server, "failed/").is_empty());
}

/// The [`RemoteError`] inside a load's error.
fn remote_error(e: &Error) -> Option<&RemoteError> {
    e.remote()
}

#[test]
fn http_loads_and_faults() {
    let _one = serial();
    if moto().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("four.pt");
    assert!(servers::torch_checkpoint(&file, 4, 1), "torch.save failed");
    let bytes = std::fs::read(&file).unwrap();
    std::fs::write(dir.path().join("truncated.pt"), &bytes[..bytes.len() / 2]).unwrap();
    std::fs::copy(common::fixture("params"), dir.path().join("params.pt")).unwrap();
    let Some(server) = servers::range_server(dir.path(), &["--slow", "30"]) else {
        return;
    };
    let base = server.endpoint();

    compare_modes(&format!("{base}/four.pt"), &file);
    compare_modes(&format!("{base}/params.pt"), &common::fixture("params"));

    // 403: permission denied, naming the URL.
    let url = format!("{base}/forbidden/four.pt");
    let err = load_with(&url, &LoadOptions::from_env()).unwrap_err();
    assert!(matches!(&err, Error::InFile { path, .. } if path.to_str() == Some(url.as_str())));
    assert!(err.to_string().contains(&url), "{err}");
    assert!(err.to_string().contains("403"), "{err}");

    // A truncated object: no end records, a clear error.
    let err = load_with(format!("{base}/truncated.pt"), &LoadOptions::from_env()).unwrap_err();
    assert!(err.to_string().contains("truncated.pt"), "{err}");

    // A response cut short: an error naming the byte range.
    let err = load_with(format!("{base}/short/four.pt"), &LoadOptions::from_env()).unwrap_err();
    let remote = remote_error(&err).unwrap_or_else(|| panic!("{err:?}"));
    assert!(remote.range.is_some(), "{remote}");
    assert!(err.to_string().contains("bytes "), "{err}");

    // A slow server: the request times out (10 s here), no hang.
    let start = Instant::now();
    let err = load_with(format!("{base}/slow/four.pt"), &LoadOptions::from_env()).unwrap_err();
    assert!(
        start.elapsed() < Duration::from_secs(29),
        "{:?}",
        start.elapsed()
    );
    let remote = remote_error(&err).unwrap_or_else(|| panic!("{err:?}"));
    assert!(remote.range.is_some(), "{remote}");

    // A server that stops in the middle of a lazy load: the next read fails.
    let mut server = server;
    let lazy = load_with(format!("{base}/four.pt"), &options(true, false)).unwrap();
    server.stop();
    let storage = &lazy.storages()[0].storage;
    let err = storage.bytes().map(|_| ()).unwrap_err();
    let remote = remote_error(&err).unwrap_or_else(|| panic!("{err:?}"));
    assert!(remote.url.ends_with("/four.pt"), "{remote:?}");
    assert!(remote.range.is_some());
    assert!(!matches!(
        remote_error(&err).map(|r| r.range.clone()),
        Some(None)
    ));
    let _ = ErrorKind::Other;
}

/// The most `GET`s `scripts/range_server.py` answered at once since the last
/// call, asked over a plain HTTP/1.0 request.
fn max_in_flight(server: &Server) -> u64 {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", server.port)).unwrap();
    stream
        .write_all(b"GET /_stats HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let body = answer.split("\r\n\r\n").nth(1).unwrap_or_default();
    let stats: serde_json::Value = serde_json::from_str(body).unwrap();
    stats["max_in_flight"].as_u64().unwrap()
}

/// Loads `url` eagerly with one request in flight at most, then
/// `concurrency`, each request at most `max_request` bytes: each load gives
/// `local`'s checkpoint in at least `min_requests` requests, and the server
/// saw exactly as many at once as allowed.
fn assert_in_flight_bound(
    server: &Server,
    url: &str,
    local: &Checkpoint,
    (concurrency, max_request): (usize, u64),
    min_requests: u64,
) {
    use stowage::io::remote::RemoteOptions;
    for concurrency in [1, concurrency] {
        let options = LoadOptions::default().with_remote(
            RemoteOptions::from_env()
                .with_concurrency(concurrency)
                .with_max_request(max_request),
        );
        max_in_flight(server);
        let before = totals();
        let ckpt = load_with(url, &options).unwrap();
        assert_same(&ckpt, local, true, url);
        assert_eq!(common::describe(&ckpt), common::describe(local), "{url}");
        let sent = delta(before).requests;
        assert!(sent >= min_requests, "{sent} requests");
        assert_eq!(
            max_in_flight(server),
            concurrency as u64,
            "concurrency {concurrency}"
        );
    }
}

/// An eager load sends its range requests concurrently, as many at once as
/// `RemoteOptions::concurrency` allows and no more. The server holds every
/// ranged `GET` for 0.4 s, so that requests sent together overlap there even
/// on a busy machine.
#[test]
fn eager_loads_keep_up_to_concurrency_requests_in_flight() {
    let _one = serial();
    if moto().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("twelve.pt");
    assert!(servers::torch_checkpoint(&file, 12, 1), "torch.save failed");
    let local = stowage::load(&file).unwrap();
    let Some(server) = servers::range_server(dir.path(), &["--hold", "0.4"]) else {
        return;
    };
    // A request holds one 1 MiB record and its neighbour's header: twelve
    // data requests, or more, for the bound to show.
    let url = format!("{}/twelve.pt", server.endpoint());
    assert_in_flight_bound(&server, &url, &local, (4, (1 << 20) + 4096), 12);
}

/// An eager load of a distributed checkpoint by URL fetches its items in
/// concurrent batches, bounded as a file's records are, across its data
/// files as within one.
#[test]
fn dcp_items_by_url_are_fetched_concurrently() {
    let _one = serial();
    if moto().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    assert!(servers::torch_dcp(dir.path(), 8, 1), "dcp.save failed");
    let local = load_with(dir.path(), &LoadOptions::from_env()).unwrap();
    let Some(server) = servers::range_server(dir.path(), &["--hold", "0.4"]) else {
        return;
    };
    // Items of 1 MiB and a little more: two requests each, in batches of a
    // few items, so that the bound shows.
    let url = format!("{}/", server.endpoint());
    assert_in_flight_bound(&server, &url, &local, (4, 1 << 20), 16);
    drop(server);

    // Eight tensors in four files, two each: a batch of eight items' pieces
    // (two per item) keeps eight requests in flight only if the files are
    // fetched together (one file holds four pieces at most).
    let dir = tempfile::tempdir().unwrap();
    assert!(
        servers::torch_dcp_in_files(dir.path(), 8, 1, 4),
        "dcp.save failed"
    );
    let files = std::fs::read_dir(dir.path()).unwrap().count();
    assert_eq!(files, 5, "four data files and .metadata");
    let local = load_with(dir.path(), &LoadOptions::from_env()).unwrap();
    // Each request held 0.8 s: all eight of a batch must reach the server
    // while its first is held, and on a busy two-core machine 0.4 s was
    // not always enough (the server saw seven at once).
    let Some(server) = servers::range_server(dir.path(), &["--hold", "0.8"]) else {
        return;
    };
    let url = format!("{}/", server.endpoint());
    assert_in_flight_bound(&server, &url, &local, (8, 1 << 20), 16);
}

/// A folder URL is found by a probe and one listing, in the order a local
/// folder is: the Hugging Face layout of a DCP by its ranks' files. A folder
/// holding no checkpoint is a not-found error naming its URL; where the
/// server cannot list (plain HTTP), the error says so.
#[test]
fn folders_by_url_are_found_by_a_listing() {
    use stowage::checkpoint::{resolve, Folder};
    let folder_of = |p: &Path, o: &LoadOptions| resolve(p, o).map(|s| s.folder().cloned());
    let _one = serial();
    let Some(server) = moto() else { return };
    let dir = common::fixtures_dir().join("dcp").join("hf");
    let url = servers::put_dir(server, &dir, "listed/hf");
    let options = LoadOptions::from_env();
    let Some(Folder::Ranks(files)) = folder_of(Path::new(&url), &options).unwrap() else {
        panic!("{url}: not the ranks' layout");
    };
    let names: Vec<String> = files
        .iter()
        .map(|f| f.to_string().strip_prefix(&url).unwrap().to_owned())
        .collect();
    let local = folder_of(&dir, &options).unwrap().unwrap();
    let local_names: Vec<String> = local
        .files()
        .iter()
        .map(|f| f.file_name().unwrap().to_owned())
        .collect();
    assert_eq!(names, local_names);
    let set = common::fixtures_dir().join("sharded").join("bin");
    let set_url = servers::put_dir(server, &set, "listed/bin");
    assert_eq!(
        folder_of(Path::new(&set_url), &options).unwrap(),
        Some(Folder::Sharded(stowage::io::Location::parse(format!(
            "{set_url}pytorch_model.bin.index.json"
        ))))
    );

    let empty = servers::put(
        server,
        &common::fixtures_dir().join("README.md"),
        "listed/empty/README.md",
    );
    let folder = empty.strip_suffix("README.md").unwrap();
    let e = load_with(folder, &options).unwrap_err();
    let Error::InFile { path, source } = &e else {
        panic!("{e}")
    };
    assert_eq!(path, Path::new(folder));
    assert!(
        matches!(&**source, Error::Io(io) if io.kind() == ErrorKind::NotFound),
        "{e}"
    );

    let http = tempfile::tempdir().unwrap();
    let Some(plain) = servers::range_server(http.path(), &[]) else {
        return;
    };
    let e = load_with(format!("{}/", plain.endpoint()), &options).unwrap_err();
    assert!(e.to_string().contains("could not be listed"), "{e}");
}

/// An object replaced while a lazy load holds it: reading a tensor then is
/// an error naming the change (S3 honours the `If-Match` of the ETag the
/// load opened), never the new object's bytes under the old one's layout.
#[test]
fn an_object_replaced_during_a_lazy_load_is_an_error() {
    use stowage::io::remote::RemoteFailure;
    let _one = serial();
    let Some(server) = moto() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (first, second) = (dir.path().join("a.pt"), dir.path().join("b.pt"));
    assert!(servers::torch_checkpoint(&first, 4, 1), "torch.save failed");
    assert!(
        servers::torch_checkpoint(&second, 5, 1),
        "torch.save failed"
    );
    let url = servers::put(server, &first, "replaced.pt");
    let lazy = load_with(&url, &options(true, false)).unwrap();
    let tensors = lazy.tensors().unwrap();
    servers::put(server, &second, "replaced.pt");
    let e = common::tensor_bytes(&tensors[1].1.tensor).unwrap_err();
    let failure = remote_error(&e).map(|r| &r.failure);
    assert!(
        matches!(failure, Some(RemoteFailure::Changed { .. })),
        "{e}"
    );
    assert!(
        e.to_string().contains("changed while it was being read"),
        "{e}"
    );
}

/// A server that ignores `Range` (`python -m http.server`, played by
/// `range_server.py`'s `/norange/`) answers the first ranged `GET` with the
/// whole object: each object is then fetched whole, in one more `GET`, and
/// read from memory, within the limit (the transfer's `whole_gets` counts
/// them); an object past the limit is refused, naming the limit (issue 26,
/// item 19).
#[test]
fn servers_without_range_support_are_read_with_one_whole_get() {
    let _one = serial();
    let dir = tempfile::tempdir().unwrap();
    let set = common::fixtures_dir().join("sharded/safetensors");
    for entry in std::fs::read_dir(&set).unwrap() {
        let p = entry.unwrap().path();
        std::fs::copy(&p, dir.path().join(p.file_name().unwrap())).unwrap();
    }
    std::fs::copy(common::fixture("params"), dir.path().join("params.pt")).unwrap();
    let Some(server) = servers::range_server(dir.path(), &[]) else {
        return;
    };
    let base = format!("{}/norange", server.endpoint());
    let remote = RemoteOptions::default()
        .with_retries(0)
        .with_timeout(Duration::from_secs(10));
    let opts = |mode| {
        LoadOptions::default()
            .with_mode(mode)
            .with_remote(remote.clone())
    };

    // The set by its index: the index and three shards, each fetched whole once.
    let local = load_with(&set, &LoadOptions::default()).unwrap();
    let before = totals();
    let by_index = load_with(
        format!("{base}/model.safetensors.index.json"),
        &opts(LoadMode::Eager),
    )
    .unwrap();
    let spent = delta(before);
    assert_same(&by_index, &local, true, "the set without Range");
    assert_eq!(spent.whole_gets, 4, "{spent:?}");
    assert_eq!(spent.requests, 2 * spent.whole_gets, "{spent:?}");
    let on_disk: u64 = std::fs::read_dir(&set)
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum::<u64>()
        - std::fs::metadata(set.join("expected.json")).unwrap().len();
    assert_eq!(spent.bytes_received, on_disk, "{spent:?}");

    // A torch zip archive, lazily: its reads come from the object in memory.
    let local = load_with(common::fixture("params"), &opts(LoadMode::Lazy)).unwrap();
    let before = totals();
    let lazy = load_with(format!("{base}/params.pt"), &opts(LoadMode::Lazy)).unwrap();
    assert_same(&lazy, &local, true, "a lazy load without Range");
    let spent = delta(before);
    assert_eq!((spent.whole_gets, spent.requests), (1, 2), "{spent:?}");

    // Past the limit: refused before the body is read, naming the limit.
    let small = LoadOptions::default().with_remote(remote.clone().with_max_whole_get(1000));
    let url = format!("{base}/params.pt");
    let err = load_with(&url, &small).unwrap_err();
    let text = err.to_string();
    assert!(text.contains(&url), "{text}");
    assert!(
        text.contains("ignores Range") && text.contains("STOWAGE_REMOTE_MAX_WHOLE_GET"),
        "{text}"
    );
    let failure = remote_error(&err).map(|r| &r.failure);
    assert!(
        matches!(failure, Some(RemoteFailure::NoRange { max: 1000, .. })),
        "{err:?}"
    );
}

/// A fake load reads the pickle and the directory only, on disk and by URL
/// alike (issue 39, item 3): an archive whose record has a broken local
/// header loads fake from both, and fails alike, naming the header's
/// offset, when its data is read.
#[test]
fn fake_loads_check_local_and_remote_archives_alike() {
    let _one = serial();
    let Some(server) = moto() else { return };
    let dir = tempfile::tempdir().unwrap();
    let bytes = std::fs::read(common::fixtures_dir().join("simple.pt")).unwrap();
    let zip = ZipReader::new(bytes.as_slice(), &ZipLimits::default()).unwrap();
    let data = zip
        .entries()
        .iter()
        .find(|e| zip.name(e).contains("/data/"))
        .expect("a storage record")
        .clone();
    let mut broken = bytes.clone();
    broken[data.local_header_offset as usize] ^= 0xff; // the signature
    let local = dir.path().join("broken_header.pt");
    std::fs::write(&local, &broken).unwrap();
    let url = servers::put(server, &local, "alike/broken_header.pt");
    let fake = LoadOptions::from_env().with_mode(LoadMode::Fake);
    let eager = LoadOptions::from_env();
    for at in [local.to_str().unwrap(), url.as_str()] {
        let ckpt = load_with(at, &fake).unwrap_or_else(|e| panic!("{at}: {e}"));
        assert!(!ckpt.tensors().unwrap().is_empty());
        let e = load_with(at, &eager).expect_err(at);
        let offset = format!("at offset {}", data.local_header_offset);
        assert!(e.to_string().contains(&offset), "{at}: {e}");
    }
}
