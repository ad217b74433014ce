//! Scanning checkpoints for the globals their pickles name, without loading
//! them: what `picklescan` and `modelscan` do, with the static disassembler
//! of [`pickle::disasm`](crate::checkpoint::pickle::disasm) instead of pattern matching.
//!
//! Every pickle in a file is read:
//! - a torch zip archive (and a TorchScript archive): every record whose name
//!   ends in `.pkl` (`data.pkl`, `constants.pkl`, `<name>/data.pkl`, …);
//! - the legacy format: its five pickles (magic number, protocol version,
//!   `sys_info`, the object, the storage keys);
//! - any other file that is a pickle (`pickle.dump` output of any protocol):
//!   the pickles at its start, back to back (the first must be one; up to
//!   five, as `torch.load` reads a legacy stream).
//!
//! Each global is named as Python 3 would import it (the Python 2 names are
//! mapped as CPython's unpickler maps them; PyTorch's static
//! `get_globals_in_pkl` uses a shorter table of its own, so it may keep a
//! Python 2 name, such as `commands.Popen` for `subprocess.Popen`;
//! [`pickle::compat`](crate::checkpoint::pickle::compat)) and gets a [`Verdict`]:
//! [`Allowed`](Verdict::Allowed) by PyTorch's `weights_only` loader,
//! [`Decoded`](Verdict::Decoded) as data by stowage
//! ([`decoded`]), or [`Unsafe`](Verdict::Unsafe): under
//! `torch.load(weights_only=False)` it would be imported and could run code. A
//! `STACK_GLOBAL` whose operands are not string constants, and an extension
//! code, are unsafe as such (named `<dynamic>.STACK_GLOBAL` and
//! `<extension>.<code>`).
//!
//! Folders are scanned recursively, following symbolic links but entering
//! each folder once (so a link loop ends). In a folder, files are listed
//! when their content is a checkpoint or a pickle: a zip archive, the legacy
//! stream, a safetensors file, or a stream whose first pickle reads to its
//! `STOP` or that starts with `PROTO` and names a global before it breaks
//! off; other files (text, images, `.npy`, JSON) are left out. (So a protocol
//! 0 or 1 stream cut before its `STOP` is missed in a folder; named directly,
//! it is listed with its globals and an error.) A file named directly is always listed, with an error
//! when it is neither. Memory stays bounded by [`LoadOptions`]'
//! `max_pickle_bytes` (the largest pickle read), `max_records` and
//! `pickle_limits`.

mod json;
mod torch_allowed;

use std::fs::File;
use std::path::{Path, PathBuf};

use self::torch_allowed::TORCH_ALLOWED;
use crate::checkpoint::format::torch_legacy::MAGIC_PREFIX;
use crate::checkpoint::globals::allowlist;
use crate::checkpoint::globals::decoded;
use crate::checkpoint::options::LoadOptions;
use crate::checkpoint::pickle::{compat, disassemble, Disassembly, GlobalName, PickleError};
use crate::checkpoint::zip::{ZipLimits, ZipReader};
use crate::io::ReadAt;
use crate::{Error, Result};

/// What a global would do, for PyTorch and for stowage.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Verdict {
    /// PyTorch's `weights_only` loader accepts it
    /// (`torch/_weights_only_unpickler.py:_get_allowed_globals`).
    Allowed,
    /// PyTorch's `weights_only` loader refuses it, and stowage reads it as
    /// data without running anything.
    Decoded,
    /// Neither: `torch.load(weights_only=False)` would import it, and it may
    /// run code.
    Unsafe,
}

impl Verdict {
    /// `"allowed"`, `"decoded"` or `"unsafe"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Allowed => "allowed",
            Verdict::Decoded => "decoded",
            Verdict::Unsafe => "unsafe",
        }
    }
}

/// One global named by a pickle (or by a file's pickles together).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GlobalUse {
    /// The module, as Python 3 imports it (`builtins`, not `__builtin__`);
    /// `<dynamic>` or `<extension>` for globals not named by constants.
    pub module: String,
    /// The name within the module; `STACK_GLOBAL`, or the extension code.
    pub name: String,
    /// What it would do.
    pub verdict: Verdict,
    /// How many times it is named.
    pub count: u64,
}

