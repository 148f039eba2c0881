//! The `b2fs` binary: parses the command line and hands over to [`b2fs::cli`].

fn main() -> std::process::ExitCode {
    b2fs::cli::main()
}
