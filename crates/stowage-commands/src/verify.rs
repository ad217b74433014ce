//! `verify`: everything a loader relies on, checked without trusting the
//! file, as the CLI contract specifies for `stowage verify`
//! (`docs/cli-contract.md`): [`verify`] gives a [`Verification`], the
//! findings and what was checked, which writes the command's lines.
//!
//! For a torch zip archive: the archive structure (end records, central
//! directory, local headers), each record's CRC-32 and deflate stream, then
//! a full load, which checks that every `data/<key>` the pickle names is
//! present with the size it declares, that each tensor lies inside its
//! storage and that the pickle names only allowed globals. Records that
//! nothing references are noted. For the legacy format and safetensors: a
//! full load.
//!
//! A folder (local, or a URL ending in `/`) is a sharded set (each shard
//! verified as a file, then the index against the shards), a distributed
//! checkpoint (its metadata, every item's CRC-32s where the item is a torch
//! archive as stored, then every item read and every tensor assembled), or
//! the ranks' files of its Hugging Face layout (each verified
//! as a file, then their pieces checked to tile each tensor).
//!
//! Output, one line each: `FILE: <defect>`, `FILE: warning: …` (accepted by
//! PyTorch, worth knowing: a CRC-32 not recorded, a misaligned record),
//! `FILE: note: …` (harmless: a record never referenced); then
//! `checked: …` (what was checked: files, records' CRC-32s, DCP items,
//! tensors and storages); then `ok` or
//! `N defects`. The command line exits 0 without defects, 1 with, 2 when
//! the file cannot be opened or read at all ([`CommandError`]).

use std::collections::HashSet;
use std::fmt;
use std::io::{self, Write};
use std::path::Path;
use stowage::ErrorContext;

use stowage::checkpoint::{detect_format, Format, Source};
use stowage::io::{Location, ReadAt, ReadCost, Window};
use stowage::{Checkpoint, Error};
use stowage::{LoadMode, LoadOptions};
use stowage_zip::{Entry, ZipError, ZipLimits, ZipReader};

use crate::read_ahead::ReadAhead;
use crate::{CommandError, Context};

/// Records `torch.save` writes beside the storages, under the root folder.
const KNOWN_RECORDS: [&str; 7] = [
    "data.pkl",
    "byteorder",
    "version",
    ".format_version",
    ".storage_alignment",
    ".data/version",
    ".data/serialization_id",
];

/// What `verify` finds, as it goes.
struct Report<'c> {
    cx: &'c Context,
    findings: Vec<Finding>,
    /// How the checks load (the global options applied).
    options: LoadOptions,
    file: String,
    defects: usize,
    checked: Checked,
}

/// What `verify` checked, said on the line before its verdict: a bare `ok`
/// would not tell a CRC-checked archive from a file barely opened.
#[derive(Debug, Default)]
struct Checked {
    /// Files opened and checked on their own (a set's shards, a DCP's data files).
    files: usize,
    /// Zip records whose structure and CRC-32 were checked.
    records: usize,
    /// DCP items read, and of those, decoded through a stream transform.
    items: usize,
    decoded: usize,
    /// A sharded set's index, checked against this many shards.
    index_of: Option<usize>,
    /// What the last full load found, when one succeeded: tensors inside
    /// their storages.
    loaded: Option<(usize, usize)>,
}

impl Checked {
    /// `checked: 1 file, 9 records' CRC-32s, 5 tensors in 3 storages`.
    fn line(&self) -> String {
        let n = |count: usize, one: &str, many: &str| {
            format!("{count} {}", if count == 1 { one } else { many })
        };
        let mut parts = vec![n(self.files, "file", "files")];
        if let Some(shards) = self.index_of {
            parts.push(format!(
                "the index against {}",
                n(shards, "shard", "shards")
            ));
        }
        if self.records > 0 {
            parts.push(format!("{}' CRC-32s", n(self.records, "record", "records")));
        }
        if self.items > 0 {
            let mut items = n(self.items, "DCP item", "DCP items");
            if self.decoded > 0 {
                items += &format!(" ({} through zstd)", self.decoded);
            }
            parts.push(items);
        }
        if let Some((tensors, storages)) = self.loaded {
            parts.push(format!(
                "{} in {}",
                n(tensors, "tensor", "tensors"),
                n(storages, "storage", "storages")
            ));
        }
        format!("checked: {}", parts.join(", "))
    }

