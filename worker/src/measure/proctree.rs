//! The CPU time of a process tree that this worker did not start (a server under test): read at
//! a window's start and end, so the difference is the tree's CPU over exactly that window.
//!
//! Two sources, the first that the host offers:
//! - a cgroup v2 directory holding the tree (`cpu.stat`'s `usage_usec`: every process that ran in
//!   it, exited ones included);
//! - `/proc`: the leader and every descendant found by walking `/proc/<pid>/stat`'s parent
//!   links, each thread's on-CPU time from `/proc/<pid>/task/<tid>/schedstat` (ns, the
//!   scheduler's own accounting; its first field) — or, where the kernel has no schedstat,
//!   utime + stime from `/proc/<pid>/stat` in clock ticks. A process that exits between the two
//!   reads takes its CPU with it (its parent's `cutime` counts it only once reaped), so a
//!   server that forks per connection is measured low here: the cgroup source has no such gap.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Where the tree's CPU is read from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TreeSource {
    /// A cgroup v2 directory (its `cpu.stat`).
    Cgroup(PathBuf),
    /// The process `pid` and its descendants, from `/proc`.
    Proc(u32),
}

/// A server tree's CPU over one load window: `start` reads it at the window's start (from the
/// load's window-start hook), `end` at its end. Without a source, nothing is read.
#[derive(Debug)]
pub struct WindowCpu<'a> {
    source: Option<&'a TreeSource>,
    before: Option<TreeCpu>,
}

impl<'a> WindowCpu<'a> {
    pub fn new(source: Option<&'a TreeSource>) -> Self {
        WindowCpu { source, before: None }
    }

    /// Read the tree at the window's start. Errors: the tree is gone (its reason).
    pub fn start(&mut self) -> Result<(), String> {
        if let Some(src) = self.source {
            self.before = Some(src.read()?);
        }
        Ok(())
    }

    /// The tree's CPU since `start`, ns; `None` without a source or before `start`. Errors:
    /// the tree is gone at the window's end (its reason).
    pub fn end(&self) -> Result<Option<u64>, String> {
        match (self.source, self.before) {
            (Some(src), Some(b)) => src.read().map(|a| Some(a.cpu_ns.saturating_sub(b.cpu_ns))),
            _ => Ok(None),
        }
    }
}

/// One reading of a tree: its CPU so far (ns) and how many processes it counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TreeCpu {
    pub cpu_ns: u64,
    pub processes: usize,
}

impl TreeSource {
    /// The server tree a request names by its `server_pid` (a process id above 1) or its
    /// `server_cgroup` (a cgroup v2 directory); `None` for neither (an empty value is none).
    /// Errors (one line): a `server_pid` that is not a process id, or both given.
    pub fn from_params(pid: Option<&str>, cgroup: Option<&str>) -> Result<Option<TreeSource>, String> {
        match (pid.filter(|p| !p.is_empty()), cgroup.filter(|c| !c.is_empty())) {
            (None, None) => Ok(None),
            (Some(p), None) => p
                .parse()
                .ok()
                .filter(|p| *p > 1)
                .map(|p| Some(TreeSource::Proc(p)))
                .ok_or_else(|| format!("server_pid must be a process id, got '{p}'")),
            (None, Some(dir)) => Ok(Some(TreeSource::Cgroup(PathBuf::from(dir)))),
            (Some(_), Some(_)) => Err("give server_pid or server_cgroup, not both".into()),
        }
    }

    /// The source's name for results: `cgroup` or `proc`.
    pub fn name(&self) -> &'static str {
        match self {
            TreeSource::Cgroup(_) => "cgroup",
            TreeSource::Proc(_) => "proc",
        }
    }

    /// Read the tree's CPU now. `Err` when the cgroup is unreadable, or the leader process is
    /// gone (a server that died: its CPU cannot be read any more).
    pub fn read(&self) -> Result<TreeCpu, String> {
        match self {
            TreeSource::Cgroup(dir) => {
                let text = std::fs::read_to_string(dir.join("cpu.stat"))
                    .map_err(|e| format!("cannot read {}: {e}", dir.join("cpu.stat").display()))?;
                let usec = text
                    .lines()
                    .find_map(|l| l.strip_prefix("usage_usec ").and_then(|v| v.trim().parse::<u64>().ok()))
                    .ok_or_else(|| format!("{} has no usage_usec line", dir.join("cpu.stat").display()))?;
                let procs = std::fs::read_to_string(dir.join("cgroup.procs")).map(|t| t.lines().count()).unwrap_or(0);
                Ok(TreeCpu { cpu_ns: usec * 1000, processes: procs })
            }
            TreeSource::Proc(pid) => proc_tree_cpu(Path::new("/proc"), *pid),
        }
    }
}

/// `(ppid, utime + stime in ticks)` from a `/proc/<pid>/stat` text; the command name (field
/// 2) may hold spaces and parentheses, so fields are counted after its last `)`.
fn parse_stat(text: &str) -> Option<(u32, u64)> {
    let rest = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // after the name: state(0) ppid(1) ... utime(11) stime(12)
    let ppid = f.get(1)?.parse().ok()?;
    let ticks = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    Some((ppid, ticks))
}

