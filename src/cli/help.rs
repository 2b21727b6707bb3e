//! What the command line says about itself beyond its arguments: the environment and the exit codes
//! in `--help`, shell completions and the man page, all made from the one clap definition.

use clap::CommandFactory;
use clap_complete::Shell;

use super::output::{errln, out};
use super::{Cli, EXIT_OK, EXIT_STOPPED, EXIT_USAGE};

/// The end of `supervisor --help` (not of `-h`): the variables supervisor reads and its exit codes.
pub(super) const AFTER_LONG_HELP: &str = "\
Environment:
  GH_TOKEN, GITHUB_TOKEN
          The GitHub token (the first one set is used); without either, `gh auth token`.
  SUPERVISOR_APP_ID, SUPERVISOR_APP_PRIVATE_KEY or SUPERVISOR_APP_PRIVATE_KEY_PATH,
  SUPERVISOR_APP_INSTALLATION_ID
          A GitHub App instead of a token: its id, its private key (PEM text or a file) and,
          optionally, the installation.
  GITHUB_API_URL
          The GitHub API to talk to: GitHub Enterprise Server's, or the sandbox's
          [default: https://api.github.com].
  GITHUB_SERVER_URL
          GitHub's web address, where branches are pushed when `gitUrl` is not set (GitHub Actions
          sets it).
  SUPERVISOR_<SETTING>
          Overrides a top-level setting of .supervisor/settings.json: SUPERVISOR_PROJECT_NUMBER=4
          for `projectNumber`, SUPERVISOR_CODEOWNERS=alice,bob for `codeowners` (lists:
          comma-separated or JSON; objects: JSON).
  SUPERVISOR_WEBHOOK_SECRET, SUPERVISOR_DASHBOARD_TOKEN
          The usual homes of the webhook secret and of the dashboard's token: `serve
          --webhook-secret-env NAME` and `--dashboard-token-env NAME` (or `watch.dashboardTokenEnv`)
          read the variable NAME.
  SUPERVISOR_TOOLS_DIR
          The gate tools `demo` uses (the .tools/ that scripts/install-tools.sh makes).
  GITHUB_ACTIONS, GITHUB_STEP_SUMMARY, GITHUB_OUTPUT
          In GitHub Actions: `run` prints annotations, appends its summary and writes its step
          outputs there (--annotations, --step-summary and --github-output set them elsewhere).
  GITHUB_REPOSITORY, GITHUB_RUN_ID
          In GitHub Actions: the tracking comment links to the workflow run.
  RUST_LOG
          Log verbosity, e.g. RUST_LOG=supervisor=debug [default: warn; serve and watch: info].
  NO_COLOR
          No colours, even on a terminal.
  PATH
          Where the agent CLIs (pi, claude, codex), gh and the gate tools are found.
  Agents see only PATH, HOME, the locale, the providers' variables (ANTHROPIC_API_KEY,
  OPENAI_API_KEY, ... and `agentEnv`) and, with `passGitHubToken` only, the GitHub tokens
  (GH_TOKEN, GITHUB_TOKEN, GITHUB_PAT, GH_ENTERPRISE_TOKEN, GITHUB_ENTERPRISE_TOKEN).

Exit codes:
  0  Done: a pull request opened, nothing to do, or stopped by Ctrl-C and cleaned up; `check`
     and `doctor` found nothing wrong; `gates` blocked nothing; `runs replay` replayed (with
     or without differences).
  1  Stopped: the pipeline stopped before Done or refused the issue (the reason is printed);
     `gates` blocked; a second Ctrl-C; `runs show` or `runs replay` found the run's journal
     damaged or unreadable.
  2  A usage or configuration error: a bad argument, setting, workflow or agent definition
     (`supervisor check` lists every one).
  3  A GitHub or authentication error, or a stop that running the same command again resumes
     (`gates` stopped by Ctrl-C: no verdict).";

/// `supervisor completions SHELL`: the completion script on stdout.
pub(super) fn completions(shell: Shell) -> u8 {
    let mut cmd = Cli::command();
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut cmd, "supervisor", &mut script);
    out!("{}", String::from_utf8_lossy(&script));
    EXIT_OK
}

/// `supervisor man [COMMAND]`: the man page, in roff, on stdout: supervisor(1), or that of one
/// command (supervisor-run(1)).
pub(super) fn man(command: Option<&str>) -> u8 {
    let mut cli = Cli::command();
    // Built, the command holds what clap adds (the `help` command) like the parser does.
    cli.build();
    let page = match command {
        None => cli,
        Some(name) => match cli.find_subcommand(name).filter(|c| !c.is_hide_set()) {
            Some(sub) => {
                // Once per process, for the page's name: clap keeps names as `&'static str`.
                let full: &'static str = format!("supervisor-{}", sub.get_name()).leak();
                sub.clone().name(full).version(env!("CARGO_PKG_VERSION"))
            }
            None => {
                let names: Vec<&str> = cli
                    .get_subcommands()
                    .filter(|c| !c.is_hide_set())
                    .map(|c| c.get_name())
                    .collect();
                errln!(
                    "supervisor man: `{name}` is not a command; give one of {} (or none, for supervisor(1))",
                    names.join(", ")
                );
                return EXIT_USAGE;
            }
        },
    };
    let mut roff = Vec::new();
    if let Err(e) = clap_mangen::Man::new(page).render(&mut roff) {
        errln!("supervisor man: cannot render the page: {e}");
        return EXIT_STOPPED;
    }
    out!("{}", String::from_utf8_lossy(&roff));
    EXIT_OK
}