/// One pickle of a file.
#[derive(Clone, Debug)]
pub struct PickleScan {
    /// Where it is: the zip record's full name (`archive/data.pkl`), the
    /// legacy section (`object`), or `pickle` (`pickle 2` …) for a bare one.
    pub record: String,
    /// The protocol it declares (0 without a `PROTO` opcode).
    pub protocol: u8,
    /// Each opcode it uses with its count, by `pickletools` name.
    pub opcodes: Vec<(&'static str, u64)>,
    /// The globals it names, in order of first appearance.
    pub globals: Vec<GlobalUse>,
}

/// What a file holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScanKind {
    /// A zip archive (`torch.save` since 1.6, or TorchScript).
    TorchZip,
    /// The legacy `torch.save` stream.
    TorchLegacy,
    /// A safetensors file: no pickle at all.
    Safetensors,
    /// A bare pickle stream.
    Pickle,
}

impl ScanKind {
    /// `"torch-zip"`, `"torch-legacy"`, `"safetensors"` or `"pickle"`.
    pub fn as_str(self) -> &'static str {
        match self {
            ScanKind::TorchZip => "torch-zip",
            ScanKind::TorchLegacy => "torch-legacy",
            ScanKind::Safetensors => "safetensors",
            ScanKind::Pickle => "pickle",
        }
    }
}

/// One scanned file.
#[derive(Debug)]
pub struct FileScan {
    /// The file.
    pub path: PathBuf,
    /// What it holds, when that could be told.
    pub kind: Option<ScanKind>,
    /// Each pickle read, in file order.
    pub pickles: Vec<PickleScan>,
    /// The globals of all its pickles together, in order of first appearance.
    pub globals: Vec<GlobalUse>,
    /// The first thing that could not be read (the file, a record, a pickle
    /// that cannot be walked to its end), not naming the file again. What was
    /// read before it is listed.
    pub error: Option<Error>,
}

impl FileScan {
    /// Whether any global is [`Verdict::Unsafe`].
    pub fn is_unsafe(&self) -> bool {
        self.globals.iter().any(|g| g.verdict == Verdict::Unsafe)
    }
}

/// The files a scan read, in the order found (a folder's entries by name).
#[derive(Debug, Default)]
pub struct ScanReport {
    /// Each file.
    pub files: Vec<FileScan>,
}

impl ScanReport {
    /// Whether any file names an unsafe global.
    pub fn is_unsafe(&self) -> bool {
        self.files.iter().any(FileScan::is_unsafe)
    }

    /// Whether any file (or part of one) could not be read.
    pub fn has_errors(&self) -> bool {
        self.files.iter().any(|f| f.error.is_some())
    }
}

/// The verdict on the global `module.name`, named as Python 3 imports it
/// (apply [`compat::fix_import`] to a name as written first).
///
/// [`Verdict::Allowed`] is decided by PyTorch's own list
/// ([`allowed_names`]); [`Verdict::Decoded`] by what stowage reads as data:
/// the allowlist it loads with, and [`decoded`]'s table.
pub fn verdict(module: &str, name: &str) -> Verdict {
    if torch_allows(module, name) {
        Verdict::Allowed
    } else if allowlist::resolve(module, name).is_ok() || decoded::lookup(module, name).is_some() {
        Verdict::Decoded
    } else {
        Verdict::Unsafe
    }
}

/// Whether `module.name` is a key of PyTorch's `_get_allowed_globals()`.
fn torch_allows(module: &str, name: &str) -> bool {
    TORCH_ALLOWED
        .binary_search(&format!("{module}.{name}").as_str())
        .is_ok()
}

/// Every global [`verdict`] calls [`Verdict::Allowed`], as `module.name`,
/// sorted: the keys of PyTorch's `_get_allowed_globals()` (PyTorch 2.15;
/// generated by `scripts/gen_torch_allowlist.py`, and held to the running
/// PyTorch by a test).
pub fn allowed_names() -> &'static [&'static str] {
    TORCH_ALLOWED
}

/// Scans a file, or a folder recursively, with default limits.
pub fn scan_path(path: &Path) -> ScanReport {
    scan_path_with(path, &LoadOptions::default())
}

