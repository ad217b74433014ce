//! Storage backings: file-backed (shared and private), shared memory across
//! processes, pinned memory, and the refusals (resize, data on meta).

#[cfg(feature = "shm")]
use std::path::PathBuf;
#[cfg(feature = "shm")]
use std::process::Command;
use stowage::StorageError;

#[cfg(feature = "shm")]
use stowage::SharingStrategy;
use stowage::{DType, Device, Error, Tensor, UntypedStorage};

fn temp_dir() -> tempfile::TempDir {
    tempfile::tempdir().expect("temporary directory")
}

#[test]
fn shared_file_mapping_writes_reach_the_file_and_grow_it() {
    let dir = temp_dir();
    let path = dir.path().join("weights.bin");
    std::fs::write(&path, [1u8, 2, 3, 4]).unwrap();
    {
        // SAFETY: the file is private to this test and not otherwise touched while mapped.
        let s = unsafe { UntypedStorage::from_file(&path, true, 8) }.unwrap();
        assert_eq!(s.tolist().unwrap(), [1, 2, 3, 4, 0, 0, 0, 0]);
        assert!(s.is_shared());
        assert!(!s.resizable());
        assert_eq!(s.filename().as_deref(), Some(path.as_path()));
        // A write through a float32 view lands in the file.
        let mut t = Tensor::zeros(&[0], DType::Float32).unwrap();
        t.set_(&s, 1, &[1], &[1]).unwrap();
        t.fill_(1.0).unwrap();
        assert!(matches!(
            s.resize_(16),
            Err(Error::Storage(StorageError::NotResizable))
        ));
    }
    // Dropped: the file stays, grown, with the write.
    assert_eq!(std::fs::read(&path).unwrap(), [1, 2, 3, 4, 0, 0, 128, 63]);
}

#[test]
fn private_file_mapping_never_changes_the_file() {
    let dir = temp_dir();
    let path = dir.path().join("weights.bin");
    std::fs::write(&path, [9u8; 16]).unwrap();
    // SAFETY: the file is private to this test.
    let s = unsafe { UntypedStorage::from_file(&path, false, 16) }.unwrap();
    s.fill_(0).unwrap();
    assert_eq!(s.tolist().unwrap(), [0; 16]);
    assert!(s.is_shared());
    assert_eq!(s.filename(), None);
    drop(s);
    assert_eq!(std::fs::read(&path).unwrap(), [9; 16]);
    // SAFETY: as above.
    match unsafe { UntypedStorage::from_file(&path, false, 17) } {
        Err(Error::Storage(StorageError::FileTooSmall {
            size: 16,
            nbytes: 17,
            ..
        })) => {}
        other => panic!("{other:?}"),
    }
    // SAFETY: as above.
    let empty = unsafe { UntypedStorage::from_file(&path, false, 0) }.unwrap();
    assert_eq!(empty.nbytes(), 0);
}

#[cfg(feature = "shm")]
fn in_dev_shm(name: &str) -> bool {
    std::path::Path::new("/dev/shm")
        .join(name.trim_start_matches('/'))
        .exists()
}

#[cfg(feature = "shm")]
#[test]
fn share_memory_keeps_identity_and_views_and_leaves_nothing_behind() {
    for strategy in [SharingStrategy::FileDescriptor, SharingStrategy::FileSystem] {
        let t = Tensor::arange(0.0, 6.0, 1.0, DType::Float32).unwrap();
        let row = t.narrow(0, 2, 2).unwrap();
        let s = t.untyped_storage().clone();
        s.share_memory_with(strategy).unwrap();
        assert!(s.is_shared() && !s.resizable());
        assert!(matches!(
            s.resize_(4),
            Err(Error::Storage(StorageError::NotResizable))
        ));
        // Views made before sharing see the moved bytes.
        assert_eq!(row.to_vec::<f32>().unwrap(), [2.0, 3.0]);
        row.fill_(7.0).unwrap();
        assert_eq!(t.to_vec::<f32>().unwrap(), [0.0, 1.0, 7.0, 7.0, 4.0, 5.0]);
        let handle = s.shared_memory_handle().unwrap().expect("a handle");
        assert_eq!(handle.nbytes, 24);
        // The descriptor strategy unlinks the name at once; the file-system one keeps
        // it until the creating storage is dropped.
        assert_eq!(
            handle.name.is_some(),
            strategy == SharingStrategy::FileSystem
        );
        if let Some(name) = &handle.name {
            assert!(in_dev_shm(name));
        }
        let name = handle.name.clone();
        drop((t, row, s, handle));
        if let Some(name) = name {
            assert!(!in_dev_shm(&name), "{name} left in /dev/shm");
        }
    }
}

