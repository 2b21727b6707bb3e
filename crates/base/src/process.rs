//! Child process groups. Every child supervisor starts (agents, gate tools, setup commands) leads a
//! process group of its own and is registered here while it lives, so that a stop kills the whole
//! group and a second signal kills every group at once, whichever run started it.

/// Send `signal` to the process group `pgid`.
pub fn signal_group(pgid: i32, signal: i32) {
    if pgid > 1 {
        // SAFETY: kill(2) with a negative pid signals that process group; no memory is involved.
        unsafe {
            libc::kill(-pgid, signal);
        }
    }
}

/// Whether any live (non-zombie) process is left in the process group `pgid`.
pub fn process_group_alive(pgid: i32) -> bool {
    if pgid <= 1 {
        return false;
    }
    // SAFETY: signal 0 only checks for existence.
    if unsafe { libc::kill(-pgid, 0) } != 0 {
        return false;
    }
    // Zombies still count for kill(2); where orphans are not reaped promptly, look closer.
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return true;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        if !name.to_string_lossy().bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses.
        let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
            continue;
        };
        let mut fields = rest.split_whitespace();
        let state = fields.next().unwrap_or("");
        let pgrp = fields.nth(1).and_then(|p| p.parse::<i32>().ok());
        if pgrp == Some(pgid) && !matches!(state, "Z" | "X") {
            return true;
        }
    }
    false
}

/// Every child process group running now, whichever run started it.
static LIVE_GROUPS: std::sync::Mutex<Vec<i32>> = std::sync::Mutex::new(Vec::new());

/// The process groups running now.
pub fn live_groups() -> Vec<i32> {
    LIVE_GROUPS.lock().map(|g| g.clone()).unwrap_or_default()
}

/// SIGKILL every child process group still running: the last act of a process exiting at once
/// (a second signal), so that no child outlives supervisor.
pub fn kill_all_groups() {
    let groups = LIVE_GROUPS.lock().map(|g| g.clone()).unwrap_or_default();
    for pgid in groups {
        signal_group(pgid, libc::SIGKILL);
    }
}

/// A registered live group; kills it if its owner is abandoned (its future dropped) before the
/// group ends, unless disarmed.
pub struct GroupGuard {
    pgid: i32,
    pub armed: bool,
}

impl GroupGuard {
    /// Register `pgid` as live.
    pub fn new(pgid: i32) -> GroupGuard {
        if let Ok(mut g) = LIVE_GROUPS.lock() {
            g.push(pgid);
        }
        in_run(|r| r.change(|g| g.push(pgid)));
        GroupGuard { pgid, armed: true }
    }

    /// The process group.
    pub fn pgid(&self) -> i32 {
        self.pgid
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if self.armed {
            signal_group(self.pgid, libc::SIGKILL);
        }
        if let Ok(mut g) = LIVE_GROUPS.lock() {
            g.retain(|p| *p != self.pgid);
        }
        in_run(|r| r.change(|g| g.retain(|p| *p != self.pgid)));
    }
}

/// Make the child started by `cmd` lead a process group of its own, and make nothing it starts
/// outlive supervisor: `cmd`'s program runs under a reaper, a fork of the child that is the
/// program's parent and a subreaper (`PR_SET_CHILD_SUBREAPER`), so that every process the program
/// leaves behind — also those that left its process group or session, as shell tools started
/// `detached` do — becomes the reaper's child. When the program exits the reaper asks them to stop
/// (SIGTERM) and kills what is left 2 s later; when supervisor dies (`PR_SET_PDEATHSIG`, which
/// reaches the reaper and the program but no deeper) it kills the program and them at once. It mirrors the program's exit status, so the child
/// supervisor waits for ends as the program ended. The program's group (the child's id, as the
/// caller registers it) holds the program; the reaper leaves it for supervisor's own group, so a
/// kill of the group never takes the reaper before it has cleaned up.
///
/// Dropping the child does not kill it (`kill_on_drop` is switched off, since that would kill the
/// reaper): kill its group, as [`GroupGuard`] does.
pub fn lead_own_group(cmd: &mut tokio::process::Command) {
    cmd.kill_on_drop(false);
    let cmd = cmd.as_std_mut();
    lead_own_group_std(cmd);
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::process::CommandExt;
        let parent = std::process::id() as libc::pid_t;
        // SAFETY: getpgrp has no preconditions.
        let home = unsafe { libc::getpgrp() };
        // SAFETY: runs in the child between fork and exec after the closure above; see `reaper`.
        unsafe {
            cmd.pre_exec(move || reaper::split(parent, home));
        }
    }
}