/// Scans a file, or a folder recursively, with the limits of `options`
/// (`pickle_limits`, `max_pickle_bytes`, `max_records`). A path that cannot
/// be read is listed as a file with an error.
pub fn scan_path_with(path: &Path, options: &LoadOptions) -> ScanReport {
    let mut report = ScanReport::default();
    let mut seen = Vec::new();
    walk(path, true, options, &mut seen, &mut report);
    report
}

/// Scans `path` into `report`: a folder's entries in name order, a file as
/// itself. `named`: the path was given by the caller (always listed).
fn walk(
    path: &Path,
    named: bool,
    options: &LoadOptions,
    seen: &mut Vec<(u64, u64)>,
    report: &mut ScanReport,
) {
    use std::os::unix::fs::MetadataExt;
    let failed = |e: std::io::Error| FileScan {
        path: path.to_owned(),
        kind: None,
        pickles: Vec::new(),
        globals: Vec::new(),
        error: Some(Error::Io(e)),
    };
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        // A dangling link inside a folder is not a file to scan.
        Err(_) if !named && path.symlink_metadata().is_ok_and(|m| m.is_symlink()) => return,
        Err(e) => return report.files.push(failed(e)),
    };
    if !meta.is_dir() {
        if named || meta.is_file() {
            if let Some(scan) = scan_one(path, named, options) {
                report.files.push(scan);
            }
        }
        return;
    }
    let id = (meta.dev(), meta.ino());
    if seen.contains(&id) {
        return;
    }
    seen.push(id);
    let entries = std::fs::read_dir(path).and_then(|d| {
        let mut v = d
            .map(|e| e.map(|e| e.path()))
            .collect::<std::io::Result<Vec<_>>>()?;
        v.sort();
        Ok(v)
    });
    match entries {
        Ok(entries) => {
            for entry in entries {
                walk(&entry, false, options, seen, report);
            }
        }
        Err(e) => report.files.push(failed(e)),
    }
}

/// Scans one file; `None` for a file in a folder that holds no pickle.
fn scan_one(path: &Path, named: bool, options: &LoadOptions) -> Option<FileScan> {
    let opened = File::open(path).map_err(Error::Io);
    let mut scan = match opened {
        Ok(file) => scan_source(&file, options, named),
        Err(e) => FileScan {
            path: PathBuf::new(),
            kind: None,
            pickles: Vec::new(),
            globals: Vec::new(),
            error: Some(e),
        },
    };
    if !named && scan.kind.is_none() {
        return None;
    }
    scan.path = path.to_owned();
    Some(scan)
}

/// Scans a checkpoint or pickle held in memory (its [`FileScan::path`] is
/// empty).
pub fn scan_bytes(bytes: &[u8], options: &LoadOptions) -> FileScan {
    scan_source(bytes, options, true)
}

/// Scans the file `source` holds; `named`: asked for by name (not found in
/// a folder).
fn scan_source<R: ReadAt + ?Sized>(source: &R, options: &LoadOptions, named: bool) -> FileScan {
    let mut scan = FileScan {
        path: PathBuf::new(),
        kind: None,
        pickles: Vec::new(),
        globals: Vec::new(),
        error: None,
    };
    let mut head = [0u8; 16];
    let n = source.len().min(16) as usize;
    if let Err(e) = source.read_exact_at(&mut head[..n], 0) {
        scan.error = Some(Error::Io(e));
        return scan;
    }
    let head = &head[..n];
    let result = if head.starts_with(b"PK\x03\x04") {
        scan.kind = Some(ScanKind::TorchZip);
        scan_zip(source, options, &mut scan)
    } else if head.starts_with(MAGIC_PREFIX) {
        scan.kind = Some(ScanKind::TorchLegacy);
        scan_stream(source, options, &mut scan, true)
    } else if n >= 9 && head[8] == b'{' && !head.starts_with(b"\x80") {
        scan.kind = Some(ScanKind::Safetensors);
        Ok(())
    } else {
        // A stream whose first pickle breaks off is taken for a pickle (with
        // an error) when it named a global and either was asked for by name
        // or starts with `PROTO`; otherwise (text, images, `.npy` files in a
        // folder) it is no pickle.
        let result = scan_stream(source, options, &mut scan, false);
        let proto = head.len() >= 2 && head[0] == 0x80 && head[1] <= 5;
        let named_any = scan.pickles.iter().any(|p| !p.globals.is_empty());
        if result.is_ok() || ((named || proto) && named_any) {
            scan.kind = Some(ScanKind::Pickle);
            result
        } else {
            scan.pickles.clear();
            Err(Error::NotACheckpoint {
                detail: "neither a checkpoint nor a pickle".into(),
            })
        }
    };
    if let Err(e) = result {
        scan.error = Some(e);
    }
    scan.globals = merge(scan.pickles.iter().flat_map(|p| p.globals.iter()));
    scan
}