    /// A load's tensors and storages, as the last full load found them.
    fn loaded(&mut self, ckpt: &Checkpoint) {
        self.loaded = Some((ckpt.tensors().map_or(0, |t| t.len()), ckpt.storages().len()));
    }
}

impl Report<'_> {
    fn find(&mut self, severity: Severity, what: &str) {
        self.findings.push(Finding {
            file: self.file.clone(),
            severity,
            message: what.to_owned(),
        });
    }
    fn defect(&mut self, what: &str) {
        self.defects += 1;
        self.find(Severity::Defect, what);
    }
    fn warning(&mut self, what: &str) {
        self.find(Severity::Warning, what);
    }
    fn note(&mut self, what: &str) {
        self.find(Severity::Note, what);
    }
}

/// How much a [`Finding`] matters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Severity {
    /// Something a loader relies on is wrong: the verdict is "no".
    Defect,
    /// Accepted by PyTorch, worth knowing (a CRC-32 not recorded, a
    /// misaligned record).
    Warning,
    /// Harmless (a record never referenced).
    Note,
}

/// One thing [`verify`] found, in a file.
#[derive(Clone, Debug)]
pub struct Finding {
    file: String,
    severity: Severity,
    message: String,
}

impl Finding {
    /// The file (or the folder) it is in, as given or found.
    pub fn file(&self) -> &str {
        &self.file
    }

    /// How much it matters.
    pub fn severity(&self) -> Severity {
        self.severity
    }

    /// What was found.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for Finding {
    /// The line `stowage verify` prints: `FILE: <defect>`, `FILE: warning:
    /// …` or `FILE: note: …`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (file, what) = (&self.file, &self.message);
        match self.severity {
            Severity::Defect => write!(f, "{file}: {what}"),
            Severity::Warning => write!(f, "{file}: warning: {what}"),
            Severity::Note => write!(f, "{file}: note: {what}"),
        }
    }
}

/// What [`verify`] found and checked.
#[derive(Debug)]
pub struct Verification {
    findings: Vec<Finding>,
    defects: usize,
    checked: String,
}

impl Verification {
    /// Whether no defect was found.
    pub fn is_ok(&self) -> bool {
        self.defects == 0
    }

    /// The number of defects.
    pub fn defects(&self) -> usize {
        self.defects
    }

    /// Everything found, in the order found.
    pub fn findings(&self) -> &[Finding] {
        &self.findings
    }

    /// What was checked, as its line says: `checked: 1 file, 9 records'
    /// CRC-32s, 5 tensors in 3 storages`.
    pub fn checked(&self) -> &str {
        &self.checked
    }

    /// Writes the lines `stowage verify` prints: each finding, the
    /// `checked:` line, then `ok`, `1 defect` or `N defects`.
    ///
    /// # Errors
    /// A failure to write.
    pub fn write_text(&self, out: &mut dyn Write) -> io::Result<()> {
        for finding in &self.findings {
            writeln!(out, "{finding}")?;
        }
        writeln!(out, "{}", self.checked)?;
        match self.defects {
            0 => writeln!(out, "ok"),
            1 => writeln!(out, "1 defect"),
            n => writeln!(out, "{n} defects"),
        }
    }
}

/// Verifies the checkpoint at `src`: a file, a folder (local, or a URL
/// ending in `/`) or a URL.
///
/// ```
/// use std::path::Path;
/// use stowage_commands::verify::verify;
/// use stowage_commands::Context;
///
/// let v = verify(Path::new("../stowage/tests/fixtures/state_dict.pt"), &Context::default())?;
/// assert!(v.is_ok(), "{:?}", v.findings());
/// assert!(v.checked().starts_with("checked: 1 file")); // and its records' CRC-32s
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// # Errors
/// [`CommandError::Input`] when it cannot be opened or read at all (a
/// defect found in what was read is a finding, not an error).
pub fn verify(src: &Path, cx: &Context) -> Result<Verification, CommandError> {
    // A folder: a local one, or a URL ending in `/`. Anything else, or a
    // path that cannot be read, is checked as a file (`open` names the error).
    let source = stowage::checkpoint::resolve(src, &cx.load_options())?;
    let mut report = Report {
        cx,
        findings: Vec::new(),
        options: cx.load_options(),
        file: src.display().to_string(),
        defects: 0,
        checked: Checked::default(),
    };
    if source.is_folder() {
        verify_folder(src, &source, &mut report)?;
    } else {
        verify_file(src, source.location(), &mut report)?;
    }
    Ok(Verification {
        checked: report.checked.line(),
        findings: report.findings,
        defects: report.defects,
    })
}