/// Make the child started by `cmd` lead a process group of its own and die with supervisor
/// (`PR_SET_PDEATHSIG`), for supervisor's own short commands (git).
fn lead_own_group_std(cmd: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    let parent = std::process::id() as libc::pid_t;
    cmd.process_group(0);
    // SAFETY: the closure runs in the child between fork and exec and only makes async-signal-safe
    // calls (prctl, getppid, _exit).
    unsafe {
        cmd.pre_exec(move || {
            #[cfg(target_os = "linux")]
            {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                // Supervisor may have died before the call: then nothing would ever kill us.
                if libc::getppid() != parent {
                    libc::_exit(1);
                }
            }
            Ok(())
        });
    }
}

/// The reaper between supervisor and a program (see [`lead_own_group`]). Everything here runs in a
/// forked child of a multi-threaded process, so it makes only async-signal-safe system calls: no
/// allocation, no lock, no panic.
#[cfg(target_os = "linux")]
mod reaper {
    use std::mem::MaybeUninit;

    /// The signals the reaper takes through `sigwaitinfo`: a child's end, and SIGTERM, which comes
    /// when the thread of supervisor that started it ends (its death signal). Terminal signals to
    /// supervisor's group are waited for and ignored: supervisor stops the program itself.
    const WAITED: [libc::c_int; 5] = [
        libc::SIGCHLD,
        libc::SIGTERM,
        libc::SIGINT,
        libc::SIGHUP,
        libc::SIGQUIT,
    ];
    /// How long the reaper goes on killing what is left before it gives up (a process it cannot
    /// kill, such as one that changed its user).
    const SWEEP_ROUNDS: u32 = 5_000;
    /// Rounds of 10 ms that what a program left has to end after SIGTERM, before SIGKILL (2 s):
    /// only while supervisor lives; when it dies, everything is killed at once.
    const GRACE_ROUNDS: u32 = 200;