/// Adds the pickle `d` read from `record`; an error if it could not be
/// walked to its end.
fn add(scan: &mut FileScan, record: String, d: Disassembly) -> Result<()> {
    let globals = d.globals.iter().map(|(g, count)| {
        let (module, name) = match g {
            GlobalName::Static { module, name } => {
                let (m, n) = compat::fix_import(module, name);
                (m.to_owned(), n.to_owned())
            }
            GlobalName::Dynamic => ("<dynamic>".to_owned(), "STACK_GLOBAL".to_owned()),
            GlobalName::Extension(code) => ("<extension>".to_owned(), code.to_string()),
        };
        let verdict = match g {
            GlobalName::Static { .. } => verdict(&module, &name),
            _ => Verdict::Unsafe,
        };
        GlobalUse {
            module,
            name,
            verdict,
            count: *count,
        }
    });
    let globals = merge(globals.collect::<Vec<_>>().iter());
    let error = d.error.clone();
    scan.pickles.push(PickleScan {
        record: record.clone(),
        protocol: d.protocol,
        opcodes: d.opcodes().map(|(o, n)| (o.name, n)).collect(),
        globals,
    });
    match error {
        Some(e) => Err(Error::InRecord {
            name: record,
            source: Box::new(Error::Pickle(e)),
        }),
        None => Ok(()),
    }
}

/// Sums the counts of equal globals, keeping the order of first appearance.
fn merge<'a>(uses: impl Iterator<Item = &'a GlobalUse>) -> Vec<GlobalUse> {
    let mut out: Vec<GlobalUse> = Vec::new();
    for g in uses {
        match out
            .iter_mut()
            .find(|o| o.module == g.module && o.name == g.name)
        {
            Some(o) => o.count += g.count,
            None => out.push(g.clone()),
        }
    }
    out
}

/// Every `.pkl` record of a zip archive, or of each archive when several
/// are stored back to back. Records are read whole, each at most
/// `max_pickle_bytes`.
fn scan_zip<R: ReadAt + ?Sized>(
    source: &R,
    options: &LoadOptions,
    scan: &mut FileScan,
) -> Result<()> {
    let limits = ZipLimits {
        max_entries: options.max_records,
        max_record_to_vec: options.max_pickle_bytes,
    };
    // Every entry, those whose names repeat too: PyTorch loads such an
    // archive (the first of each name), and a second `data.pkl` must not
    // hide from a scan.
    match ZipReader::new_with_duplicates(source, &limits) {
        Ok(zip) => scan_archive(&zip, options, scan),
        Err(e) => {
            // Archives back to back (a distributed checkpoint's `.distcp`
            // holds one `torch.save` output per item): each ends with its own
            // end record.
            let mut found = false;
            let mut start = 0;
            for end in archive_ends(source)? {
                let part = Part {
                    source,
                    start,
                    len: end - start,
                };
                if let Ok(zip) = ZipReader::new_with_duplicates(&part, &limits) {
                    found = true;
                    scan_archive(&zip, options, scan)?;
                }
                start = end;
            }
            if found {
                Ok(())
            } else {
                Err(e.into())
            }
        }
    }
}

/// Bytes `start..start + len` of a source.
struct Part<'a, R: ?Sized> {
    source: &'a R,
    start: u64,
    len: u64,
}

impl<R: ReadAt + ?Sized> ReadAt for Part<'_, R> {
    fn len(&self) -> u64 {
        self.len
    }

    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        match offset.checked_add(buf.len() as u64) {
            Some(end) if end <= self.len => self.source.read_exact_at(buf, self.start + offset),
            _ => Err(std::io::ErrorKind::UnexpectedEof.into()),
        }
    }
}

