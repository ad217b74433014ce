//! The `stowage` binary: the command line of the library `stowage_cli`.

fn main() -> std::process::ExitCode {
    stowage_cli::main()
}