    /// In the child of `parent` (already leading its own process group): fork. The new process
    /// returns to run the program, dying with the reaper; this one becomes the reaper and never
    /// returns.
    ///
    /// # Safety
    /// Call only between fork and exec.
    pub(super) unsafe fn split(parent: libc::pid_t, home: libc::pid_t) -> std::io::Result<()> {
        unsafe {
            let mut waited = MaybeUninit::<libc::sigset_t>::uninit();
            libc::sigemptyset(waited.as_mut_ptr());
            for sig in WAITED {
                libc::sigaddset(waited.as_mut_ptr(), sig);
            }
            let waited = waited.assume_init();
            let mut before = MaybeUninit::<libc::sigset_t>::uninit();
            // Blocked before the death signal is asked for, so that it waits to be taken.
            libc::sigprocmask(libc::SIG_BLOCK, &waited, before.as_mut_ptr());
            let before = before.assume_init();
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
            if libc::getppid() != parent {
                libc::_exit(1);
            }
            libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1);
            let me = libc::getpid();
            let program = libc::fork();
            if program < 0 {
                return Err(std::io::Error::last_os_error());
            }
            if program == 0 {
                // The program: the signal mask it would have had, death with the reaper.
                libc::sigprocmask(libc::SIG_SETMASK, &before, std::ptr::null_mut());
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                if libc::getppid() != me {
                    libc::_exit(1);
                }
                return Ok(());
            }
            reap(program, me, parent, home, &waited)
        }
    }

    /// The reaper's life: out of the program's group, every inherited descriptor closed (the
    /// program's pipes must end when the program does), then wait for the program's end or
    /// supervisor's death; kill everything left; end as the program did.
    unsafe fn reap(
        program: libc::pid_t,
        group: libc::pid_t,
        parent: libc::pid_t,
        home: libc::pid_t,
        waited: &libc::sigset_t,
    ) -> ! {
        unsafe {
            libc::setpgid(0, home);
            let left_group = libc::getpgrp() != group;
            if libc::syscall(libc::SYS_close_range, 0u32, u32::MAX, 0u32) != 0 {
                for fd in 0..1024 {
                    libc::close(fd);
                }
            }
            let mut status: Option<libc::c_int> = None;
            let mut orphaned = false;
            loop {
                collect(program, &mut status);
                if status.is_some() {
                    break;
                }
                let sig = libc::sigwaitinfo(waited, std::ptr::null_mut());
                if sig == libc::SIGTERM || libc::getppid() != parent {
                    orphaned = true;
                    break;
                }
            }
            if !orphaned {
                // The program ended: what it left is asked to stop, as supervisor asks a group,
                // and has a moment to do so.
                if left_group {
                    libc::kill(-group, libc::SIGTERM);
                }
                for _ in 0..GRACE_ROUNDS {
                    signal_children(libc::SIGTERM);
                    let mut st = 0;
                    let r = libc::waitpid(-1, &mut st, libc::WNOHANG);
                    if r < 0 {
                        break; // ECHILD: nothing is left.
                    }
                    let tick = libc::timespec {
                        tv_sec: 0,
                        tv_nsec: 10_000_000,
                    };
                    let sig = libc::sigtimedwait(waited, std::ptr::null_mut(), &tick);
                    if sig == libc::SIGTERM || libc::getppid() != parent {
                        break;
                    }
                }
            }
            if left_group {
                libc::kill(-group, libc::SIGKILL);
            }
            if status.is_none() {
                libc::kill(program, libc::SIGKILL);
            }
            for _ in 0..SWEEP_ROUNDS {
                signal_children(libc::SIGKILL);
                collect(program, &mut status);
                let mut st = 0;
                let r = libc::waitpid(-1, &mut st, libc::WNOHANG);
                if r > 0 {
                    if r == program {
                        status = Some(st);
                    }
                    continue;
                }
                if r < 0 {
                    break; // ECHILD: nothing is left.
                }
                let pause = libc::timespec {
                    tv_sec: 0,
                    tv_nsec: 1_000_000,
                };
                libc::nanosleep(&pause, std::ptr::null_mut());
            }
            end_as(status)
        }
    }

    /// Reap every child that ended; the program's status into `status`.
    unsafe fn collect(program: libc::pid_t, status: &mut Option<libc::c_int>) {
        loop {
            let mut st = 0;
            // SAFETY: waitpid writes the status into `st`.
            let r = unsafe { libc::waitpid(-1, &mut st, libc::WNOHANG) };
            if r <= 0 {
                return;
            }
            if r == program {
                *status = Some(st);
            }
        }
    }

    /// Send `sig` to every child of the reaper (orphans of the program's tree come here) and to the
    /// group each may lead, read from `/proc/thread-self/children`.
    unsafe fn signal_children(sig: libc::c_int) {
        let path = c"/proc/thread-self/children";
        // SAFETY: a NUL-terminated path; the descriptor is closed below.
        let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
        if fd < 0 {
            return;
        }
        let mut buf = [0u8; 512];
        let mut pid: libc::pid_t = 0;
        loop {
            // SAFETY: reads into the buffer it is given, within its length.
            let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
            if n <= 0 {
                break;
            }
            for &b in &buf[..n as usize] {
                if b.is_ascii_digit() {
                    pid = pid
                        .saturating_mul(10)
                        .saturating_add(libc::pid_t::from(b - b'0'));
                } else if pid > 0 {
                    // SAFETY: kill(2) of a child of ours and of the group it may lead.
                    unsafe {
                        libc::kill(-pid, sig);
                        libc::kill(pid, sig);
                    }
                    pid = 0;
                }
            }
        }
        if pid > 0 {
            // SAFETY: as above.
            unsafe {
                libc::kill(-pid, sig);
                libc::kill(pid, sig);
            }
        }
        // SAFETY: the descriptor opened above.
        unsafe { libc::close(fd) };
    }

    /// Exit as the program did: its code, or death by its signal.
    unsafe fn end_as(status: Option<libc::c_int>) -> ! {
        unsafe {
            let Some(st) = status else { libc::_exit(1) };
            if libc::WIFEXITED(st) {
                libc::_exit(libc::WEXITSTATUS(st));
            }
            if libc::WIFSIGNALED(st) {
                let sig = libc::WTERMSIG(st);
                libc::signal(sig, libc::SIG_DFL);
                let mut only = MaybeUninit::<libc::sigset_t>::uninit();
                libc::sigemptyset(only.as_mut_ptr());
                libc::sigaddset(only.as_mut_ptr(), sig);
                libc::sigprocmask(libc::SIG_UNBLOCK, only.as_ptr(), std::ptr::null_mut());
                libc::kill(libc::getpid(), sig);
                libc::_exit(128 + sig);
            }
            libc::_exit(1)
        }
    }
}

