//! Scanning checkpoints for the globals their pickles name, without loading
//! them: what `picklescan` and `modelscan` do, with the static disassembler
//! of [`pickle::disasm`](crate::checkpoint::pickle::disasm) instead of pattern matching.
//!
//! Every pickle in a file is read, wherever it is, judged by content and
//! never by name:
//! - a zip archive, of any layout (a torch save, a TorchScript archive, a
//!   `.npz`, a zip of anything): every member that holds a pickle, whatever
//!   its name, and the members of archives inside it (`archive.rs`);
//! - the legacy format: its five pickles (magic number, protocol version,
//!   `sys_info`, the object, the storage keys);
//! - a `.npy` file: the pickle of an object array (`npy.rs`); an array of
//!   plain elements holds none;
//! - any other file that is a pickle (`pickle.dump` output of any protocol):
//!   the pickles back to back, to the end of the file (`stream.rs`).
//!
//! Each global is named as Python 3 would import it (the Python 2 names are
//! mapped as CPython's unpickler maps them; PyTorch's static
//! `get_globals_in_pkl` uses a shorter table of its own, so it may keep a
//! Python 2 name, such as `commands.Popen` for `subprocess.Popen`;
//! [`pickle::compat`](crate::checkpoint::pickle::compat)) and gets a [`Verdict`]:
//! [`Allowed`](Verdict::Allowed) by PyTorch's `weights_only` loader,
//! [`Decoded`](Verdict::Decoded) as data by stowage
//! ([`decoded`]), or [`Unsafe`](Verdict::Unsafe): under
//! `torch.load(weights_only=False)` it would be imported and could run code.
//! An unsafe global also gets a [`Risk`]: [`Code`](Risk::Code) when it runs
//! commands or code, [`Import`](Risk::Import) when it is some package's
//! class or function. A `STACK_GLOBAL` whose operands are not string
//! constants, an extension code, and frames that disagree with the opcodes
//! are unsafe code as such (named `<dynamic>.STACK_GLOBAL`,
//! `<extension>.<code>` and `<malformed>.FRAME`).
//!
//! Folders are scanned recursively, following symbolic links but entering
//! each folder once (so a link loop ends). In a folder, a file is listed
//! when its content is a checkpoint, a `.npy` or a pickle: a zip archive, the
//! legacy stream, a safetensors file, a `.npy`, or a stream whose first
//! pickle reads to its `STOP`, or names a global with Python names and calls
//! something before it breaks off (as a cut malicious pickle does), or
//! starts with `PROTO` and names a global. Other files (text, images, JSON)
//! are left out. A file that cannot be opened or read is always listed,
//! with its error. A file named directly is always listed, with an error
//! when it is none of these. Memory stays bounded by [`LoadOptions`]'
//! `max_pickle_bytes` (the largest pickle read, and the compressed members
//! held at once), `max_records` (zip members looked at, nested archives
//! included; pickles back to back) and `pickle_limits`.

mod archive;
mod json;
mod npy;
mod risk;
mod sarif;
mod stdlib_modules;
mod stream;
mod torch_allowed;

use crate::error::FormatError;
use std::path::{Path, PathBuf};

use self::stream::Trust;
use self::torch_allowed::TORCH_ALLOWED;
use crate::checkpoint::format::torch_legacy::is_legacy;
use crate::checkpoint::globals::allowlist;
use crate::checkpoint::globals::decoded;
use crate::checkpoint::options::LoadOptions;
use crate::checkpoint::pickle::{disassemble, Disassembly, PickleError};
use crate::io::ReadAt;
use crate::Error;

pub use self::risk::Risk;

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
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Verdict::Allowed => "allowed",
            Verdict::Decoded => "decoded",
            Verdict::Unsafe => "unsafe",
        }
    }
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
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
    /// For an [`Unsafe`](Verdict::Unsafe) global, how dangerous it is.
    pub risk: Option<Risk>,
    /// How many times it is named.
    pub count: u64,
    /// Where it is first named: the byte offset of the opcode in the zip
    /// member that holds its pickle, or in the file when that is in no zip
    /// (of a file's globals together, in the first pickle that names it).
    pub offset: u64,
}