/// The child half of `a_child_process_writes_through_a_view`: runs only when
/// the parent sets STOWAGE_SHM_CHILD to the object's name.
#[cfg(feature = "shm")]
#[test]
fn shm_child_writer() {
    let Ok(name) = std::env::var("STOWAGE_SHM_CHILD") else {
        return;
    };
    // SAFETY: the parent waits for this process to exit before reading.
    let s = unsafe { UntypedStorage::from_shared_name(&name, 16) }.unwrap();
    let mut t = Tensor::zeros(&[0], DType::Int32).unwrap();
    t.set_(&s, 0, &[4], &[1]).unwrap();
    t.narrow(0, 1, 2)
        .unwrap()
        .copy_(&Tensor::from_slice(&[41i32, 42]).unwrap())
        .unwrap();
}

#[cfg(feature = "shm")]
#[test]
fn a_child_process_writes_through_a_view() {
    let t = Tensor::zeros(&[4], DType::Int32).unwrap();
    let s = t.untyped_storage().clone();
    s.share_memory_with(SharingStrategy::FileSystem).unwrap();
    let name = s
        .shared_memory_handle()
        .unwrap()
        .and_then(|h| h.name)
        .expect("a name");
    let exe: PathBuf = std::env::current_exe().unwrap();
    let status = Command::new(exe)
        .args([
            "--exact",
            "backings::shm_child_writer",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("STOWAGE_SHM_CHILD", &name)
        .status()
        .unwrap();
    assert!(status.success());
    assert_eq!(t.to_vec::<i32>().unwrap(), [0, 41, 42, 0]);
    drop((t, s));
    assert!(!in_dev_shm(&name), "{name} left in /dev/shm");
}

#[cfg(feature = "pinned")]
#[test]
fn pinned_memory_is_a_locked_copy_or_a_clear_refusal() {
    let s = UntypedStorage::from_bytes(&[1, 2, 3]).unwrap();
    match s.pin_memory() {
        Ok(p) => {
            assert!(p.is_pinned() && !s.is_pinned());
            assert_ne!(p.data_ptr(), s.data_ptr());
            assert_eq!(p.tolist().unwrap(), [1, 2, 3]);
        }
        Err(Error::Storage(StorageError::PinFailed { nbytes: 3, .. })) => {}
        Err(e) => panic!("{e:?}"),
    }
    let on_cuda = s.to("cuda:0".parse().unwrap()).unwrap();
    assert!(matches!(
        on_cuda.pin_memory(),
        Err(Error::Storage(StorageError::NotPinnable { .. }))
    ));
    let meta = UntypedStorage::new_on(4, Device::META).unwrap();
    assert!(matches!(
        meta.pin_memory(),
        Err(Error::Storage(StorageError::NotPinnable { .. }))
    ));
}

#[test]
fn meta_storages_refuse_every_data_access() {
    let m = Tensor::zeros_on(&[2, 3], DType::Float32, Device::META).unwrap();
    let views = [
        m.t().unwrap(),
        m.view(&[-1]).unwrap(),
        m.select(0, 1).unwrap(),
        m.expand(&[4, 2, 3]).unwrap(),
    ];
    assert_eq!(views[3].stride(), &[0, 3, 1]);
    for v in &views {
        assert!(matches!(
            v.to_vec::<f32>(),
            Err(Error::Storage(StorageError::NoData { .. }))
        ));
        assert!(matches!(
            v.fill_(1.0),
            Err(Error::Storage(StorageError::NoData { .. }))
        ));
    }
    let s = m.untyped_storage();
    assert!(matches!(
        s.tolist(),
        Err(Error::Storage(StorageError::NoData { .. }))
    ));
    assert!(matches!(
        s.copy_(&UntypedStorage::new(24).unwrap()),
        Err(Error::Storage(StorageError::NoData { .. }))
    ));
    // PyTorch refuses to share a meta storage, naming its strategy's function.
    #[cfg(feature = "shm")]
    {
        let e = s.share_memory_().unwrap_err();
        assert!(matches!(
            e,
            Error::Storage(StorageError::ShareMemoryNotCpu { op: "_share_fd_" })
        ));
        assert_eq!(e.to_string(), "_share_fd_: only available on CPU");
        let e = s
            .share_memory_with(SharingStrategy::FileSystem)
            .unwrap_err();
        assert_eq!(e.to_string(), "_share_filename_: only available on CPU");
    }
    assert!(!s.is_shared());
    assert_eq!(
        s.to_string(),
        "...\n[stowage.UntypedStorage(device=meta) of size 24]"
    );
}
