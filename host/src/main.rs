//! `seam`: inspect components, check configs, and run subagents and tools from the command line.

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
