fn main() -> std::process::ExitCode {
    supervisor::cli::main()
}