/// Checks the content of the checkpoint at `src` against the manifest at
/// `manifest` (`stowage verify SRC --manifest FILE`): its manifest is
/// computed (each byte read once, hashed on every core) and every tensor
/// changed, missing or extra is a defect, as are values that differ.
///
/// # Errors
/// [`CommandError::Input`]: `src` or `manifest` cannot be read;
/// [`CommandError::Usage`]: `manifest` is not a manifest.
pub fn verify_manifest(
    src: &Path,
    manifest: &Path,
    cx: &Context,
) -> Result<Verification, CommandError> {
    let text = std::fs::read_to_string(manifest).map_err(|e| unreadable(manifest, e))?;
    let expected = crate::manifest::Manifest::from_json(&text)?;
    let found = crate::manifest::manifest(src, cx, &Default::default())?;
    let file = src.display().to_string();
    let findings: Vec<Finding> = expected
        .differences(&found)
        .into_iter()
        .map(|message| Finding {
            file: file.clone(),
            severity: Severity::Defect,
            message,
        })
        .collect();
    let n = found.tensors().len();
    Ok(Verification {
        defects: findings.len(),
        findings,
        checked: format!(
            "checked: {n} {}' content against {}",
            if n == 1 { "tensor" } else { "tensors" },
            manifest.display()
        ),
    })
}

fn unreadable(path: &Path, e: io::Error) -> CommandError {
    CommandError::input(Error::Io(e).in_file(path.to_owned()))
}

/// One checkpoint file.
fn verify_file(path: &Path, here: &Location, report: &mut Report<'_>) -> Result<(), CommandError> {
    let source = here.open().map_err(CommandError::input)?;
    verify_source(path, Box::new(source), report)
}

/// One checkpoint file, opened.
fn verify_source(
    path: &Path,
    source: Box<dyn ReadAt>,
    report: &mut Report<'_>,
) -> Result<(), CommandError> {
    report.checked.files += 1;
    let format = detect_format(&source).ok();
    if let Some(Format::TorchZip) = format {
        // Its records are checked in file order: local reads a block at a
        // time (an object store's are requests, each as large as asked).
        let source: Box<dyn ReadAt> = match source.read_cost() {
            ReadCost::Local => Box::new(ReadAhead::new(source)),
            _ => source,
        };
        verify_zip(path, source, report)?;
    } else {
        let bar = report
            .cx
            .progress()
            .spinner(format!("checking {}", path.display()));
        let loaded = load(path, format, &report.options);
        bar.finish_and_clear();
        match loaded {
            Ok(ckpt) => report.checked.loaded(&ckpt),
            Err(e) => report.defect(&e),
        }
    }
    Ok(())
}

/// A folder, local or named by URL, as resolved ([`Source::folder`]):
/// a sharded set (each shard checked as a file, then the set's index against
/// the shards), a distributed checkpoint (the metadata, then every item read
/// and every tensor assembled from its chunks), its Hugging Face layout
/// (each rank's file checked, then the tensors assembled), or a folder
/// holding one checkpoint file.
fn verify_folder(dir: &Path, source: &Source, report: &mut Report<'_>) -> Result<(), CommandError> {
    use stowage::checkpoint::{sharded, Folder};
    let options = report.options.clone();
    let Some(folder) = source.folder() else {
        // A folder resolves to the checkpoint it holds, or says why not.
        return Err(unreadable(dir, io::Error::other("not a folder")));
    };
    let mut shards: Vec<Location> = folder.files().to_vec();
    if let Folder::Sharded(index) = &folder {
        let text = index
            .read_all(stowage::Limit::IndexBytes, sharded::MAX_INDEX_BYTES)
            .map_err(CommandError::input)?;
        match sharded::ShardIndex::parse(&String::from_utf8_lossy(&text)) {
            Ok(parsed) => {
                let parent = index.parent();
                shards = parsed.files().iter().map(|f| parent.join(f)).collect();
            }
            Err(e) => {
                report.defect(&format!("{index}: {}", stowage::one_line(&e)));
                return Ok(());
            }
        }
    }
    if let Folder::Sharded(_) = &folder {
        report.checked.index_of = Some(shards.len());
    }
    let folder_name = std::mem::take(&mut report.file);
    // The names of the files found defective, so that the folder's load
    // stopping at one of them is not counted again, nor blamed on the folder.
    let mut defective: Vec<String> = Vec::new();
    for shard in &shards {
        report.file = shard.to_string();
        let before = report.defects;
        match shard.open() {
            Ok(source) => verify_source(&shard.path(), Box::new(source), report)?,
            Err(e) if is_not_found(&e) => report.defect("missing: the set's index names it"),
            Err(e) => return Err(CommandError::input(e)),
        }
        match shard.file_name() {
            Some(name) if report.defects > before && !name.is_empty() => {
                defective.push(name.to_owned());
            }
            _ => {}
        }
    }
    report.file = folder_name;
    // A distributed checkpoint's `.metadata` is read once, for its items'
    // checks and then for the load (a million chunks take seconds).
    let mut dcp = None;
    if let Folder::Dcp(here) = &folder {
        dcp = verify_dcp_items(dir, here, report, &mut defective)?;
    }
    let bar = report
        .cx
        .progress()
        .spinner(format!("checking {}", dir.display()));
    // The files were read above: the folder loads fake (a set's index
    // against its shards, the ranks' pieces tiling each tensor); a
    // distributed checkpoint's items are only checked by reading them.
    let options = match folder {
        Folder::Dcp(_) => options,
        _ => options.with_mode(LoadMode::Fake),
    };
    let loaded = match dcp {
        Some(dcp) => dcp.into_checkpoint(),
        None => source.load(&options),
    };
    bar.finish_and_clear();
    match loaded {
        Ok(ckpt) => report.checked.loaded(&ckpt),
        Err(e) => {
            let e = stowage::one_line(&e);
            match defective.iter().find(|name| e.contains(name.as_str())) {
                Some(name) => report.note(&format!(
                    "loading the folder stops at {name}, whose defect is listed above: {e}"
                )),
                None => report.defect(&e),
            }
        }
    }
    Ok(())
}