impl GlobalUse {
    fn new(module: String, name: String, verdict: Verdict, count: u64, offset: u64) -> GlobalUse {
        let risk = (verdict == Verdict::Unsafe).then(|| risk::risk(&module, &name));
        GlobalUse {
            module,
            name,
            verdict,
            risk,
            count,
            offset,
        }
    }
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
    /// Where the bytes its globals' [`offset`](GlobalUse::offset)s count
    /// from start in the file: 0 outside a zip, the data of a stored zip
    /// member; `None` inside a compressed member.
    pub member_offset: Option<u64>,
}

/// What a file holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ScanKind {
    /// A zip archive laid out as `torch.save` (since 1.6) or TorchScript
    /// lays one out: a root folder holding `data.pkl` or `constants.pkl`.
    TorchZip,
    /// Any other zip archive (a `.npz`, a zip of pickles).
    Zip,
    /// A numpy `.npy` file.
    Npy,
    /// The legacy `torch.save` stream.
    TorchLegacy,
    /// A safetensors file: no pickle at all.
    Safetensors,
    /// A bare pickle stream.
    Pickle,
}

impl ScanKind {
    /// `"torch-zip"`, `"zip"`, `"npy"`, `"torch-legacy"`, `"safetensors"`
    /// or `"pickle"`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ScanKind::TorchZip => "torch-zip",
            ScanKind::Zip => "zip",
            ScanKind::Npy => "npy",
            ScanKind::TorchLegacy => "torch-legacy",
            ScanKind::Safetensors => "safetensors",
            ScanKind::Pickle => "pickle",
        }
    }
}

impl std::fmt::Display for ScanKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
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

    /// Whether any global is unsafe with [`Risk::Code`].
    pub fn runs_code(&self) -> bool {
        self.globals.iter().any(|g| g.risk == Some(Risk::Code))
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

    /// Whether any file names an unsafe global with [`Risk::Code`].
    pub fn runs_code(&self) -> bool {
        self.files.iter().any(FileScan::runs_code)
    }

    /// Whether any file (or part of one) could not be read.
    pub fn has_errors(&self) -> bool {
        self.files.iter().any(|f| f.error.is_some())
    }
}

/// The verdict on the global `module.name`, named as Python 3 imports it
/// (apply [`compat::fix_import`](crate::checkpoint::pickle::compat::fix_import) to a name as written first).
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

/// Scans a file, or a folder recursively, with the limits of `options`
/// (`pickle_limits`, `max_pickle_bytes`, `max_records`). A path that cannot
/// be read is listed as a file with an error.
pub fn scan_path(path: &Path, options: &LoadOptions) -> ScanReport {
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
    let mut scan = match crate::io::open_regular(path) {
        Ok(file) => scan_source(&file, options, named)?,
        Err(e) => FileScan::failed(e),
    };
    scan.path = path.to_owned();
    Some(scan)
}

/// Scans a checkpoint or pickle held in memory (its [`FileScan::path`] is
/// empty).
pub fn scan_bytes(bytes: &[u8], options: &LoadOptions) -> FileScan {
    // A named source is always listed; the fallback is never taken.
    scan_source(&bytes, options, true).unwrap_or_else(|| {
        FileScan::failed(Error::Format(FormatError::NotACheckpoint {
            detail: "neither a checkpoint nor a pickle".into(),
        }))
    })
}

impl FileScan {
    fn failed(error: Error) -> FileScan {
        FileScan {
            path: PathBuf::new(),
            kind: None,
            pickles: Vec::new(),
            globals: Vec::new(),
            error: Some(error),
        }
    }
}

/// What some bytes hold, told by their first bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Content {
    Zip,
    Legacy,
    Npy,
    Safetensors,
    Pickle,
}

impl Content {
    /// The format whose magic `head` starts with; `None` for no magic (a
    /// pickle, or anything else). A safetensors header is only taken for
    /// one by [`Content::confirm`].
    fn of(head: &[u8]) -> Option<Content> {
        if head.starts_with(b"PK\x03\x04") {
            Some(Content::Zip)
        } else if is_legacy(head) {
            Some(Content::Legacy)
        } else if head.starts_with(npy::MAGIC) {
            Some(Content::Npy)
        } else if head.len() >= 9
            && head[8] == b'{'
            && head[..8].iter().rev().take(3).all(|&b| b == 0)
        {
            Some(Content::Safetensors)
        } else {
            None
        }
    }

