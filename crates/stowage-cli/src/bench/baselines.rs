//! `bench load --baselines`: the same bytes moved by plain means, in the same
//! rounds as the timed loads, so that a load is compared with a memory copy
//! and a file read measured side by side, on a machine that others share.
//!
//! Each baseline moves as many bytes as the checkpoint's storages hold, and
//! is timed as a load is: from the allocation of its destination until the
//! last byte is written, without dropping the destination. So, as a load
//! does, each but the two `_touched` ones pays for fresh memory: a page
//! fault per page (per 2 MiB where the kernel grants transparent huge pages)
//! and the kernel zeroing each page before handing it out.
//!
//! - `copy`: a memory copy from a buffer written before the rounds into a
//!   fresh storage (`UntypedStorage::new`, which a load's large storages use
//!   too: an anonymous mapping with huge pages requested), on one thread;
//! - `copy_touched`: the same copy into one buffer written before the rounds
//!   and reused by every round: the copy alone, with no fresh memory;
//! - `read_touched`: `pread` of the first bytes of FILE into that buffer, in
//!   16 MiB pieces, on one thread: the kernel's copy out of the page cache
//!   alone;
//! - `read`: the same read into a fresh storage, on one thread;
//! - `read2`: the same on two threads, each reading one half, as the loader
//!   reads large records.
//!
//! FILE is in the page cache once the warm-up load has read it (unless the
//! kernel drops some of it meanwhile). Each round runs the load and the
//! five baselines once. The load and the baselines that take fresh memory
//! run in a cyclic order whose starting point moves by one each round, and
//! each frees what the one before it took (a loaded checkpoint is dropped,
//! untimed) immediately before it starts: so each gets the memory the one
//! before has just freed, not memory that stayed free for a while, which
//! can cost many times more to write to (a virtual machine may have handed
//! it back to its host). The `_touched` baselines run after the first of
//! them, while it still holds its memory.

use std::any::Any;
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::{Duration, Instant};

use stowage::UntypedStorage;

use super::{median, number};
use crate::Failure;

/// The baselines' names, in the order they are printed.
const NAMES: [&str; 5] = ["copy", "copy_touched", "read_touched", "read", "read2"];

/// The baselines that take fresh memory (indices into [`NAMES`]).
const FRESH: [usize; 3] = [0, 3, 4];

/// Pieces of one `pread`, as the loader's.
const PIECE: usize = 16 << 20;

/// The baselines' sources and destinations, and their times so far.
pub(super) struct Baselines {
    /// Written before the rounds: what `copy` and `copy_touched` copy.
    src: UntypedStorage,
    /// Written before the rounds: where `copy_touched` and `read_touched` write.
    touched: UntypedStorage,
    file: File,
    /// The bytes each baseline moves.
    len: usize,
    /// Each baseline's times, in the order of [`NAMES`].
    times: [Vec<Duration>; 5],
    /// What the last step took (a checkpoint, a storage), freed when the
    /// next one starts.
    held: Option<Box<dyn Any>>,
}

impl Baselines {
    /// The baselines for the local file `path`, with buffers of its length.
    ///
    /// # Errors
    /// A usage error when `path` is not a file on this machine (a folder, a
    /// URL).
    pub(super) fn new(path: &Path) -> Result<Baselines, Failure> {
        let not_a_file = || {
            Failure::usage(format!(
                "--baselines reads FILE itself, and {} is not a file on this machine",
                path.display()
            ))
        };
        let file = File::open(path).map_err(|_| not_a_file())?;
        let meta = file.metadata()?;
        if !meta.is_file() {
            return Err(not_a_file());
        }
        let len = usize::try_from(meta.len()).map_err(|_| not_a_file())?;
        let src = UntypedStorage::new(len)?;
        src.bytes_mut()?.fill(1);
        let touched = UntypedStorage::new(len)?;
        touched.bytes_mut()?.fill(2);
        Ok(Baselines {
            src,
            touched,
            file,
            len,
            times: Default::default(),
            held: None,
        })
    }

    /// From now on, each baseline moves `bytes` bytes: the storages' bytes
    /// of the loaded checkpoint, which the file holds with its metadata.
    ///
    /// # Errors
    /// When the file is shorter than that (it changed since [`Baselines::new`]).
    pub(super) fn set_len(&mut self, bytes: u64) -> Result<(), Failure> {
        match usize::try_from(bytes) {
            Ok(n) if n <= self.len => {
                self.len = n;
                Ok(())
            }
            _ => Err(Failure::msg(
                "--baselines: the checkpoint's storages hold more bytes than its file",
            )),
        }
    }

