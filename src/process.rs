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
        GroupGuard { pgid, armed: true }
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
    }
}
