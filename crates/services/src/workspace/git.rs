//! The `git` CLI, for what git2 cannot do here: HTTPS push and fetch (git2 is built without TLS),
//! submodules, and checking a new worktree out as fast as git does. Arguments built from data always
//! come after the options they belong to; credentials travel in the child's environment to a
//! one-shot credential helper, never in arguments, files or logs.
//!
//! **Where a push goes is not git's to decide.** Every push and fetch ([`RemoteGit`]) names the
//! destination the settings give (`gitUrl`, else the repository on the GitHub host), never a remote
//! of the repository. It runs in a scratch git directory of supervisor's own that reads and writes
//! the repository's objects and nothing else of it: no system, global, repository or worktree
//! configuration is read, so nothing an agent can write (`remote.*.url`, `url.*.insteadOf`,
//! `pushInsteadOf`, `credential.*`, `http.*`, `core.sshCommand`, hooks, includes, a `.git` file
//! pointing elsewhere) changes where git connects, what it runs or what it sends. The credential
//! helper hands the token out only for the destination's own protocol and host, so a redirect to
//! another host gets nothing. A persisted `http.extraheader` (actions/checkout's) is not read either.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use git2::{Oid, Repository};

use super::{WorkspaceError, git_err, io_err};

/// How old a ref's lock file is when a killed process left it: an update holds it for milliseconds.
const STALE_LOCK: std::time::Duration = std::time::Duration::from_secs(60);

/// Remove `lock` when it is older than [`STALE_LOCK`]: what a git or supervisor killed in the
/// middle of updating the ref left, which would refuse every later update of it.
fn remove_stale_lock(lock: &Path) {
    let age = (lock.metadata().and_then(|m| m.modified()).ok()).and_then(|t| t.elapsed().ok());
    if age.is_some_and(|age| age > STALE_LOCK) && std::fs::remove_file(lock).is_ok() {
        tracing::warn!(
            "removed {}, left by an update a stop cut short",
            lock.display()
        );
    }
}

/// Credentials for push and fetch.
#[derive(Clone, Default, PartialEq, Eq)]
pub enum PushAuth {
    /// No token of supervisor's: SSH keys or a local path.
    #[default]
    None,
    /// A GitHub token, sent to the destination only, over HTTPS (or plain HTTP to the loopback).
    Token(String),
    /// Asked for a token before each git command that talks to an HTTPS remote, so that a token
    /// that expires (a GitHub App's lives an hour) is replaced in time.
    Provider(TokenProvider),
}

impl PushAuth {
    /// Credentials from `provider`, asked before each HTTPS push or fetch.
    pub fn provider(
        provider: impl Fn() -> Result<String, String> + Send + Sync + 'static,
    ) -> PushAuth {
        PushAuth::Provider(TokenProvider(Arc::new(provider)))
    }

    /// The token to send to `url` now: `None` when there is none of ours or `url` may not carry it;
    /// a provider is asked only when it may.
    fn token_for(&self, url: &str) -> Result<Option<String>, WorkspaceError> {
        if !token_may_travel_to(url) {
            return Ok(None);
        }
        match self {
            PushAuth::None => Ok(None),
            PushAuth::Token(t) => Ok(Some(t.clone())),
            PushAuth::Provider(p) => {
                (p.0)()
                    .map(Some)
                    .map_err(|detail| WorkspaceError::GitCommand {
                        command: "git credentials".into(),
                        detail,
                    })
            }
        }
    }
}

/// Hands out the token to use now; `Err` says why there is none.
#[derive(Clone)]
pub struct TokenProvider(Arc<dyn Fn() -> Result<String, String> + Send + Sync>);

impl PartialEq for TokenProvider {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for TokenProvider {}

impl std::fmt::Debug for PushAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PushAuth::None => f.write_str("None"),
            PushAuth::Token(_) => f.write_str("Token(***)"),
            PushAuth::Provider(_) => f.write_str("Provider(***)"),
        }
    }
}

/// The variables the credential helper reads: the token, and the one protocol and host it is for.
const TOKEN_VAR: &str = "SUPERVISOR_GIT_TOKEN";
const HOST_VAR: &str = "SUPERVISOR_GIT_HOST";
const PROTOCOL_VAR: &str = "SUPERVISOR_GIT_PROTOCOL";
/// Answers git's `get` with the token when git asks for the destination's protocol and host, and
/// with nothing otherwise (a redirect elsewhere); nothing is stored.
const HELPER: &str = "!f() { test \"$1\" = get || exit 0; h=; p=; \
    while IFS= read -r l && test -n \"$l\"; do case \"$l\" in host=*) h=${l#host=} ;; protocol=*) p=${l#protocol=} ;; esac; done; \
    test -n \"$h\" && test \"$h\" = \"$SUPERVISOR_GIT_HOST\" && test \"$p\" = \"$SUPERVISOR_GIT_PROTOCOL\" || exit 0; \
    echo username=x-access-token; echo \"password=$SUPERVISOR_GIT_TOKEN\"; }; f";