/// Told the live groups whenever they change.
type OnChange = Box<dyn Fn(&[i32]) + Send + Sync>;

/// A run's record of the process groups it started, told to whoever keeps the run's checkpoint.
pub struct RunGroups {
    groups: std::sync::Mutex<Vec<i32>>,
    on_change: OnChange,
}

impl RunGroups {
    pub fn new(on_change: impl Fn(&[i32]) + Send + Sync + 'static) -> std::sync::Arc<RunGroups> {
        std::sync::Arc::new(RunGroups {
            groups: std::sync::Mutex::new(Vec::new()),
            on_change: Box::new(on_change),
        })
    }

    fn change(&self, f: impl FnOnce(&mut Vec<i32>)) {
        let now = match self.groups.lock() {
            Ok(mut g) => {
                f(&mut g);
                g.clone()
            }
            Err(_) => return,
        };
        (self.on_change)(&now);
    }
}

tokio::task_local! {
    static RUN: std::sync::Arc<RunGroups>;
}

/// Run `f` with child process groups started inside it recorded in `groups`.
pub async fn recording<F: std::future::Future>(
    groups: std::sync::Arc<RunGroups>,
    f: F,
) -> F::Output {
    RUN.scope(groups, f).await
}

/// `f`, recording its child process groups with the calling run's and logging in the caller's
/// span (for work handed to `tokio::spawn`, which would otherwise leave both behind).
pub fn in_this_run<F: std::future::Future>(f: F) -> impl std::future::Future<Output = F::Output> {
    use tracing::Instrument;
    let run = RUN.try_with(|r| r.clone()).ok();
    async move {
        match run {
            Some(run) => RUN.scope(run, f).await,
            None => f.await,
        }
    }
    .in_current_span()
}

fn in_run(f: impl FnOnce(&RunGroups)) {
    let _ = RUN.try_with(|r| f(r));
}

/// The processes of group `pgid` (pid, start time).
fn members(pgid: i32) -> Vec<(i32, std::time::SystemTime)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let boot = boot_time();
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    entries
        .flatten()
        .filter_map(|e| {
            let pid: i32 = e.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            let rest = stat.rsplit_once(')')?.1;
            let fields: Vec<&str> = rest.split_whitespace().collect();
            // After "(comm)": state ppid pgrp … starttime is the 20th.
            let pgrp: i32 = fields.get(2)?.parse().ok()?;
            let start: u64 = fields.get(19)?.parse().ok()?;
            let started = boot? + std::time::Duration::from_millis(start * 1000 / ticks);
            (pgrp == pgid && !matches!(fields[0], "Z" | "X")).then_some((pid, started))
        })
        .collect()
}

