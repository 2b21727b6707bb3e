//! `supervisor init`: settings for a repository, and a board whose columns the workflow can use —
//! created (`--create-board`), or an existing one mapped (`columns`) and, only on request and after
//! showing the change, given the missing columns.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use clap::Args;
use serde_json::{Map, Value, json};

use super::init_prompt::{BoardChoice, Prompt};
use super::number::number;
use super::output::errln;
use super::run::{canonical, runtime};
use super::{EXIT_GITHUB, EXIT_OK, EXIT_USAGE};
use crate::agent::DEFAULT_AGENTS;
use crate::config::{DEFAULT_WORKFLOW, RepoSlug, SETTINGS_PATHS, WORKFLOW_PATH, Workflow};
use crate::doctor::{ColumnPlan, map_columns, with_missing};
use crate::github::{BoardRef, ClientConfig, GitHub, GitHubError};
use crate::pipeline::{Project, process_env};

#[derive(Debug, Args)]
pub struct InitArgs {
    /// Repository root (default: the current directory).
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub repo_root: PathBuf,
    /// The GitHub repository [default: read from the `origin` remote].
    #[arg(long, value_name = "OWNER/NAME")]
    pub repo: Option<String>,
    /// Trusted GitHub logins, comma-separated [default: the account of the token].
    #[arg(long, value_delimiter = ',', value_name = "LOGIN,…")]
    pub codeowners: Vec<String>,
    /// Use the existing board with this number (as in its URL).
    #[arg(long, value_name = "N", conflicts_with = "create_board", value_parser = number::<u64>("a board number, as in its URL"))]
    pub project_number: Option<u64>,
    /// Owner of the board [default: the repository's owner].
    #[arg(long, value_name = "LOGIN")]
    pub project_owner: Option<String>,
    /// Create a board linked to the repository, its Status field holding the workflow's columns.
    #[arg(long)]
    pub create_board: bool,
    /// Title of the board `--create-board` makes [default: "<repository> pipeline"].
    #[arg(long, value_name = "TITLE")]
    pub board_title: Option<String>,
    /// Name the board option holding a stage, where automatic mapping does not find it.
    #[arg(long = "column", value_name = "STAGE=OPTION")]
    pub column: Vec<String>,
    /// Add the stages the existing board has no option for (GitHub replaces the whole option
    /// list: the change is shown first and applied with --yes).
    #[arg(long)]
    pub add_columns: bool,
    /// Apply what needs confirming (the board's option changes), and ask nothing.
    #[arg(long)]
    pub yes: bool,
    /// Install `/supervisor <issue>` for pi (`.pi/extensions/supervisor/index.ts`) and Claude Code
    /// (`.claude/commands/supervisor.md`). Alone, with settings already written, only that.
    #[arg(long)]
    pub slash_commands: bool,
    /// With --slash-commands: replace command files that were changed since `init` wrote them
    /// (kept otherwise).
    #[arg(long)]
    pub force: bool,
    /// Copy the built-in workflow (`.supervisor/workflow.json`) and role files
    /// (`.supervisor/agents/*.md`) into the repository for editing; files already there are kept.
    #[arg(long)]
    pub copy_workflow: bool,
}

/// The slash commands `--slash-commands` installs: path in the repository, content.
pub(super) const SLASH_COMMANDS: [(&str, &str); 2] = [
    (
        ".pi/extensions/supervisor/index.ts",
        include_str!("../../config/slash-commands/pi-supervisor.ts"),
    ),
    (
        ".claude/commands/supervisor.md",
        include_str!("../../config/slash-commands/claude-supervisor.md"),
    ),
];

/// Write `text` to `path`, creating its directories, say so, and add it to `written`.
fn write_new(path: &Path, text: &str, written: &mut Vec<PathBuf>) -> Result<(), Refusal> {
    path.parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|()| std::fs::write(path, text))
        .map_err(|e| cannot_write(path, &e))?;
    errln!("wrote {}", path.display());
    written.push(path.to_path_buf());
    Ok(())
}