/// Nanoseconds on CPU of every thread of `pid` (schedstat), or None where the kernel has none.
fn schedstat_ns(proc_root: &Path, pid: u32) -> Option<u64> {
    let tasks = std::fs::read_dir(proc_root.join(pid.to_string()).join("task")).ok()?;
    let mut total = 0u64;
    for t in tasks.flatten() {
        let text = std::fs::read_to_string(t.path().join("schedstat")).ok()?;
        total += text.split_whitespace().next()?.parse::<u64>().ok()?;
    }
    Some(total)
}

/// The CPU of `leader` and all its descendants under `proc_root` (normally `/proc`).
pub fn proc_tree_cpu(proc_root: &Path, leader: u32) -> Result<TreeCpu, String> {
    let (members, parent) = tree(proc_root, leader)?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    let cpu_ns = members
        .iter()
        .map(|&p| schedstat_ns(proc_root, p).unwrap_or_else(|| parent[&p].1 * 1_000_000_000 / hz))
        .sum();
    Ok(TreeCpu { cpu_ns, processes: members.len() })
}

/// Whether any process of `leader`'s tree under `proc_root` maps a file whose path ends with
/// `file_name` (e.g. `/fips.so`: OpenSSL's FIPS provider is loaded). Errors: `leader` is gone.
pub fn tree_maps(proc_root: &Path, leader: u32, file_name: &str) -> Result<bool, String> {
    let (members, _) = tree(proc_root, leader)?;
    Ok(members.iter().any(|p| {
        std::fs::read_to_string(proc_root.join(p.to_string()).join("maps"))
            .map(|maps| maps.lines().any(|l| l.trim_end().ends_with(file_name)))
            .unwrap_or(false)
    }))
}

/// `leader` and its descendants under `proc_root`, with every process's (parent, ticks).
#[allow(clippy::type_complexity)]
fn tree(proc_root: &Path, leader: u32) -> Result<(Vec<u32>, HashMap<u32, (u32, u64)>), String> {
    let mut parent: HashMap<u32, (u32, u64)> = HashMap::new();
    for entry in std::fs::read_dir(proc_root).map_err(|e| format!("cannot list {}: {e}", proc_root.display()))?.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        if let Some(stat) = std::fs::read_to_string(entry.path().join("stat")).ok().as_deref().and_then(parse_stat) {
            parent.insert(pid, stat);
        }
    }
    if !parent.contains_key(&leader) {
        return Err(format!("process {leader} is gone"));
    }
    let in_tree = |mut pid: u32| loop {
        if pid == leader {
            return true;
        }
        match parent.get(&pid) {
            Some(&(ppid, _)) if ppid != 0 && ppid != pid => pid = ppid,
            _ => return false,
        }
    };
    let members: Vec<u32> = parent.keys().copied().filter(|p| in_tree(*p)).collect();
    Ok((members, parent))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cgroup_is_read_from_its_cpu_stat() {
        let dir = std::env::temp_dir().join(format!("proctree-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("cpu.stat"), "usage_usec 1234\nuser_usec 1000\nsystem_usec 234\n").unwrap();
        std::fs::write(dir.join("cgroup.procs"), "10\n11\n").unwrap();
        let src = TreeSource::Cgroup(dir.clone());
        assert_eq!(src.read(), Ok(TreeCpu { cpu_ns: 1_234_000, processes: 2 }));
        assert_eq!(src.name(), "cgroup");
        std::fs::write(dir.join("cpu.stat"), "user_usec 1000\n").unwrap();
        assert!(src.read().unwrap_err().contains("no usage_usec"));
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(src.read().unwrap_err().contains("cannot read"));
    }

    #[test]
    fn stat_fields_are_counted_after_the_command_name() {
        let text = "42 (a (weird) name) S 7 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 1 0 1000 0 0";
        assert_eq!(parse_stat(text), Some((7, 300)));
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn a_child_burning_cpu_is_counted_in_its_parents_tree_and_a_dead_leader_is_an_error() {
        // This test process is the leader; a child thread-free process spins for a while.
        let me = std::process::id();
        let before = proc_tree_cpu(Path::new("/proc"), me).expect("own tree");
        let mut child = std::process::Command::new("sh")
            .args(["-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; sleep 5"])
            .spawn()
            .expect("sh");
        std::thread::sleep(std::time::Duration::from_millis(1500));
        let during = proc_tree_cpu(Path::new("/proc"), me).expect("own tree");
        let child_only = proc_tree_cpu(Path::new("/proc"), child.id()).expect("child tree");
        assert!(during.processes >= before.processes + 1, "{before:?} {during:?}");
        assert!(child_only.cpu_ns >= 50_000_000, "the spinning child used {} ns", child_only.cpu_ns);
        assert!(during.cpu_ns >= before.cpu_ns + child_only.cpu_ns / 2, "{before:?} {during:?} {child_only:?}");
        child.kill().unwrap();
        child.wait().unwrap();
        let gone = proc_tree_cpu(Path::new("/proc"), child.id()).unwrap_err();
        assert!(gone.contains("is gone"), "{gone}");
        assert_eq!(TreeSource::Proc(child.id()).name(), "proc");
    }
}
