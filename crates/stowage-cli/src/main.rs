//! The `stowage` binary: the command line of the library `stowage_cli`.

/// mimalloc rather than glibc's allocator, for the binary only (the library
/// and the Python extension leave the choice to their host). A checkpoint
/// of many tensors is millions of small allocations made and freed in one
/// go, where glibc's consolidation of freed chunks was a sixth of the time:
/// `inspect` of 300,000 tensors takes a fifth less time and `verify` a
/// third less user time, at 5–8% more peak memory (`docs/performance.md`).
///
/// Built `no_thp`: mimalloc does not ask for transparent huge pages for its
/// arenas (`MADV_HUGEPAGE` on each), whose memory it hands back in 4 MiB
/// pieces and faults in again, each fault then zeroing (and compacting
/// for) a whole 2 MiB page: `manifest` of 300,000 tensors 1.46 s from
/// 1.45–2.45. The kernel's own policy applies, as to storages
/// (`storage/heap.rs`).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    stowage_cli::main()
}