/// The last line of a command file `init` wrote: the SHA-256 of the rest, so that a later `init`
/// tells a file it wrote (to update) from one someone changed (to keep).
fn stamp_line(rel: &str, digest: &str) -> String {
    if rel.ends_with(".md") {
        format!("<!-- supervisor init: sha256 {digest} -->")
    } else {
        format!("// supervisor init: sha256 {digest}")
    }
}

fn sha256_hex(text: &str) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// `text` as `init` writes it: with its stamp line.
pub(super) fn stamped(rel: &str, text: &str) -> String {
    format!("{text}{}\n", stamp_line(rel, &sha256_hex(text)))
}

/// A command file's text without its stamp line, and whether the stamp matches that text (the
/// file is as an `init` wrote it).
fn unstamped(text: &str) -> (&str, bool) {
    let body = text.trim_end_matches('\n');
    let Some(at) = body.rfind('\n').map(|i| i + 1) else {
        return (text, false);
    };
    let last = &body[at..];
    let digest = [
        "// supervisor init: sha256 ",
        "<!-- supervisor init: sha256 ",
    ]
    .iter()
    .find_map(|p| last.strip_prefix(p))
    .map(|d| d.trim_end_matches(" -->").trim());
    match digest {
        Some(d) => (&text[..at], d == sha256_hex(&text[..at])),
        None => (text, false),
    }
}

/// Install the slash commands: new files are written, files an earlier `init` wrote and nobody
/// changed are brought up to date, files someone changed are kept (replaced with `force`).
fn install_slash_commands(
    root: &Path,
    force: bool,
    written: &mut Vec<PathBuf>,
) -> Result<(), Refusal> {
    for (rel, text) in SLASH_COMMANDS {
        let path = root.join(rel);
        let Ok(now) = std::fs::read_to_string(&path) else {
            write_new(&path, &stamped(rel, text), written)?;
            continue;
        };
        let (body, as_written) = unstamped(&now);
        if body == text && as_written {
            errln!("{} is up to date", path.display());
        } else if as_written || body == text || force {
            write_new(&path, &stamped(rel, text), written)?;
        } else {
            errln!(
                "kept {}: it was changed since `supervisor init` wrote it (or init did not write it); `supervisor init --slash-commands --force` replaces it with this version's",
                path.display()
            );
        }
    }
    errln!("`/supervisor ISSUE` runs `supervisor run ISSUE` from pi and from Claude Code here");
    Ok(())
}

/// The built-in workflow and role files, where loading finds them, for editing. Files already
/// there are kept.
fn copy_workflow(root: &Path, written: &mut Vec<PathBuf>) -> Result<(), Refusal> {
    let mut files = vec![(PathBuf::from(WORKFLOW_PATH), DEFAULT_WORKFLOW)];
    for (name, text) in DEFAULT_AGENTS {
        files.push((
            Path::new(".supervisor/agents").join(format!("{name}.md")),
            text,
        ));
    }
    for (rel, text) in files {
        let path = root.join(&rel);
        if path.exists() {
            errln!("kept {} (already there)", path.display());
            continue;
        }
        write_new(&path, text, written)?;
    }
    errln!("the workflow and the roles are read from .supervisor/ from now on: edit them there");
    Ok(())
}

/// What `--slash-commands` and `--copy-workflow` ask for.
fn install_extras(root: &Path, args: &InitArgs, written: &mut Vec<PathBuf>) -> Result<(), Refusal> {
    if args.slash_commands {
        install_slash_commands(root, args.force, written)?;
    }
    if args.copy_workflow {
        copy_workflow(root, written)?;
    }
    Ok(())
}

/// The files `init` wrote, to be committed: the Action's checkout, and `watch` on another
/// machine, have only what was pushed, and without the settings they stop at once.
fn say_commit(root: &Path, written: &[PathBuf]) {
    if written.is_empty() {
        return;
    }
    let files: Vec<String> = (written.iter())
        .map(|p| p.strip_prefix(root).unwrap_or(p).display().to_string())
        .collect();
    errln!(
        "commit and push these files so the GitHub Action and `supervisor watch` on another machine find them (a fresh checkout has only what was pushed):\n  git add {}\n  git commit -m \"Set up supervisor\" && git push",
        files.join(" ")
    );
}