/// The end of each end-of-central-directory record in `source` (its
/// signature, 18 more bytes and its comment), in file order, read in chunks.
fn archive_ends<R: ReadAt + ?Sized>(source: &R) -> Result<Vec<u64>> {
    const SIG: &[u8] = b"PK\x05\x06";
    const CHUNK: u64 = 1 << 20;
    let len = source.len();
    let mut ends = Vec::new();
    let mut pos = 0u64;
    while pos < len {
        let n = CHUNK.min(len - pos);
        let mut buf = vec![0u8; n as usize];
        source.read_exact_at(&mut buf, pos)?;
        for i in buf
            .windows(4)
            .enumerate()
            .filter(|(_, w)| *w == SIG)
            .map(|(i, _)| i)
        {
            let at = pos + i as u64;
            let mut comment = [0u8; 2];
            if at + 22 <= len && source.read_exact_at(&mut comment, at + 20).is_ok() {
                let end = at + 22 + u64::from(u16::from_le_bytes(comment));
                if end <= len && ends.last().is_none_or(|&e| e <= at) {
                    ends.push(end);
                }
            }
        }
        // Overlap by three bytes so a signature across chunks is found.
        pos += if n == CHUNK { n - 3 } else { n };
    }
    Ok(ends)
}

/// Every `.pkl` record of an opened archive; every record is scanned even
/// after one fails.
fn scan_archive<R: ReadAt>(
    zip: &ZipReader<R>,
    options: &LoadOptions,
    scan: &mut FileScan,
) -> Result<()> {
    let mut first_error = None;
    for entry in zip.entries().iter().filter(|e| e.name.ends_with(".pkl")) {
        let read = zip.read_to_vec(entry).map_err(|e| Error::InRecord {
            name: entry.name.clone(),
            source: Box::new(Error::Zip(e)),
        });
        let added = read.and_then(|data| {
            let d = disassemble(&data, &options.pickle_limits);
            add(scan, entry.name.clone(), d)
        });
        if let Err(e) = added {
            first_error.get_or_insert(e);
        }
    }
    first_error.map_or(Ok(()), Err)
}

/// The sections of the legacy stream.
const LEGACY_SECTIONS: [&str; 5] = [
    "magic number",
    "protocol version",
    "sys_info",
    "object",
    "storage keys",
];

/// The pickles at the start of a stream, back to back: the legacy format's
/// five (`legacy`: each must be whole), or up to five of a bare pickle file
/// (the first must be whole; the others are read while they are pickles).
fn scan_stream<R: ReadAt + ?Sized>(
    source: &R,
    options: &LoadOptions,
    scan: &mut FileScan,
    legacy: bool,
) -> Result<()> {
    let len = source.len();
    let mut pos = 0u64;
    for (i, section) in LEGACY_SECTIONS.iter().enumerate() {
        if pos >= len && (i > 0 && !legacy) {
            break;
        }
        let d = read_pickle(source, pos, options)?;
        let failed = d.error.is_some();
        if failed && i > 0 && !legacy {
            break;
        }
        pos += d.consumed as u64;
        let record = match (legacy, i) {
            (true, _) => (*section).to_owned(),
            (false, 0) => "pickle".to_owned(),
            (false, i) => format!("pickle {}", i + 1),
        };
        add(scan, record, d)?;
    }
    Ok(())
}