/// The CRC-32s of every item of a distributed checkpoint that is a torch
/// archive: each is a `torch.save` output inside a data file, whose records
/// a load reads without checking them. An untransformed item is checked in
/// place; one stored through a transform (`stream.zstd`) is decoded first,
/// which checks each zstd frame's checksum where the frame has one, and
/// then its archive's CRC-32s, which catch what a frame without a checksum
/// lets through. A safetensors blob has no checksums: the load reads it.
///
/// The data files found defective are added to `defective`. Gives the
/// checkpoint opened, for the load that follows; `None` where it could not
/// be opened (the load reports why).
fn verify_dcp_items(
    dir: &Path,
    here: &Location,
    report: &mut Report<'_>,
    defective: &mut Vec<String>,
) -> Result<Option<stowage::checkpoint::dcp::DcpCheckpoint>, CommandError> {
    use std::collections::HashMap;
    use stowage::checkpoint::dcp::{metadata::ItemKind, DcpCheckpoint};
    let Ok(dcp) = DcpCheckpoint::open(dir, &report.options) else {
        return Ok(None); // the load below reports why
    };
    // Each data file opened once, with its length (`None`: it cannot be).
    type Opened = Option<(Box<dyn ReadAt>, u64)>;
    let mut files: HashMap<&str, Opened> = HashMap::new();
    let mut seen = HashSet::new();
    let mut data_files = HashSet::new();
    for item in &dcp.metadata().items {
        let infos: Vec<_> = match &item.kind {
            ItemKind::Tensor(t) => t.chunks().map(|c| c.storage).collect(),
            ItemKind::Bytes(info) => vec![info.as_ref()],
        };
        for (chunk, info) in infos.into_iter().enumerate() {
            if !seen.insert((info.relative_path, info.offset)) {
                continue;
            }
            data_files.insert(info.relative_path);
            let at = format!(
                "{}: item {} (bytes {}..+{})",
                info.relative_path, item.fqn, info.offset, info.length
            );
            let before = report.defects;
            if !info.transforms.is_empty() {
                match dcp.item_bytes(&item.fqn, chunk) {
                    Ok(bytes) => {
                        report.checked.items += 1;
                        report.checked.decoded += 1;
                        check_item_archive(&bytes[..], true, &at, report)?;
                    }
                    // `at` names the file and the item the error wraps itself in.
                    Err(e) => report.defect(&format!("{at}: {}", stowage::one_line(unwrapped(&e)))),
                }
            } else {
                // Each file opened once, its length asked once (a large
                // job's folder has millions of items).
                let file = files.entry(info.relative_path).or_insert_with(|| {
                    let opened = here.join(info.relative_path).open().ok();
                    opened.map(|f| {
                        let len = f.len();
                        (Box::new(f) as Box<dyn ReadAt>, len)
                    })
                });
                let Some((file, file_len)) = file else {
                    continue; // the load reports it
                };
                report.checked.items += 1;
                let len = info.length.min(file_len.saturating_sub(info.offset));
                // A small item (a chunk of a sharded tensor, a value) in one
                // read, its records checked in memory, rather than a read
                // for each record's header and data; a large one, or one
                // that fails to read so, in place (where the failure is
                // reported).
                let whole = (len <= SMALL_ITEM).then(|| {
                    let mut bytes = vec![0; len as usize];
                    file.read_exact_at(&mut bytes, info.offset).map(|()| bytes)
                });
                match whole {
                    Some(Ok(bytes)) => check_item_archive(&bytes[..], false, &at, report)?,
                    _ => {
                        let part = Window::new(&**file, info.offset, len);
                        check_item_archive(&part, false, &at, report)?;
                    }
                }
            }
            if report.defects > before && !defective.iter().any(|d| d == info.relative_path) {
                defective.push(info.relative_path.to_owned());
            }
        }
    }
    report.checked.files += data_files.len();
    Ok(Some(dcp))
}