/// Git variables that would point a subprocess at another repository or add configuration.
const REPO_VARS: [&str; 10] = [
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_COMMON_DIR",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_NAMESPACE",
    "GIT_CONFIG",
    "GIT_CONFIG_PARAMETERS",
    "GIT_CONFIG_COUNT",
];

/// A local `git` invocation in a directory (no network: `worktree add`, `submodule update`).
pub(crate) struct Git<'a> {
    dir: &'a Path,
    config: Vec<(String, String)>,
}

impl<'a> Git<'a> {
    pub(crate) fn new(dir: &'a Path, config: &[(String, String)]) -> Git<'a> {
        Git {
            dir,
            config: config.to_vec(),
        }
    }

    pub(crate) fn command<S: AsRef<OsStr>>(&self, args: &[S]) -> Command {
        let mut cmd = Command::new("git");
        for (k, v) in &self.config {
            cmd.arg("-c").arg(format!("{k}={v}"));
        }
        cmd.args(args)
            .current_dir(self.dir)
            .stdin(Stdio::null())
            .env("GIT_TERMINAL_PROMPT", "0");
        for var in REPO_VARS {
            cmd.env_remove(var);
        }
        cmd
    }

    /// Run git to completion; stdout on success, an error with git's message otherwise.
    pub(crate) fn run<S: AsRef<OsStr>>(&self, args: &[S]) -> Result<String, WorkspaceError> {
        run(self.command(args), args, None)
    }
}

/// Run `cmd` (git `args`) to completion in its own registered process group; stdout on success, an
/// error with git's message (the token, when there is one, masked) otherwise.
fn run<S: AsRef<OsStr>>(
    mut cmd: Command,
    args: &[S],
    token: Option<&str>,
) -> Result<String, WorkspaceError> {
    let shown: Vec<_> = args.iter().map(|a| a.as_ref().to_string_lossy()).collect();
    let shown = format!("git {}", shown.join(" "));
    // Its own process group, registered, killed when the run's stop is asked for.
    let out =
        crate::process::output_blocking(&mut cmd).map_err(|e| WorkspaceError::GitCommand {
            command: shown.clone(),
            detail: if e.kind() == std::io::ErrorKind::Interrupted {
                e.to_string()
            } else {
                format!("cannot run git: {e}; is git installed?")
            },
        })?;
    if out.status.success() {
        return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    let detail = redact(stderr.trim(), token);
    Err(WorkspaceError::GitCommand {
        command: shown,
        detail: if detail.is_empty() {
            format!("exit status {}", out.status)
        } else {
            detail
        },
    })
}

/// Never let the token reach a message, whatever git printed.
fn redact(text: &str, token: Option<&str>) -> String {
    match token {
        Some(t) if !t.is_empty() => text.replace(t, "***"),
        _ => text.to_string(),
    }
}

/// Scratch directories made by this process, for unique names.
static SCRATCH: AtomicU64 = AtomicU64::new(0);

/// Git talking to the destination from a scratch git directory of supervisor's own: its
/// configuration is written here and is all git reads; objects are the repository's (found through
/// `GIT_OBJECT_DIRECTORY`, written there by a fetch). Removed when dropped.
pub(crate) struct RemoteGit {
    scratch: PathBuf,
    objects: PathBuf,
    url: String,
    config: Vec<(String, String)>,
    token: Option<String>,
}

impl RemoteGit {
    /// Git for the repository whose shared git directory is `common`, talking to `url` with
    /// `auth` (whose token goes to `url`'s protocol and host only, when `url` may carry it).
    /// `config` is supervisor's own `-c key=value` (the settings', never the repository's).
    pub(crate) fn new(
        common: &Path,
        url: &str,
        auth: &PushAuth,
        config: &[(String, String)],
    ) -> Result<RemoteGit, WorkspaceError> {
        if url.trim().is_empty() {
            return Err(WorkspaceError::Task(
                "no destination to push to or fetch from: set gitUrl in the settings".into(),
            ));
        }
        let token = auth.token_for(url)?;
        let scratch = make_scratch(common)?;
        let mut config = config.to_vec();
        config.extend(
            [
                // No helper but supervisor's, which answers for the destination's host only.
                ("credential.helper", ""),
                (
                    "credential.helper",
                    if token.is_some() { HELPER } else { "" },
                ),
                // Give up on a stalled transfer instead of hanging the pipeline.
                ("http.lowSpeedLimit", "1000"),
                ("http.lowSpeedTime", "60"),
                // The scratch directory's refs are not the repository's: never collect garbage
                // or write anything beside the objects from them.
                ("gc.auto", "0"),
                ("maintenance.auto", "false"),
                ("fetch.writeCommitGraph", "false"),
                ("core.hooksPath", "/dev/null"),
            ]
            .map(|(k, v)| (k.to_string(), v.to_string())),
        );
        Ok(RemoteGit {
            scratch,
            objects: common.join("objects"),
            url: url.to_string(),
            config,
            token,
        })
    }

    fn command<S: AsRef<OsStr>>(&self, args: &[S]) -> Command {
        let mut cmd = Git::new(&self.scratch, &self.config).command(args);
        cmd.env("GIT_DIR", &self.scratch)
            .env("GIT_OBJECT_DIRECTORY", &self.objects)
            // No configuration file but the scratch directory's own: not the system's, not
            // ~/.gitconfig (GIT_CONFIG_GLOBAL, and HOME for a git that predates it), not ~/.netrc.
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_SYSTEM", "/dev/null")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("HOME", &self.scratch)
            .env("XDG_CONFIG_HOME", &self.scratch);
        if let Some(token) = &self.token {
            let (protocol, host) = protocol_and_host(&self.url);
            cmd.env(TOKEN_VAR, token)
                .env(PROTOCOL_VAR, protocol)
                .env(HOST_VAR, host);
        }
        cmd
    }

    fn run<S: AsRef<OsStr>>(&self, args: &[S]) -> Result<String, WorkspaceError> {
        run(self.command(args), args, self.token.as_deref())
    }

    /// Fetch the destination's `branch` into `tracking` of `repo` (the repository whose objects
    /// these are); its tip.
    pub(crate) fn fetch(
        &self,
        repo: &Repository,
        branch: &str,
        tracking: &str,
    ) -> Result<Oid, WorkspaceError> {
        // The repository's branches, so that git asks only for what is missing.
        let mut known = String::new();
        for r in repo.references().map_err(git_err("refs"))?.flatten() {
            let (Ok(name), Some(oid)) = (r.name(), r.target()) else {
                continue;
            };
            if name.starts_with("refs/heads/") || name.starts_with("refs/remotes/") {
                known.push_str(&format!("{oid} {name}\n"));
            }
        }
        let packed = self.scratch.join("packed-refs");
        std::fs::write(&packed, known).map_err(io_err("cannot write", &packed))?;
        let fetched = "refs/supervisor/fetched";
        let refspec = format!("+refs/heads/{branch}:{fetched}");
        self.run(&[
            "fetch",
            "--quiet",
            "--no-tags",
            "--no-write-fetch-head",
            "--",
            &self.url,
            &refspec,
        ])?;
        let tip = std::fs::read_to_string(self.scratch.join(fetched))
            .ok()
            .and_then(|t| Oid::from_str(t.trim()).ok())
            .ok_or_else(|| {
                WorkspaceError::Task(format!("git fetch of {branch} left no commit to read"))
            })?;
        remove_stale_lock(&repo.commondir().join(format!("{tracking}.lock")));
        repo.reference(tracking, tip, true, "supervisor: fetch")
            .map_err(git_err("update the remote-tracking branch"))?;
        Ok(tip)
    }

    /// Push commit `sha` to the destination's `branch`, provided the branch is still at `lease`
    /// there (`None`: it must not exist); `dry_run` sends nothing and asks for no lease.
    pub(crate) fn push(
        &self,
        sha: Oid,
        branch: &str,
        lease: Option<Oid>,
        dry_run: bool,
    ) -> Result<(), WorkspaceError> {
        let target = format!("refs/heads/{branch}");
        let lease = format!(
            "--force-with-lease={target}:{}",
            lease.map(|o| o.to_string()).unwrap_or_default()
        );
        let refspec = format!("{sha}:{target}");
        let mut args = vec!["push", "--quiet", "--no-verify"];
        // A probe asks whether a push would be taken at all, whatever the branch holds there.
        args.push(if dry_run { "--dry-run" } else { &lease });
        args.extend(["--", &self.url, &refspec]);
        self.run(&args).map(drop)
    }
}

impl Drop for RemoteGit {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.scratch);
    }
}