    /// `self`, or `None` for a safetensors look-alike whose header is not a
    /// JSON object that fits in `source`: a pickle can start with eight
    /// bytes that read as a small length and a `{` (`EMPTY_DICT`), and must
    /// not pass for a file without pickles.
    fn confirm(self, source: &dyn ReadAt) -> Option<Content> {
        if self != Content::Safetensors {
            return Some(self);
        }
        const MAX_HEADER: u64 = 100 << 20;
        let mut n = [0u8; 8];
        source.read_exact_at(&mut n, 0).ok()?;
        let n = u64::from_le_bytes(n);
        if n > MAX_HEADER || n.checked_add(8)? > source.len() {
            return None;
        }
        let mut header = vec![0u8; n as usize];
        source.read_exact_at(&mut header, 8).ok()?;
        let json: serde_json::Value = serde_json::from_slice(&header).ok()?;
        json.is_object().then_some(self)
    }
}

/// One file's scan in progress, with what bounds it.
struct Scanner<'o> {
    options: &'o LoadOptions,
    scan: FileScan,
    /// Zip members looked at, nested archives included.
    members: usize,
    /// Bytes of compressed members held in memory to be scanned.
    held: u64,
    /// The top archive is laid out as a torch save.
    torch_layout: bool,
    /// Where the bytes being read start in the file (`None` inside a
    /// compressed member).
    base: Option<u64>,
}

impl Scanner<'_> {
    fn disassemble(&self, data: &[u8]) -> Disassembly {
        disassemble(data, &self.options.pickle_limits)
    }
}

/// Scans the file `source` holds; `named`: asked for by name (not found in
/// a folder). `None` for a file found in a folder that holds no pickle.
fn scan_source(source: &dyn ReadAt, options: &LoadOptions, named: bool) -> Option<FileScan> {
    let mut s = Scanner {
        options,
        scan: FileScan {
            path: PathBuf::new(),
            kind: None,
            pickles: Vec::new(),
            globals: Vec::new(),
            error: None,
        },
        members: 0,
        held: 0,
        torch_layout: false,
        base: Some(0),
    };
    let mut head = [0u8; 16];
    let n = source.len().min(16) as usize;
    if let Err(e) = source.read_exact_at(&mut head[..n], 0) {
        return Some(FileScan::failed(Error::Io(e)));
    }
    let content = Content::of(&head[..n]).and_then(|c| c.confirm(source));
    let result = match content {
        Some(Content::Zip) => {
            let r = s.scan_zip(source, "", 0);
            s.scan.kind = Some(if s.torch_layout {
                ScanKind::TorchZip
            } else {
                ScanKind::Zip
            });
            r
        }
        Some(Content::Legacy) => {
            s.scan.kind = Some(ScanKind::TorchLegacy);
            s.scan_legacy(source, "")
        }
        Some(Content::Npy) => {
            s.scan.kind = Some(ScanKind::Npy);
            npy::pickle_offset(source).and_then(|at| match at {
                Some(at) => s.scan_pickles(source, at, Trust::Pickle, &pickle_name, None),
                None => Ok(()),
            })
        }
        Some(Content::Safetensors) => {
            s.scan.kind = Some(ScanKind::Safetensors);
            Ok(())
        }
        Some(Content::Pickle) | None => {
            let proto = n >= 2 && head[0] == 0x80 && head[1] <= 5;
            let trust = if named || proto {
                Trust::Pickle
            } else {
                Trust::Maybe
            };
            match s.read_pickle(source, 0, trust) {
                Err(e) => Err(e),
                Ok(first) => {
                    // Taken for a pickle when it is whole, or looks like one, or
                    // starts with `PROTO` and names a global, or was named and
                    // names a Python global (bytes that name `mod.\xff` are no
                    // pickle).
                    let whole = first.error.is_none();
                    if whole
                        || stream::looks_like_a_pickle(&first)
                        || (proto && !first.globals.is_empty())
                        || (named && stream::names_a_python_global(&first))
                    {
                        s.scan.kind = Some(ScanKind::Pickle);
                        s.scan_pickles(source, 0, Trust::Pickle, &pickle_name, Some(first))
                    } else if let (true, Some(e @ PickleError::LimitExceeded { .. })) =
                        (named || proto, &first.error)
                    {
                        // A pickle past a limit before it named anything.
                        Err(Error::Format(FormatError::Pickle(e.clone())))
                    } else if named {
                        Err(Error::Format(FormatError::NotACheckpoint {
                            detail: not_a_pickle(&first),
                        }))
                    } else {
                        return None;
                    }
                }
            }
        }
    };
    let mut scan = s.scan;
    if let Err(e) = result {
        scan.error = Some(e);
    }
    if scan.kind == Some(ScanKind::Pickle) {
        judge_dcp_metadata(&mut scan);
    }
    scan.globals = merge(scan.pickles.iter().flat_map(|p| p.globals.iter()));
    Some(scan)
}