fn boot_time() -> Option<std::time::SystemTime> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let secs: u64 = stat
        .lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()?;
    Some(std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs))
}

/// The processes left of process groups a dead run recorded: only those that started no later than
/// `not_after` (the run's last sign of life), so a group id the system has since given to someone
/// else is left alone.
fn leftovers(groups: &[i32], not_after: std::time::SystemTime) -> Vec<i32> {
    let slack = std::time::Duration::from_secs(2);
    groups
        .iter()
        .filter(|g| **g > 1)
        .flat_map(|g| members(*g))
        .filter(|(pid, started)| *started <= not_after + slack && *pid != std::process::id() as i32)
        .map(|(pid, _)| pid)
        .collect()
}

/// SIGKILL what is left of process groups a dead run recorded (see [`leftovers`]). Returns how
/// many processes were killed.
pub fn kill_leftovers(groups: &[i32], not_after: std::time::SystemTime) -> usize {
    let left = leftovers(groups, not_after);
    for pid in &left {
        // SAFETY: kill(2) with a positive pid; no memory is involved.
        unsafe { libc::kill(*pid, libc::SIGKILL) };
    }
    left.len()
}

/// Whether every process left of the groups a dead run recorded has ended, waiting up to `wait`.
pub fn leftovers_gone(
    groups: &[i32],
    not_after: std::time::SystemTime,
    wait: std::time::Duration,
) -> bool {
    let deadline = std::time::Instant::now() + wait;
    while !leftovers(groups, not_after).is_empty() {
        if std::time::Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    true
}

/// Secrets taken out of the environment at start.
static SECRETS: std::sync::OnceLock<std::collections::BTreeMap<String, String>> =
    std::sync::OnceLock::new();

unsafe extern "C" {
    static mut environ: *mut *mut libc::c_char;
}

/// Take `names` out of the environment: keep their values in memory ([`secret`]), overwrite them
/// in place in the environment block — what `/proc/<pid>/environ` shows any process of the same
/// user, agents included — and remove them from what children inherit. Call it first thing in
/// `main`, before any thread starts; later calls do nothing.
pub fn take_secrets(names: &[&str]) {
    let mut taken = std::collections::BTreeMap::new();
    // SAFETY: no other thread exists yet (the caller's contract), so nothing reads or changes the
    // environment concurrently; every pointer walked is a NUL-terminated string of the block.
    unsafe {
        let mut entry = environ;
        while !entry.is_null() && !(*entry).is_null() {
            let text = *entry;
            let bytes = std::ffi::CStr::from_ptr(text).to_bytes();
            if let Some(eq) = bytes.iter().position(|b| *b == b'=') {
                let name = String::from_utf8_lossy(&bytes[..eq]).into_owned();
                if names.contains(&name.as_str()) {
                    let value = String::from_utf8_lossy(&bytes[eq + 1..]).into_owned();
                    // Wipe the value where the kernel shows it; the string keeps its length.
                    std::ptr::write_bytes(text.add(eq + 1), b'*', bytes.len() - eq - 1);
                    taken.insert(name, value);
                }
            }
            entry = entry.add(1);
        }
        for name in taken.keys() {
            std::env::remove_var(name);
        }
    }
    let _ = SECRETS.set(taken);
}

/// A secret [`take_secrets`] took out of the environment.
pub fn secret(name: &str) -> Option<&'static str> {
    SECRETS.get()?.get(name).map(String::as_str)
}