/// A new private scratch git directory for the repository whose shared git directory is `common`:
/// its object format and shallow boundary, nothing else.
fn make_scratch(common: &Path) -> Result<PathBuf, WorkspaceError> {
    use std::os::unix::fs::DirBuilderExt;
    let base = std::env::temp_dir();
    let dir = loop {
        let n = SCRATCH.fetch_add(1, Ordering::Relaxed);
        let dir = base.join(format!("supervisor-git-{}-{n}", std::process::id()));
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => break dir,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(io_err("cannot create", &dir)(e)),
        }
    };
    let format = git2::Config::open(&common.join("config"))
        .and_then(|c| c.get_string("extensions.objectformat"))
        .ok();
    let config = match format {
        Some(f) => format!(
            "[core]\n\trepositoryformatversion = 1\n\tbare = true\n[extensions]\n\tobjectformat = {f}\n"
        ),
        None => "[core]\n\trepositoryformatversion = 0\n\tbare = true\n".to_string(),
    };
    let write = |name: &str, text: &[u8]| {
        let p = dir.join(name);
        std::fs::write(&p, text).map_err(io_err("cannot write", &p))
    };
    let made = (|| {
        for sub in ["objects", "refs"] {
            let p = dir.join(sub);
            std::fs::create_dir(&p).map_err(io_err("cannot create", &p))?;
        }
        write("HEAD", b"ref: refs/heads/main\n")?;
        write("config", config.as_bytes())?;
        // A shallow clone (actions/checkout's default): git must know where its history ends.
        if let Ok(shallow) = std::fs::read(common.join("shallow")) {
            write("shallow", &shallow)?;
        }
        Ok(())
    })();
    if let Err(e) = made {
        let _ = std::fs::remove_dir_all(&dir);
        return Err(e);
    }
    Ok(dir)
}