/// A failure of `init`: what went wrong and the exit code.
struct Refusal(String, u8);

impl From<GitHubError> for Refusal {
    fn from(e: GitHubError) -> Refusal {
        Refusal(e.to_string(), EXIT_GITHUB)
    }
}

fn usage(text: impl Into<String>) -> Refusal {
    Refusal(text.into(), EXIT_USAGE)
}

/// `path` could not be written: why, and what to do.
fn cannot_write(path: &Path, e: &std::io::Error) -> Refusal {
    usage(format!(
        "cannot write {}: {}; check that the directory is writable",
        path.display(),
        crate::config::io_reason(e)
    ))
}

pub(super) fn run(args: InitArgs) -> u8 {
    if let Err(e) =
        super::paths::existing_dir("--repo-root", &args.repo_root, "the repository's checkout")
    {
        errln!("supervisor init: {e}");
        return EXIT_USAGE;
    }
    let rt = match runtime("init") {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    let root = canonical(&args.repo_root);
    let mut written = Vec::new();
    match rt.block_on(init(args, &mut written)) {
        Ok(()) => {
            say_commit(&root, &written);
            EXIT_OK
        }
        Err(Refusal(text, code)) => {
            errln!("supervisor init: {text}");
            code
        }
    }
}

/// `owner/name` of a GitHub remote URL (https, ssh or scp-like).
pub(super) fn slug_of_remote(url: &str) -> Option<RepoSlug> {
    let url = url.trim().trim_end_matches('/').trim_end_matches(".git");
    let path = if let Some((_, rest)) = url.split_once("github.com:") {
        rest
    } else {
        let rest = url.split_once("://")?.1;
        rest.split_once('/')?.1
    };
    let mut parts = path.rsplit('/');
    let name = parts.next()?;
    let owner = parts.next()?;
    RepoSlug::parse(&format!("{owner}/{name}"))
}

fn origin_slug(root: &Path) -> Option<RepoSlug> {
    let out = std::process::Command::new("git")
        .args(["remote", "get-url", "origin"])
        .current_dir(root)
        .output()
        .ok()?;
    slug_of_remote(&String::from_utf8_lossy(&out.stdout))
}

/// Whether to ask for what the flags leave open: on a terminal (stdin and stderr), never with --yes.
fn interactive(args: &InitArgs) -> bool {
    use std::io::IsTerminal;
    !args.yes && std::io::stdin().is_terminal() && std::io::stderr().is_terminal()
}

/// The repository: `--repo`, else the one `origin` names — asked for on a terminal, with it as
/// the default.
fn which_repo(
    args: &InitArgs,
    root: &Path,
    prompt: Option<&mut Prompt>,
) -> Result<RepoSlug, Refusal> {
    if let Some(r) = &args.repo {
        return RepoSlug::parse(r)
            .ok_or_else(|| usage(format!("--repo {r} is not of the form owner/name")));
    }
    let found = origin_slug(root);
    match prompt {
        Some(p) => {
            let default = found.map(|r| r.to_string()).unwrap_or_default();
            p.ask("GitHub repository, owner/name", &default, RepoSlug::parse)
                .map_err(usage)
        }
        None => found.ok_or_else(|| {
            usage("cannot tell the GitHub repository from the `origin` remote; give it with --repo OWNER/NAME")
        }),
    }
}

/// The `supervisor` block of the settings file at `path`, when it reads.
fn current_block(path: &Path) -> Option<Value> {
    let text = std::fs::read_to_string(path).ok()?;
    let mut doc: Value = serde_json::from_str(text.trim_start_matches('\u{feff}')).ok()?;
    Some(doc["supervisor"].take())
}

/// The stage → option mapping the settings already hold for board `number` of `owner` (the
/// repository's owner when `projectOwner` is absent): choices made by an earlier `init`.
fn saved_columns(block: Option<&Value>, owner: &str, number: u64) -> BTreeMap<String, String> {
    let Some(block) = block else {
        return BTreeMap::new();
    };
    let saved_owner = block["projectOwner"].as_str().or_else(|| {
        block["repo"]
            .as_str()
            .and_then(|r| r.split_once('/').map(|(o, _)| o))
    });
    if block["projectNumber"].as_u64() != Some(number)
        || !saved_owner.is_some_and(|o| o.eq_ignore_ascii_case(owner))
    {
        return BTreeMap::new();
    }
    serde_json::from_value(block["columns"].clone()).unwrap_or_default()
}

/// Ask for the board and the extras the flags did not settle; `true` when the board is skipped.
fn ask_the_rest(
    p: &mut Prompt,
    args: &mut InitArgs,
    current: Option<u64>,
) -> Result<bool, Refusal> {
    let mut skip = false;
    if !args.create_board && args.project_number.is_none() {
        let (question, default) = match current {
            Some(n) => (
                format!("Board: create a new one, an existing board's number, or skip (keep #{n})"),
                "skip",
            ),
            None => (
                "Board: create a new one, an existing board's number, or skip (set it later)"
                    .to_string(),
                "create",
            ),
        };
        match p
            .ask(&question, default, BoardChoice::parse)
            .map_err(usage)?
        {
            BoardChoice::Create => args.create_board = true,
            BoardChoice::Existing(n) => args.project_number = Some(n),
            BoardChoice::Skip => skip = true,
        }
    }
    if !args.slash_commands {
        args.slash_commands = p
            .confirm(
                "Install /supervisor for pi and Claude Code in this repository?",
                false,
            )
            .map_err(usage)?;
    }
    if !args.copy_workflow {
        args.copy_workflow = p
            .confirm(
                "Copy the workflow and role files into .supervisor/ for editing?",
                false,
            )
            .map_err(usage)?;
    }
    Ok(skip)
}

/// Set the repository up; every file written is added to `written`.
async fn init(mut args: InitArgs, written: &mut Vec<PathBuf>) -> Result<(), Refusal> {
    let root = canonical(&args.repo_root);
    let has_settings = SETTINGS_PATHS.iter().any(|p| root.join(p).is_file());
    if (args.slash_commands || args.copy_workflow)
        && has_settings
        && !args.create_board
        && args.project_number.is_none()
    {
        return install_extras(&root, &args, written);
    }
    // An existing settings file is updated in place (its other keys and settings kept).
    let settings_path = SETTINGS_PATHS
        .iter()
        .map(|p| root.join(p))
        .find(|p| p.is_file())
        .unwrap_or_else(|| root.join(SETTINGS_PATHS[1]));
    let mut prompt = interactive(&args).then(Prompt::terminal);
    let repo = which_repo(&args, &root, prompt.as_mut())?;
    let cfg = ClientConfig::from_env(repo.clone(), &process_env)?;
    if !cfg.has_credentials() {
        return Err(Refusal(GitHubError::NoCredentials.to_string(), EXIT_GITHUB));
    }
    let gh = GitHub::new(cfg)?;
    let codeowners = if args.codeowners.is_empty() {
        let me = gh.viewer().await?.login;
        match &mut prompt {
            Some(p) => p
                .logins(
                    "Codeowners: GitHub logins whose issues run, comma-separated",
                    &me,
                )
                .map_err(usage)?,
            None => vec![me],
        }
    } else {
        args.codeowners.clone()
    };
    let current = current_block(&settings_path);
    let current_board = current.as_ref().and_then(|b| b["projectNumber"].as_u64());
    let owner = args
        .project_owner
        .clone()
        .unwrap_or_else(|| repo.owner.clone());
    let choosing = !args.create_board && args.project_number.is_none();
    if choosing {
        say_boards(&gh, &owner).await;
    }
    let skip_board = match &mut prompt {
        Some(p) => ask_the_rest(p, &mut args, current_board)?,
        None => false,
    };
    install_extras(&root, &args, written)?;
    let stages = workflow_stages(&root)?;
    let board = if args.create_board {
        Some(create_board(&gh, &repo, &owner, args.board_title.as_deref(), &stages).await?)
    } else if let Some(number) = args.project_number {
        let saved = saved_columns(current.as_ref(), &owner, number);
        let columns = existing_board(
            &gh,
            &args,
            prompt.as_mut(),
            (&owner, number),
            &saved,
            &stages,
        )
        .await?;
        Some((number, columns))
    } else if skip_board {
        None
    } else {
        return Err(usage(
            "name the board: --project-number N (as in its URL), or make one with --create-board",
        ));
    };
    let mut block = Map::new();
    block.insert("repo".into(), json!(repo.to_string()));
    if let Some((number, columns)) = &board {
        block.insert("projectNumber".into(), json!(number));
        if !owner.eq_ignore_ascii_case(&repo.owner) {
            block.insert("projectOwner".into(), json!(owner));
        }
        if !columns.is_empty() {
            block.insert("columns".into(), json!(columns));
        }
    }
    block.insert("codeowners".into(), json!(codeowners));
    write_settings(&settings_path, &block)?;
    written.push(settings_path.clone());
    if ignore_runtime(&root)? {
        written.push(root.join(".gitignore"));
    }
    errln!("wrote {}", settings_path.display());
    errln!(
        "repository {repo} · board {} · codeowners {}",
        match (&board, current_board) {
            (Some((number, _)), _) => format!("#{number} of {owner}"),
            (None, Some(number)) => format!("#{number} (kept)"),
            (None, None) => "none yet".to_string(),
        },
        codeowners.join(", ")
    );
    if board.is_none() && current_board.is_none() {
        errln!(
            "no board yet: `supervisor init --create-board` or `--project-number N` sets it (until then `check` and `run` say projectNumber is missing)"
        );
        return Ok(());
    }
    // What was written must load: the same checks `supervisor check` makes.
    if let Err(e) = Project::load(&root, &process_env) {
        return Err(usage(format!(
            "the settings written do not load:\n{}",
            crate::report::errors_text(&e, false)
        )));
    }
    errln!(
        "next: `supervisor doctor` checks the rest (agent CLIs, gate tools, push access), then `supervisor run ISSUE`"
    );
    Ok(())
}

/// The boards `owner` has, to choose one from (or to see that one is to be created).
async fn say_boards(gh: &GitHub, owner: &str) {
    match gh.boards_of(owner).await {
        Ok(boards) if boards.is_empty() => {
            errln!("{owner} has no open board: `--create-board` makes one");
        }
        Ok(boards) => {
            let list: Vec<String> = (boards.iter())
                .map(|(n, title)| format!("#{n} \"{title}\""))
                .collect();
            errln!(
                "boards of {owner}: {} (`--project-number N` takes one, `--create-board` makes a new one)",
                list.join(", ")
            );
        }
        Err(e) => tracing::debug!("the boards of {owner} could not be listed: {e}"),
    }
}

fn workflow_stages(root: &Path) -> Result<Vec<String>, Refusal> {
    let settings_path = root.join(SETTINGS_PATHS[1]);
    let wf = Workflow::load(root, None, &BTreeMap::new(), &settings_path)
        .map_err(|e| usage(crate::report::errors_text(&e, false)))?;
    Ok(wf.stages.into_iter().map(|s| s.status).collect())
}

async fn create_board(
    gh: &GitHub,
    repo: &RepoSlug,
    owner: &str,
    title: Option<&str>,
    stages: &[String],
) -> Result<(u64, BTreeMap<String, String>), Refusal> {
    let (_, owner_id) = gh.account(owner).await?.ok_or_else(|| {
        usage(format!(
            "no GitHub user or organization {owner}; fix --project-owner"
        ))
    })?;
    let repository = gh.repository_info().await?;
    let title = title.map_or_else(|| format!("{} pipeline", repo.name), str::to_string);
    let board = gh
        .create_board(&owner_id, &repository.node_id, &title)
        .await?;
    let board_ref = BoardRef {
        owner: owner.to_string(),
        number: board.number,
        status_field: "Status".into(),
    };
    let (_, field, _) = gh.board_field(&board_ref).await?;
    // A new board holds no cards: its default options can be replaced outright.
    gh.set_status_options(&field, stages).await?;
    errln!(
        "created board #{} \"{title}\" ({}), linked to {repo}, columns: {}",
        board.number,
        board.url,
        stages.join(", ")
    );
    Ok((board.number, BTreeMap::new()))
}

async fn existing_board(
    gh: &GitHub,
    args: &InitArgs,
    mut prompt: Option<&mut Prompt>,
    (owner, number): (&str, u64),
    saved: &BTreeMap<String, String>,
    stages: &[String],
) -> Result<BTreeMap<String, String>, Refusal> {
    let board_ref = BoardRef {
        owner: owner.to_string(),
        number,
        status_field: "Status".into(),
    };
    let (_, field, options) = gh.board_field(&board_ref).await?;
    let options: Vec<String> = options.into_iter().map(|o| o.name).collect();
    let mut plan = map_columns(stages, &options);
    // What an earlier `init` saved for this board still holds where the board has that option;
    // `--column` overrides it, and only what is left unmapped is asked about.
    for (stage, option) in saved {
        if stages.contains(stage) && options.contains(option) {
            assign(&mut plan, stage, option);
        }
    }
    for pair in &args.column {
        let (stage, option) = pair.split_once('=').ok_or_else(|| {
            usage(format!(
                "--column {pair}: write STAGE=OPTION, e.g. Backlog=Todo"
            ))
        })?;
        if !stages.iter().any(|s| s == stage) {
            return Err(usage(format!(
                "--column {pair}: {stage} is not a stage ({})",
                stages.join(", ")
            )));
        }
        if !options.iter().any(|o| o == option) {
            return Err(usage(format!(
                "--column {pair}: the board has no option {option} ({})",
                options.join(", ")
            )));
        }
        assign(&mut plan, stage, option);
    }
    if let Some(p) = prompt.as_deref_mut() {
        ask_columns(p, stages, &options, &mut plan)?;
    }
    for (stage, option) in &plan.columns {
        errln!("  {stage} → \"{option}\"");
    }
    if plan.missing.is_empty() {
        return Ok(plan.columns);
    }
    // On a terminal each missing stage was asked about: those left are to be added.
    if !args.add_columns && prompt.is_none() {
        return Err(usage(format!(
            "the board has no column for {}; add them with --add-columns (the change is shown first), or name existing options with --column STAGE=OPTION",
            plan.missing.join(", ")
        )));
    }
    let new = with_missing(stages, &options, &plan);
    errln!(
        "the board's options would change (GitHub replaces the whole list; cards keep the options whose names stay):"
    );
    errln!("  now:   {}", options.join(", "));
    errln!("  after: {}", new.join(", "));
    let apply = args.yes
        || match prompt {
            Some(p) => p.confirm("Apply this change?", false).map_err(usage)?,
            None => false,
        };
    if !apply {
        return Err(usage("nothing changed; run again with --yes to apply"));
    }
    gh.set_status_options(&field, &new).await?;
    errln!("added the columns {}", plan.missing.join(", "));
    Ok(plan.columns)
}

/// Stage `stage` is held by the board's `option`.
fn assign(plan: &mut ColumnPlan, stage: &str, option: &str) {
    plan.missing.retain(|s| s != stage);
    if stage == option {
        plan.columns.remove(stage);
    } else {
        plan.columns.insert(stage.to_string(), option.to_string());
    }
}

/// Ask which of the board's free options holds each stage the names did not map, or whether to
/// add it; the answers go into `plan`.
fn ask_columns(
    p: &mut Prompt,
    stages: &[String],
    options: &[String],
    plan: &mut ColumnPlan,
) -> Result<(), Refusal> {
    for stage in stages {
        if !plan.missing.contains(stage) {
            continue;
        }
        let used: Vec<&String> = (stages.iter())
            .filter(|s| !plan.missing.contains(s))
            .map(|s| plan.columns.get(s).unwrap_or(s))
            .collect();
        let free: Vec<&String> = (options.iter())
            .filter(|o| !used.iter().any(|u| u.eq_ignore_ascii_case(o)))
            .collect();
        if free.is_empty() {
            continue;
        }
        let names: Vec<&str> = free.iter().map(|o| o.as_str()).collect();
        let question = format!(
            "Board column for {stage}: one of {}, or add a new one",
            names.join(", ")
        );
        let answer = p
            .ask(&question, "add", |a| {
                if a.eq_ignore_ascii_case("add") {
                    return Some(None);
                }
                free.iter()
                    .find(|o| o.eq_ignore_ascii_case(a.trim()))
                    .map(|o| Some((*o).clone()))
            })
            .map_err(usage)?;
        if let Some(option) = answer {
            assign(plan, stage, &option);
        }
    }
    Ok(())
}

/// Write `block`'s keys into the `supervisor` block of the settings file at `path`, keeping what
/// else the file holds.
fn write_settings(path: &Path, block: &Map<String, Value>) -> Result<(), Refusal> {
    let io = |e: std::io::Error| cannot_write(path, &e);
    let mut doc = match std::fs::read_to_string(path) {
        Ok(text) => match serde_json::from_str::<Value>(text.trim_start_matches('\u{feff}')) {
            Ok(Value::Object(doc)) => doc,
            _ => {
                return Err(usage(format!(
                    "{} is not a JSON object; fix or remove it first",
                    path.display()
                )));
            }
        },
        Err(_) => Map::new(),
    };
    let settings = doc
        .entry("supervisor")
        .or_insert_with(|| Value::Object(Map::new()));
    if !settings.is_object() {
        *settings = Value::Object(Map::new());
    }
    if let Value::Object(settings) = settings {
        for (k, v) in block {
            settings.insert(k.clone(), v.clone());
        }
        // A board written without a mapping drops the old board's mapping.
        if block.contains_key("projectNumber") && !block.contains_key("columns") {
            settings.remove("columns");
        }
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    let text = serde_json::to_string_pretty(&Value::Object(doc)).expect("json");
    std::fs::write(path, text + "\n").map_err(io)
}

/// What supervisor writes under `.supervisor/` while it works, never to be committed: run
/// journals and checkpoints, gate state, the watcher's state.
pub(super) const RUNTIME_DIRS: [&str; 3] = [
    ".supervisor/runs/",
    ".supervisor/gates/",
    ".supervisor/watch/",
];

/// [`RUNTIME_DIRS`] in the repository's `.gitignore` (those not there yet); `true` when the file
/// was changed.
fn ignore_runtime(root: &Path) -> Result<bool, Refusal> {
    let path = root.join(".gitignore");
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    let ignored = |dir: &str| {
        let bare = dir.trim_end_matches('/');
        text.lines()
            .map(str::trim)
            .any(|l| l == dir || l == bare || l == ".supervisor/" || l == ".supervisor")
    };
    let missing: Vec<&str> = RUNTIME_DIRS.into_iter().filter(|d| !ignored(d)).collect();
    if missing.is_empty() {
        return Ok(false);
    }
    let mut out = text.clone();
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    for dir in &missing {
        out.push_str(dir);
        out.push('\n');
    }
    std::fs::write(&path, out).map_err(|e| cannot_write(&path, &e))?;
    errln!("ignored in .gitignore: {}", missing.join(" "));
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::slug_of_remote;

    #[test]
    fn remotes() {
        for url in [
            "https://github.com/acme/widgets.git",
            "https://github.com/acme/widgets",
            "git@github.com:acme/widgets.git",
            "ssh://git@github.com/acme/widgets.git",
        ] {
            assert_eq!(
                slug_of_remote(url).unwrap().to_string(),
                "acme/widgets",
                "{url}"
            );
        }
        assert!(slug_of_remote("/tmp/remote.git").is_none());
    }
}