/// Items up to this size are read whole before their checksums are checked.
const SMALL_ITEM: u64 = 1 << 20;

/// The CRC-32s of one DCP item's archive (`at`: where it is, for the
/// report). An item that does not begin as a zip is a safetensors blob,
/// which has no checksums, unless it was `decoded` from a transform: only
/// archives are transformed.
fn check_item_archive<R: ReadAt>(
    item: R,
    decoded: bool,
    at: &str,
    report: &mut Report<'_>,
) -> Result<(), CommandError> {
    let mut magic = [0u8; 4];
    if item.read_exact_at(&mut magic, 0).is_err() || &magic != b"PK\x03\x04" {
        if decoded {
            report.defect(&format!("{at}: decoded, it is not a torch.save archive"));
        }
        return Ok(());
    }
    let zip = match ZipReader::new(item, &ZipLimits::default()) {
        Ok(zip) => zip,
        Err(e) => {
            report.defect(&format!("{at}: zip: {}", stowage::one_line(&e)));
            return Ok(());
        }
    };
    for entry in zip.entries() {
        report.checked.records += 1;
        match zip.check_crc(entry) {
            Ok(()) | Err(ZipError::CrcNotRecorded { .. }) => {}
            Err(e) => report.defect(&format!(
                "{at}: record {}: {}",
                zip.name(entry),
                stowage::one_line(&e)
            )),
        }
    }
    Ok(())
}

/// `e` without the file and tensor path it is wrapped in.
fn unwrapped(mut e: &Error) -> &Error {
    while let Error::InFile { source, .. } | Error::AtPath { source, .. } = e {
        e = source;
    }
    e
}

/// Whether opening failed because the file or object does not exist (a
/// store's "not found" comes as [`io::ErrorKind::NotFound`] too).
fn is_not_found(e: &Error) -> bool {
    matches!(e, Error::InFile { source, .. }
        if matches!(&**source, Error::Io(io) if io.kind() == io::ErrorKind::NotFound))
}

/// Loads the file with the library's loader: the checkpoint, or the error as
/// one line without the file name (the report adds it). A torch zip archive
/// or a safetensors file loads fake (every check but reading the storages,
/// whose records the CRC pass reads); a legacy file, one stream, is read whole.
fn load(path: &Path, format: Option<Format>, options: &LoadOptions) -> Result<Checkpoint, String> {
    let options = match format {
        Some(Format::TorchZip | Format::Safetensors) => options.clone().with_mode(LoadMode::Fake),
        _ => options.clone(),
    };
    match stowage::load_with(path, &options) {
        Ok(ckpt) => Ok(ckpt),
        Err(Error::InFile { source, .. }) => Err(stowage::one_line(&*source)),
        Err(e) => Err(stowage::one_line(&e)),
    }
}

/// Notes the records of the archive that nothing references: storages the
/// pickle never names, records `torch.save` does not write, and records
/// outside the archive's root folder, all of which loaders ignore.
fn note_unreferenced<R: ReadAt>(
    zip: &ZipReader<R>,
    root: &str,
    ckpt: &Checkpoint,
    report: &mut Report<'_>,
) {
    let referenced: HashSet<String> = ckpt
        .storages()
        .iter()
        .map(|s| format!("data/{}", s.key))
        .chain(KNOWN_RECORDS.iter().map(|r| r.to_string()))
        .collect();
    for entry in zip.entries() {
        let name = zip.name(entry);
        match name.strip_prefix(root).and_then(|r| r.strip_prefix('/')) {
            Some(record) if referenced.contains(record) => {}
            Some(record) if record.starts_with("data/") => report.note(&format!(
                "record {name} ({} bytes) is never referenced by data.pkl",
                entry.size
            )),
            Some(_) => report.note(&format!(
                "record {name} is not one torch.save writes; loaders ignore it"
            )),
            None => report.note(&format!(
                "record {name} is outside the archive's root folder {root:?}; loaders ignore it"
            )),
        }
    }
}