/// Disassembles the pickle at `pos`, reading a window of the file that
/// grows (to at most `max_pickle_bytes`) while the pickle runs past it.
fn read_pickle<R: ReadAt + ?Sized>(
    source: &R,
    pos: u64,
    options: &LoadOptions,
) -> Result<Disassembly> {
    let left = source.len().saturating_sub(pos);
    let max = left.min(options.max_pickle_bytes);
    let mut n: u64 = 1 << 16;
    loop {
        let n_now = n.min(max);
        let mut buf = vec![0u8; usize::try_from(n_now).unwrap_or(usize::MAX)];
        source.read_exact_at(&mut buf, pos)?;
        let d = disassemble(&buf, &options.pickle_limits);
        let short = matches!(
            d.error,
            Some(
                PickleError::Truncated { .. }
                    | PickleError::NoStop { .. }
                    | PickleError::UnterminatedLine { .. }
            )
        );
        if !short || n_now >= max {
            return Ok(d);
        }
        n = n.saturating_mul(4);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts() {
        assert_eq!(
            verdict("torch._utils", "_rebuild_tensor_v2"),
            Verdict::Allowed
        );
        assert_eq!(verdict("builtins", "set"), Verdict::Allowed);
        assert_eq!(verdict("torch.cuda", "FloatStorage"), Verdict::Allowed);
        assert_eq!(verdict("torch", "bfloat16"), Verdict::Allowed);
        assert_eq!(
            verdict("numpy.core.multiarray", "_reconstruct"),
            Verdict::Decoded
        );
        assert_eq!(verdict("argparse", "Namespace"), Verdict::Decoded);
        assert_eq!(
            verdict("torch.tensor", "_rebuild_from_type_v2"),
            Verdict::Decoded
        );
        assert_eq!(verdict("os", "system"), Verdict::Unsafe);
        assert_eq!(verdict("builtins", "eval"), Verdict::Unsafe);
        assert_eq!(verdict("copyreg", "_reconstructor"), Verdict::Unsafe);
        assert_eq!(
            verdict("torch.nn.modules.linear", "Linear"),
            Verdict::Unsafe
        );
    }

    #[test]
    fn every_allowed_name_is_allowed() {
        for full in allowed_names() {
            let (m, n) = full.rsplit_once('.').unwrap();
            assert_eq!(verdict(m, n), Verdict::Allowed, "{full}");
        }
        assert!(TORCH_ALLOWED.windows(2).all(|w| w[0] < w[1]));
    }

    /// Where the allowlist stowage loads with differs from PyTorch's: names
    /// PyTorch accepts that stowage refuses, and names stowage reads that
    /// PyTorch refuses (`decoded` for a scan). A change to either shows here.
    #[test]
    fn allowlist_differences_from_pytorch() {
        let refused: Vec<_> = allowed_names()
            .iter()
            .filter(|k| {
                let (m, n) = k.rsplit_once('.').unwrap();
                allowlist::resolve(m, n).is_err()
            })
            .collect();
        // `torch.bcomplex32` names a dtype stowage's dtype table lacks.
        assert_eq!(refused, [&"torch.bcomplex32"]);
        for (m, n) in [
            ("torch._utils", "_rebuild_nested_tensor"),
            ("torch.cuda", "QInt8Storage"),
            ("torch.tensor", "_rebuild_from_type_v2"),
        ] {
            assert!(allowlist::resolve(m, n).is_ok());
            assert_eq!(verdict(m, n), Verdict::Decoded, "{m}.{n}");
        }
    }

    #[test]
    fn bare_pickles_back_to_back() {
        // A protocol 0 pickle naming os.system, then a second one naming
        // __builtin__.set (mapped to builtins.set), then junk.
        let data = b"cos\nsystem\n(S'ls'\ntR.c__builtin__\nset\n.\xff\xff";
        let s = scan_bytes(data, &LoadOptions::default());
        assert!(s.error.is_none(), "{:?}", s.error);
        assert_eq!(s.kind, Some(ScanKind::Pickle));
        assert_eq!(s.pickles.len(), 2);
        let names: Vec<_> = s
            .globals
            .iter()
            .map(|g| (g.module.as_str(), g.name.as_str(), g.verdict))
            .collect();
        assert_eq!(
            names,
            [
                ("os", "system", Verdict::Unsafe),
                ("builtins", "set", Verdict::Allowed)
            ]
        );
        assert!(s.is_unsafe());
        assert_eq!(
            s.pickles[0].opcodes.iter().find(|o| o.0 == "REDUCE"),
            Some(&("REDUCE", 1))
        );
    }

    #[test]
    fn not_a_pickle_is_an_error() {
        let s = scan_bytes(b"hello world\n", &LoadOptions::default());
        assert!(matches!(s.error, Some(Error::NotACheckpoint { .. })));
        assert!(s.kind.is_none());
        let s = scan_bytes(b"", &LoadOptions::default());
        assert!(s.error.is_some());
    }

    #[test]
    fn a_truncated_pickle_keeps_what_it_named() {
        let s = scan_bytes(
            b"\x80\x02cos\nsystem\nq\x00X\xff\xff",
            &LoadOptions::default(),
        );
        assert!(s.error.is_some());
        assert_eq!(s.globals.len(), 1);
        assert!(s.is_unsafe());
    }
}