/// The protocol and host (with its port, as git's credential protocol names it) of `url`; empty
/// for a path or an scp-like SSH address.
fn protocol_and_host(url: &str) -> (String, String) {
    let Some((scheme, rest)) = url.split_once("://") else {
        return (String::new(), String::new());
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host = authority.rsplit('@').next().unwrap_or_default();
    (scheme.to_ascii_lowercase(), host.to_string())
}

/// Whether a token may be sent to `url`: HTTPS anywhere, plain HTTP only to the loopback.
fn token_may_travel_to(url: &str) -> bool {
    let (protocol, host_port) = protocol_and_host(url);
    if protocol == "https" {
        return !host_port.is_empty();
    }
    if protocol != "http" {
        return false;
    }
    let host = match host_port.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => host_port.split(':').next().unwrap_or_default(),
    };
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(cmd: &Command, name: &str) -> Option<String> {
        cmd.get_envs()
            .find(|(k, _)| *k == name)
            .and_then(|(_, v)| v.map(|v| v.to_string_lossy().into_owned()))
    }

    fn repo() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init(dir.path()).unwrap();
        let common = repo.commondir().to_path_buf();
        (dir, common)
    }

    #[test]
    fn the_token_travels_in_the_environment_for_the_destination_only() {
        let (_dir, common) = repo();
        let auth = PushAuth::Token("ghp_secret".into());
        let g = RemoteGit::new(&common, "https://github.com/o/r.git", &auth, &[]).unwrap();
        let cmd = g.command(&["push"]);
        let args: Vec<String> = cmd
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert!(args.iter().all(|a| !a.contains("ghp_secret")));
        assert!(args.iter().any(|a| a == "credential.helper="));
        assert_eq!(env_of(&cmd, TOKEN_VAR).as_deref(), Some("ghp_secret"));
        assert_eq!(env_of(&cmd, HOST_VAR).as_deref(), Some("github.com"));
        assert_eq!(env_of(&cmd, PROTOCOL_VAR).as_deref(), Some("https"));
        assert_eq!(
            env_of(&cmd, "GIT_CONFIG_GLOBAL").as_deref(),
            Some("/dev/null")
        );
        assert_eq!(
            env_of(&cmd, "GIT_OBJECT_DIRECTORY").map(PathBuf::from),
            Some(common.join("objects"))
        );
        assert_eq!(
            redact("fatal: ghp_secret leaked", g.token.as_deref()),
            "fatal: *** leaked"
        );
        assert_eq!(format!("{auth:?}"), "Token(***)");
        let scratch = g.scratch.clone();
        assert!(scratch.join("config").is_file());
        drop(g);
        assert!(!scratch.exists(), "the scratch directory goes with it");

        let g = RemoteGit::new(&common, "/srv/remote.git", &auth, &[]).unwrap();
        assert!(g.command(&["push"]).get_envs().all(|(k, _)| k != TOKEN_VAR));
        let g = RemoteGit::new(&common, "http://github.com/o/r.git", &auth, &[]).unwrap();
        assert!(
            g.token.is_none(),
            "never over plain HTTP to another machine"
        );
    }

    #[test]
    fn a_provider_is_asked_before_each_https_command() {
        use std::sync::atomic::AtomicU32;
        let (_dir, common) = repo();
        let asked = Arc::new(AtomicU32::new(0));
        let counter = asked.clone();
        let auth = PushAuth::provider(move || {
            Ok(format!(
                "ghs_token{}",
                counter.fetch_add(1, Ordering::SeqCst)
            ))
        });
        let url = "https://github.com/o/r.git";
        let first = RemoteGit::new(&common, url, &auth, &[]).unwrap();
        let second = RemoteGit::new(&common, url, &auth, &[]).unwrap();
        assert_eq!(
            env_of(&first.command(&["push"]), TOKEN_VAR).as_deref(),
            Some("ghs_token0")
        );
        assert_eq!(
            env_of(&second.command(&["push"]), TOKEN_VAR).as_deref(),
            Some("ghs_token1")
        );
        // Local remotes need no token: the provider is not asked.
        RemoteGit::new(&common, "/tmp/remote.git", &auth, &[]).unwrap();
        assert_eq!(asked.load(Ordering::SeqCst), 2);
        assert_eq!(format!("{auth:?}"), "Provider(***)");
        // A provider with nothing to give stops the command with its reason.
        let broken = PushAuth::provider(|| Err("the App's key was refused".into()));
        let e = RemoteGit::new(&common, url, &broken, &[])
            .err()
            .expect("an error");
        assert!(e.to_string().contains("the App's key was refused"), "{e}");
    }

    /// git's own credential machinery, asked the way a push asks it: the token for the
    /// destination's protocol and host, nothing for any other (a redirect), nothing over another
    /// protocol.
    #[test]
    fn the_helper_answers_for_the_destination_host_only() {
        let (_dir, common) = repo();
        let auth = PushAuth::Token("ghs_only_here".into());
        let g = RemoteGit::new(&common, "http://127.0.0.1:8123/o/r.git", &auth, &[]).unwrap();
        let fill = |input: &str| {
            let mut cmd = g.command(&["credential", "fill"]);
            cmd.stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            let mut child = cmd.spawn().unwrap();
            use std::io::Write;
            child
                .stdin
                .take()
                .unwrap()
                .write_all(input.as_bytes())
                .unwrap();
            let out = child.wait_with_output().unwrap();
            String::from_utf8_lossy(&out.stdout).into_owned()
        };
        let ours = fill("protocol=http\nhost=127.0.0.1:8123\npath=o/r.git\n\n");
        assert!(ours.contains("password=ghs_only_here"), "{ours}");
        assert!(ours.contains("username=x-access-token"), "{ours}");
        for other in [
            "protocol=http\nhost=127.0.0.1:9999\n\n",
            "protocol=https\nhost=127.0.0.1:8123\n\n",
            "protocol=http\nhost=attacker.example\n\n",
            "protocol=http\n\n",
        ] {
            let answer = fill(other);
            assert!(!answer.contains("ghs_only_here"), "{other:?} got {answer}");
        }
    }

    #[test]
    fn tokens_travel_over_https_or_to_the_loopback_only() {
        for (url, ok) in [
            ("https://github.com/o/r.git", true),
            ("HTTPS://github.com/o/r.git", true),
            ("http://127.0.0.1:8080/r.git", true),
            ("http://localhost/r.git", true),
            ("http://x:y@127.0.0.2:1/r", true),
            ("http://[::1]:3000/r.git", true),
            ("https:///r.git", false),
            ("http://github.com/o/r.git", false),
            ("http://127.0.0.1.example.com/r.git", false),
            ("http://10.0.0.1/r.git", false),
            ("git@github.com:o/r.git", false),
            ("ssh://git@github.com/o/r.git", false),
            ("/tmp/remote.git", false),
        ] {
            assert_eq!(token_may_travel_to(url), ok, "{url}");
        }
        assert_eq!(
            protocol_and_host("http://u:p@[::1]:3000/r.git"),
            ("http".to_string(), "[::1]:3000".to_string())
        );
    }
}