/// How a supervised child process came to no answer.
#[derive(Debug)]
pub enum RunFailure {
    /// It could not be started.
    Spawn(std::io::Error),
    /// Reading its output or waiting for it failed.
    Io(std::io::Error),
    /// It ran past its time and was killed with its process group.
    TimedOut(std::time::Duration),
    /// A stop was asked for; it was killed with its process group.
    Cancelled,
}

impl std::fmt::Display for RunFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RunFailure::Spawn(e) => write!(f, "cannot start: {e}"),
            RunFailure::Io(e) => write!(f, "its output could not be read: {e}"),
            RunFailure::TimedOut(d) => {
                write!(f, "timed out after {} s and was killed", d.as_secs())
            }
            RunFailure::Cancelled => f.write_str("stopped: a stop was asked for"),
        }
    }
}

/// What a child process that ran to its end printed.
#[derive(Debug, Clone)]
pub struct Captured {
    pub status: std::process::ExitStatus,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub duration: std::time::Duration,
}

/// Run `cmd` to its end with its output captured and no stdin: it leads a process group of its own
/// that dies with supervisor ([`lead_own_group`]) and is registered while it lives; the group is
/// killed when `timeout` passes, when `cancel` is cancelled, when the returned future is dropped, and
/// — for whatever the leader left running — when the leader exits.
pub async fn run_to_end(
    cmd: &mut tokio::process::Command,
    timeout: std::time::Duration,
    cancel: &tokio_util::sync::CancellationToken,
) -> Result<Captured, RunFailure> {
    use std::process::Stdio;
    lead_own_group(cmd);
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let started = std::time::Instant::now();
    let child = cmd.spawn().map_err(RunFailure::Spawn)?;
    let pgid = child.id().and_then(|p| i32::try_from(p).ok()).unwrap_or(0);
    let mut guard = GroupGuard::new(pgid);
    let out = tokio::select! {
        out = child.wait_with_output() => out.map_err(RunFailure::Io)?,
        () = tokio::time::sleep(timeout) => return Err(RunFailure::TimedOut(timeout)),
        () = cancel.cancelled() => return Err(RunFailure::Cancelled),
    };
    // Anything the leader left in its group goes with it.
    if process_group_alive(pgid) {
        signal_group(pgid, libc::SIGKILL);
    }
    guard.armed = false;
    Ok(Captured {
        status: out.status,
        stdout: out.stdout,
        stderr: out.stderr,
        duration: started.elapsed(),
    })
}

std::thread_local! {
    /// The stop request of the run whose blocking work this thread does now.
    static BLOCKING_CANCEL: std::cell::RefCell<Option<tokio_util::sync::CancellationToken>> =
        const { std::cell::RefCell::new(None) };
}

/// Run blocking `f` on tokio's blocking pool as part of the calling run: the child processes it
/// starts through [`output_blocking`] are recorded with the run's process groups and killed when
/// `cancel` is cancelled (`None`: work that must finish, such as the clean-up after a stop).
pub async fn spawn_blocking<T: Send + 'static>(
    cancel: Option<tokio_util::sync::CancellationToken>,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, tokio::task::JoinError> {
    let run = RUN.try_with(|r| r.clone()).ok();
    // Its log lines belong to the run's span, as the caller's do.
    let span = tracing::Span::current();
    tokio::task::spawn_blocking(move || {
        BLOCKING_CANCEL.with(|c| *c.borrow_mut() = cancel);
        let out = span.in_scope(|| match run {
            Some(run) => RUN.sync_scope(run, f),
            None => f(),
        });
        BLOCKING_CANCEL.with(|c| *c.borrow_mut() = None);
        out
    })
    .await
}