    /// Round `round`: `load` (which times itself) and each baseline once.
    pub(super) fn round(
        &mut self,
        round: u64,
        load: &mut dyn FnMut() -> Result<stowage::Checkpoint, Failure>,
    ) -> Result<(), Failure> {
        // Step 0 is the load, step k > 0 is baseline `FRESH[k - 1]`.
        let steps = FRESH.len() + 1;
        for k in 0..steps {
            // Free what the step before took, just before this one takes its own.
            self.held = None;
            self.held = match (k + round as usize) % steps {
                0 => Some(Box::new(load()?)),
                step => {
                    let which = FRESH[step - 1];
                    let (t, storage) = self.time_fresh(which)?;
                    self.times[which].push(t);
                    Some(Box::new(storage))
                }
            };
            if k == 0 {
                for which in (0..NAMES.len()).filter(|w| !FRESH.contains(w)) {
                    let t = self.time_touched(which)?;
                    self.times[which].push(t);
                }
            }
        }
        Ok(())
    }

    /// Frees what the last step took.
    pub(super) fn release(&mut self) {
        self.held = None;
    }

    /// Runs baseline `which` (an index into [`NAMES`], a `_touched` one)
    /// once and returns its time.
    fn time_touched(&self, which: usize) -> Result<Duration, Failure> {
        let src = self.src.bytes()?;
        let mut dst = self.touched.bytes_mut()?;
        let (src, dst) = (&src[..self.len], &mut dst[..self.len]);
        let start = Instant::now();
        if NAMES[which] == "copy_touched" {
            dst.copy_from_slice(src);
        } else {
            read_part(&self.file, dst, 0)?;
        }
        std::hint::black_box(&mut *dst);
        Ok(start.elapsed())
    }

    /// Runs baseline `which` (an index into [`NAMES`], one of [`FRESH`])
    /// once and returns its time and the storage it wrote, for the caller
    /// to drop.
    fn time_fresh(&self, which: usize) -> Result<(Duration, UntypedStorage), Failure> {
        let src = self.src.bytes()?;
        let src = &src[..self.len];
        let start = Instant::now();
        let dst = UntypedStorage::new(self.len)?;
        {
            let mut bytes = dst.bytes_mut()?;
            match NAMES[which] {
                "copy" => bytes.copy_from_slice(src),
                "read" => read_part(&self.file, &mut bytes, 0)?,
                _ => {
                    let half = self.len.div_ceil(2);
                    let (first, second) = bytes.split_at_mut(half);
                    let file = &self.file;
                    std::thread::scope(|s| {
                        let other = s.spawn(|| read_part(file, second, half as u64));
                        let a = read_part(file, first, 0);
                        let b = other.join().unwrap_or_else(|_| {
                            Err(std::io::Error::other("a reader thread panicked"))
                        });
                        a.and(b)
                    })?;
                }
            }
        }
        Ok((start.elapsed(), std::hint::black_box(dst)))
    }

    /// The medians, given the loads' times (in the order they ran).
    pub(super) fn finish(mut self, loads: &[Duration]) -> Summary {
        let runs: Vec<Vec<Duration>> = std::iter::once(loads.to_vec())
            .chain(self.times.iter().cloned())
            .collect();
        let medians = self.times.iter_mut().map(|t| median(t)).collect();
        Summary { medians, runs }
    }
}

/// What `--baselines` prints.
pub(super) struct Summary {
    /// Each baseline's median, in the order of [`NAMES`].
    medians: Vec<f64>,
    /// The loads' times, then each baseline's, in the order they ran.
    runs: Vec<Vec<Duration>>,
}

impl Summary {
    /// The JSON members that follow the contract's (`, "baselines": {…}`),
    /// given the loads' median.
    pub(super) fn json(&self, load_median: f64) -> String {
        let list = |t: &[Duration]| {
            let v: Vec<String> = t.iter().map(|d| number(d.as_secs_f64())).collect();
            format!("[{}]", v.join(", "))
        };
        let mut members = vec![format!("\"load_runs_s\": {}", list(&self.runs[0]))];
        for (i, name) in NAMES.iter().enumerate() {
            let m = self.medians[i];
            let min = self.runs[i + 1].iter().min().map_or(0.0, Duration::as_secs_f64);
            members.push(format!(
                "\"{name}\": {{\"median_s\": {}, \"min_s\": {}, \"load_over\": {}, \"runs_s\": {}}}",
                number(m),
                number(min),
                number(load_median / m),
                list(&self.runs[i + 1])
            ));
        }
        format!(", \"baselines\": {{{}}}", members.join(", "))
    }

    /// One line for people per baseline.
    pub(super) fn lines(&self, out: &mut dyn Write, bytes: u64, load_median: f64) -> std::io::Result<()> {
        for (name, m) in NAMES.iter().zip(&self.medians) {
            writeln!(
                out,
                "baseline {name}: median {m:.6} s, {:.3} GB/s; load / {name} = {:.2}",
                bytes as f64 / m / 1e9,
                load_median / m
            )?;
        }
        Ok(())
    }
}

/// Reads `part` from `file` at `at`, in pieces of [`PIECE`] bytes.
fn read_part(file: &File, part: &mut [u8], mut at: u64) -> std::io::Result<()> {
    for piece in part.chunks_mut(PIECE) {
        file.read_exact_at(piece, at)?;
        at += piece.len() as u64;
    }
    Ok(())
}