/// The message of a zip error on `entry`, naming the record and the offset of
/// its data where the error does not already name them.
fn record_error(name: &str, entry: &Entry, offset: Option<u64>, e: &ZipError) -> String {
    let text = stowage::one_line(e);
    let at = offset
        .map(|o| format!(", data at offset {o}"))
        .unwrap_or_default();
    format!(
        "record {name} (local header at offset {}{at}): {text}",
        entry.local_header_offset
    )
}

fn verify_zip<R: ReadAt>(
    path: &Path,
    file: R,
    report: &mut Report<'_>,
) -> Result<(), CommandError> {
    let zip = match ZipReader::new(file, &ZipLimits::default()) {
        Ok(zip) => zip,
        Err(e) => {
            // Without a readable directory nothing else can be examined.
            report.defect(&format!("zip: {}", stowage::one_line(&e)));
            return Ok(());
        }
    };
    let root = zip.root().to_owned();
    let alignment: Option<u64> = zip
        .find(".storage_alignment")
        .and_then(|e| zip.read_to_vec(e).ok())
        .and_then(|b| String::from_utf8(b).ok())
        .and_then(|s| s.trim().parse().ok())
        .filter(|&a| a > 0);

    // Each record on its own: local header, data bounds, deflate stream, CRC-32.
    // What was found per record is kept, so that the loader meeting the same
    // defect again does not count it twice.
    let mut found: Vec<String> = Vec::new();
    let total = zip.entries().iter().map(|e| e.compressed_size).sum();
    let bar = report
        .cx
        .progress()
        .bytes(total, format!("checking {}", path.display()));
    for entry in zip.entries() {
        let name = zip.name(entry);
        let offset = zip.data_offset(entry).ok();
        let crc = zip.check_crc(entry);
        report.checked.records += 1;
        bar.inc(entry.compressed_size);
        match crc {
            Ok(()) => {}
            Err(ZipError::CrcNotRecorded { found, .. }) => report.warning(&format!(
                "record {name}: no CRC-32 recorded (0; the data's is {found:#010x}): written with CRC-32 computation off, which PyTorch accepts"
            )),
            Err(e) => {
                report.defect(&record_error(name, entry, offset, &e));
                found.push(stowage::one_line(&e));
            }
        }
        let is_storage = name
            .strip_prefix(&root)
            .is_some_and(|r| r.starts_with("/data/"));
        if let (Some(align), Some(offset), true) = (alignment, offset, is_storage) {
            if offset % align != 0 {
                report.warning(&format!(
                    "record {name}: data at offset {offset} is not aligned to the archive's .storage_alignment of {align} bytes"
                ));
            }
        }
    }

    bar.finish_and_clear();
    // The pickle and what it references: records present with their sizes,
    // tensors inside their storages, allowed globals only.
    let ckpt = match load(path, Some(Format::TorchZip), &report.options) {
        Ok(ckpt) => ckpt,
        Err(e) if found.iter().any(|f| e.contains(f.as_str())) => {
            report.note(&format!("loading stops at the same defect: {e}"));
            return Ok(());
        }
        Err(e) => {
            report.defect(&e);
            return Ok(());
        }
    };
    report.checked.loaded(&ckpt);
    // A fake load checks the shapes of sparse and nested tensors; their index
    // values are checked as PyTorch's loader checks them by a lazy load, which
    // reads only the records of those components.
    let kinds = ckpt
        .tensors()
        .map(|ts| ts.iter().any(|(_, t)| !t.kind().is_strided()))
        .unwrap_or(false);
    if kinds {
        let options = report.options.clone().with_mode(LoadMode::Lazy);
        if let Err(e) = stowage::load_with(path, &options) {
            let e = match e {
                Error::InFile { source, .. } => stowage::one_line(&*source),
                e => stowage::one_line(&e),
            };
            report.defect(&e);
        }
    }
    note_unreferenced(&zip, &root, &ckpt, report);
    Ok(())
}