/// `std::process::Command::output` for supervisor's own tools (git): the child leads a process group
/// of its own that dies with supervisor and is registered while it lives; inside
/// [`spawn_blocking`] it is killed when the run's stop is asked for (an `Interrupted` error).
pub fn output_blocking(cmd: &mut std::process::Command) -> std::io::Result<std::process::Output> {
    use std::io::Read;
    use std::process::Stdio;
    lead_own_group_std(cmd);
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let cancel = BLOCKING_CANCEL.with(|c| c.borrow().clone());
    let mut child = cmd.spawn()?;
    let pgid = i32::try_from(child.id()).unwrap_or(0);
    let mut guard = GroupGuard::new(pgid);
    let read = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut pipe) = pipe {
                let _ = pipe.read_to_end(&mut buf);
            }
            buf
        })
    };
    let stdout = read(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let stderr = read(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let status = match cancel {
        None => child.wait()?,
        Some(cancel) => {
            // This thread waits for the exit (seen at once); a watcher stops the group on request.
            use std::sync::atomic::{AtomicBool, Ordering};
            let flags = std::sync::Arc::new((AtomicBool::new(false), AtomicBool::new(false)));
            let watched = flags.clone();
            std::thread::spawn(move || {
                let (done, stopped) = (&watched.0, &watched.1);
                let mut pause = std::time::Duration::from_millis(1);
                while !done.load(Ordering::Acquire) {
                    if cancel.is_cancelled() {
                        stopped.store(true, Ordering::Release);
                        signal_group(pgid, libc::SIGKILL);
                        return;
                    }
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(std::time::Duration::from_millis(25));
                }
            });
            let status = child.wait();
            flags.0.store(true, Ordering::Release);
            if flags.1.load(Ordering::Acquire) {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::Interrupted,
                    "stopped: a stop was asked for",
                ));
            }
            status?
        }
    };
    if process_group_alive(pgid) {
        signal_group(pgid, libc::SIGKILL);
    }
    guard.armed = false;
    Ok(std::process::Output {
        status,
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use tokio_util::sync::CancellationToken;

    use super::*;

    /// A shell that writes its process group's id to a file, then sleeps with a child of its own.
    fn sleeper(pidfile: &std::path::Path) -> String {
        format!(
            "cut -d' ' -f5 /proc/$$/stat > {}; sleep 120 & wait",
            pidfile.display()
        )
    }

    /// Whether process `pid` has ended (reaped, or a zombie nobody waits for).
    fn ended(pid: i32) -> bool {
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            let state = std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|s| s.rsplit_once(')').map(|(_, r)| r.trim().to_string()));
            match state {
                None => return true,
                Some(s) if s.starts_with('Z') || s.starts_with('X') => return true,
                Some(_) if Instant::now() > deadline => return false,
                Some(_) => std::thread::sleep(Duration::from_millis(10)),
            }
        }
    }

    /// A program that leaves a process behind in a session of its own (as shell tools started
    /// `detached` do), then exits with 7: the leftover is killed when it exits, and the child
    /// supervisor waited for ends with the program's status.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn what_a_program_leaves_behind_dies_with_it_and_its_status_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("left");
        let script = format!(
            "(setsid sh -c 'echo $$ > {f}; exec sleep 60' &); while [ ! -s {f} ]; do sleep 0.01; done; exit 7",
            f = pidfile.display()
        );
        let mut cmd = tokio::process::Command::new("/bin/sh");
        cmd.arg("-c").arg(script);
        let out = run_to_end(&mut cmd, Duration::from_secs(30), &CancellationToken::new())
            .await
            .unwrap();
        assert_eq!(out.status.code(), Some(7));
        let left = pid_in(&pidfile);
        assert!(
            ended(left),
            "the detached process {left} outlived its program"
        );

        use std::os::unix::process::ExitStatusExt;
        let mut cmd = tokio::process::Command::new("/bin/sh");
        cmd.arg("-c").arg("kill -TERM $$; sleep 5");
        let out = run_to_end(&mut cmd, Duration::from_secs(30), &CancellationToken::new())
            .await
            .unwrap();
        assert_eq!(out.status.signal(), Some(libc::SIGTERM), "{:?}", out.status);
    }

    /// A program stopped through its group (a timeout): what it left in another session goes too.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_killed_group_takes_the_detached_processes_with_it() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("left");
        let script = format!(
            "(setsid sh -c 'echo $$ > {f}; exec sleep 60' &); sleep 60",
            f = pidfile.display()
        );
        let mut cmd = tokio::process::Command::new("/bin/sh");
        cmd.arg("-c").arg(script);
        let cancel = CancellationToken::new();
        let run = {
            let cancel = cancel.clone();
            tokio::spawn(
                async move { run_to_end(&mut cmd, Duration::from_secs(60), &cancel).await },
            )
        };
        let left = tokio::task::spawn_blocking(move || pid_in(&pidfile))
            .await
            .unwrap();
        cancel.cancel();
        assert!(matches!(run.await.unwrap(), Err(RunFailure::Cancelled)));
        assert!(ended(left), "the detached process {left} outlived the stop");
    }

    fn pid_in(path: &std::path::Path) -> i32 {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(pid) = std::fs::read_to_string(path)
                .ok()
                .and_then(|t| t.trim().parse().ok())
            {
                return pid;
            }
            assert!(Instant::now() < deadline, "no pid written");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_cancelled_child_dies_with_its_whole_group() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("pid");
        let cancel = CancellationToken::new();
        let mut cmd = tokio::process::Command::new("/bin/sh");
        cmd.arg("-c").arg(sleeper(&pidfile));
        let run = {
            let cancel = cancel.clone();
            tokio::spawn(
                async move { run_to_end(&mut cmd, Duration::from_secs(600), &cancel).await },
            )
        };
        let pgid = tokio::task::spawn_blocking({
            let pidfile = pidfile.clone();
            move || pid_in(&pidfile)
        })
        .await
        .unwrap();
        // Registered as soon as the spawn returns, which may be just after the child wrote.
        let deadline = Instant::now() + Duration::from_secs(5);
        while !live_groups().contains(&pgid) {
            assert!(Instant::now() < deadline, "registered while it runs");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let stopped = Instant::now();
        cancel.cancel();
        let result = run.await.unwrap();
        assert!(matches!(result, Err(RunFailure::Cancelled)), "{result:?}");
        assert!(stopped.elapsed() < Duration::from_secs(2));
        assert!(group_gone(pgid), "the sleeping grandchild went too");
        assert!(!live_groups().contains(&pgid), "unregistered");
    }

    /// Whether the group has died: SIGKILL is sent at once, but under load the kernel may take a
    /// moment to end a process it was delivered to.
    fn group_gone(pgid: i32) -> bool {
        let deadline = Instant::now() + Duration::from_secs(2);
        while process_group_alive(pgid) {
            if Instant::now() > deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        true
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn blocking_work_hears_the_stop_of_its_run() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("pid");
        let cancel = CancellationToken::new();
        let script = sleeper(&pidfile);
        let work = spawn_blocking(Some(cancel.clone()), move || {
            output_blocking(std::process::Command::new("/bin/sh").arg("-c").arg(script))
        });
        let work = tokio::spawn(work);
        let pgid = tokio::task::spawn_blocking(move || pid_in(&pidfile))
            .await
            .unwrap();
        let stopped = Instant::now();
        cancel.cancel();
        let result = work.await.unwrap().unwrap();
        let e = result.unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::Interrupted, "{e}");
        assert!(stopped.elapsed() < Duration::from_secs(2));
        assert!(group_gone(pgid));

        // Without a stop request it runs to its end, and what it printed comes back.
        let out = spawn_blocking(None, || {
            output_blocking(
                std::process::Command::new("/bin/sh").args(["-c", "echo out; echo err >&2"]),
            )
        })
        .await
        .unwrap()
        .unwrap();
        assert!(out.status.success());
        assert_eq!(
            (&out.stdout[..], &out.stderr[..]),
            (&b"out\n"[..], &b"err\n"[..])
        );
    }
}