/// A distributed checkpoint's `.metadata` is judged by DCP's own data
/// classes: a bare pickle that names `Metadata` and, outside the allowlist,
/// only those classes is what stowage's DCP reader reads as data, so they
/// are [`Verdict::Decoded`] there (as in no other file).
fn judge_dcp_metadata(scan: &mut FileScan) {
    use crate::checkpoint::format::dcp::metadata::is_metadata_class;
    let uses = || scan.pickles.iter().flat_map(|p| p.globals.iter());
    let names_metadata =
        uses().any(|g| g.module == "torch.distributed.checkpoint.metadata" && g.name == "Metadata");
    let only_metadata =
        uses().all(|g| g.verdict != Verdict::Unsafe || is_metadata_class(&g.module, &g.name));
    if !(names_metadata && only_metadata) {
        return;
    }
    for g in scan.pickles.iter_mut().flat_map(|p| p.globals.iter_mut()) {
        if g.verdict == Verdict::Unsafe {
            g.verdict = Verdict::Decoded;
            g.risk = None;
        }
    }
}

/// Why bytes with no magic are not a pickle: where their walk as one
/// broke, or the name they would give a global.
fn not_a_pickle(d: &Disassembly) -> String {
    use crate::checkpoint::pickle::GlobalName;
    let named = d.globals.iter().find_map(|(g, _)| match g {
        GlobalName::Static { module, name } => Some(format!("{module}.{name}")),
        _ => None,
    });
    match (named, &d.error) {
        (Some(global), _) => format!(
            "not a pickle either: its first bytes would name `{}`, which is no Python name",
            global.escape_debug()
        ),
        (None, Some(e)) => format!("not a pickle either: {e}"),
        (None, None) => "not a pickle either".to_owned(),
    }
}

/// The records of a bare pickle file: `pickle`, `pickle 2`, …
fn pickle_name(i: usize) -> String {
    match i {
        1 => "pickle".to_owned(),
        i => format!("pickle {i}"),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::FormatError;

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
    fn a_pickle_made_to_look_like_safetensors_is_read() {
        // LONG1 of 7 bytes whose last is `{` (so the first 8 bytes read as
        // a small length and byte 8 opens a JSON header), POP, then a call
        // of os.system.
        let mut data = b"\x8a\x07\x00\x00\x00\x00\x00\x00{0".to_vec();
        data.extend_from_slice(b"cos\nsystem\n(S'ls'\ntR.");
        let s = scan_bytes(&data, &LoadOptions::default());
        assert_eq!(s.kind, Some(ScanKind::Pickle));
        assert!(s.runs_code(), "{:?}", s.globals);
        // The same as a member of a zip.
        let mut zip = crate::checkpoint::zip::ZipWriter::new(Vec::new(), "x", 64);
        zip.write_record("weights.bin", &data).unwrap();
        let bytes = zip.finish().unwrap();
        let s = scan_bytes(&bytes, &LoadOptions::default());
        assert!(s.runs_code(), "{:?} {:?}", s.globals, s.error);
    }

    #[test]
    fn not_a_pickle_is_an_error() {
        let s = scan_bytes(b"hello world\n", &LoadOptions::default());
        assert!(matches!(
            s.error,
            Some(Error::Format(FormatError::NotACheckpoint { .. }))
        ));
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
