//! The initiator: a strongSwan `charon` of this worker's own, configured from the workload's
//! parameters, driven through its vici socket (the `rustici` client), and stopped with the run.
//!
//! Two daemons on one host each need their own `/run` (charon's pid file is `/run/charon.pid`),
//! so the initiator runs in a private mount namespace with a tmpfs on `/run`
//! (`unshare -m`, which needs root), with its own UDP ports (`charon.port = 0`: the kernel
//! picks), its own vici socket and no kernel IPsec state: the IKE SAs are childless (RFC 6023),
//! so nothing is installed in the kernel. It is killed with this worker (`PR_SET_PDEATHSIG`) and
//! its files live in the server under test's private directory, which the orchestrator removes
//! even when it is killed itself.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rustici::wire::Element;
use rustici::{Client, Message};

/// Where distributions install charon: Debian/Ubuntu, Fedora/RHEL, Arch.
pub const CHARON_PATHS: [&str; 3] = ["/usr/lib/ipsec/charon", "/usr/libexec/ipsec/charon", "/usr/lib/strongswan/charon"];
/// What to install where charon or swanctl is missing.
pub const PACKAGES: &str = "Debian/Ubuntu: apt-get install strongswan-charon strongswan-swanctl";
/// The initiator's plugins: OpenSSL for every algorithm, the credential parsers, a socket, the
/// kernel interface charon will not start without, and vici.
pub const INITIATOR_PLUGINS: &str =
    "random nonce openssl pem pkcs1 pkcs8 x509 pubkey revocation constraints kdf socket-default kernel-netlink vici";
/// The connection the initiator initiates.
pub const CONNECTION: &str = "cryptoperf";
/// How long the initiator may take to open its vici socket.
const START_S: u64 = 10;
/// The longest path a Unix socket may have (`sun_path` less its terminating NUL).
const MAX_SOCKET_PATH: usize = 107;
/// How long one IKE SA may take to set up before it counts as failed, ms.
pub const INITIATE_TIMEOUT_MS: u32 = 10_000;

/// The first of [`CHARON_PATHS`] that exists, or why there is none.
pub fn charon_path() -> Result<PathBuf, String> {
    CHARON_PATHS
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
        .ok_or_else(|| format!("strongSwan's charon is not installed (looked in {}; {PACKAGES})", CHARON_PATHS.join(", ")))
}

/// `swanctl` on `PATH` or in /usr/sbin, or why there is none.
pub fn swanctl_path() -> Result<PathBuf, String> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH").map(|p| std::env::split_paths(&p).collect()).unwrap_or_default();
    dirs.push("/usr/sbin".into());
    dirs.into_iter()
        .map(|d| d.join("swanctl"))
        .find(|p| p.is_file())
        .ok_or_else(|| format!("strongSwan's swanctl is not installed ({PACKAGES})"))
}

/// Whether this process may run a daemon in a private mount namespace (root), else why not.
pub fn can_unshare() -> Result<(), String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        Ok(())
    } else {
        Err("ike-sa runs its initiator charon in a private mount namespace (unshare -m), which needs root".into())
    }
}

/// What the initiator offers and how it reaches the responder.
pub struct InitiatorConfig<'a> {
    /// strongSwan's proposal keyword string, e.g. `aes128gcm16-prfsha256-ecp256`.
    pub proposal: &'a str,
    /// The responder's UDP address.
    pub responder: std::net::SocketAddr,
    /// The CA certificate (PEM) the responder's certificate chains to.
    pub ca_file: &'a Path,
    /// The initiator's certificate (PEM) and key (PKCS #8 PEM), from the same CA.
    pub cert_file: &'a Path,
    pub key_file: &'a Path,
    /// Threads charon runs its jobs on.
    pub threads: usize,
}

/// A running initiator charon: its process and vici socket. Dropping it kills the daemon.
pub struct Initiator {
    child: Child,
    /// The daemon's vici socket.
    pub vici: PathBuf,
    dir: PathBuf,
}

impl Initiator {
    /// Write the initiator's configuration into `dir` (created), start charon there pinned to
    /// `cpu` when given, wait for its vici socket and load the connection and credentials with
    /// `swanctl`. Errors (one line): charon or swanctl missing, not root, the daemon gone or
    /// silent within 10 s (its log's last lines), swanctl refusing the configuration.
    pub fn start(dir: &Path, c: &InitiatorConfig, cpu: Option<usize>) -> Result<Initiator, String> {
        let (charon, swanctl) = (charon_path()?, swanctl_path()?);
        can_unshare()?;
        let vici = dir.join("charon.vici");
        if vici.as_os_str().len() > MAX_SOCKET_PATH {
            return Err(format!("the initiator's vici socket {} would be longer than a Unix socket's {MAX_SOCKET_PATH} bytes: \
                                give the study a shorter work_dir", vici.display()));
        }
        write_config(dir, c).map_err(|e| format!("cannot write the initiator's configuration in {}: {e}", dir.display()))?;
        let log = std::fs::File::create(dir.join("charon.out")).map_err(|e| format!("{}: {e}", dir.display()))?;
        let mut cmd = Command::new("unshare");
        cmd.args(["-m", "sh", "-c", "mount -t tmpfs -o mode=0755 tmpfs /run && exec \"$0\""])
            .arg(&charon)
            .env("STRONGSWAN_CONF", dir.join("strongswan.conf"))
            .stdin(Stdio::null())
            .stdout(log.try_clone().map_err(|e| e.to_string())?)
            .stderr(log);
        // SAFETY: the closure only makes async-signal-safe calls (prctl, sched_setaffinity).
        unsafe {
            cmd.pre_exec(move || {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                if let Some(cpu) = cpu {
                    let mut set: libc::cpu_set_t = std::mem::zeroed();
                    libc::CPU_SET(cpu, &mut set);
                    libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
                }
                Ok(())
            });
        }
        let child = cmd.spawn().map_err(|e| format!("cannot start unshare for the initiator charon: {e}"))?;
        let mut me = Initiator { child, vici, dir: dir.to_path_buf() };
        me.wait_for_vici()?;
        let out = Command::new(&swanctl)
            .args(["--load-all", "--noprompt", "--file"])
            .arg(dir.join("swanctl.conf"))
            .arg("--uri")
            .arg(format!("unix://{}", me.vici.display()))
            .env("STRONGSWAN_CONF", dir.join("strongswan.conf"))
            .output()
            .map_err(|e| format!("cannot run {}: {e}", swanctl.display()))?;
        let said = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
        if !out.status.success() || !said.contains(&format!("loaded connection '{CONNECTION}'")) {
            return Err(format!("swanctl did not load the initiator's configuration: {}", tail(&said)));
        }
        Ok(me)
    }

    /// The daemon's process id (the tree whose CPU is the initiator's).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    fn wait_for_vici(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(START_S);
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!("the initiator charon exited ({status}) before it was ready: {}", self.log_tail()));
            }
            if Client::connect(&self.vici).is_ok() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(format!("the initiator charon opened no vici socket within {START_S} s: {}", self.log_tail()));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The last lines of the daemon's output and log.
    pub fn log_tail(&self) -> String {
        let mut text = String::new();
        for f in ["charon.out", "charon.log"] {
            if let Ok(mut file) = std::fs::File::open(self.dir.join(f)) {
                let _ = file.read_to_string(&mut text);
            }
        }
        tail(&text)
    }
}

impl Drop for Initiator {
    fn drop(&mut self) {
        // SAFETY: kill with a pid this process started and has not reaped.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGKILL) };
        let _ = self.child.wait();
    }
}

/// The last three non-empty lines of `text`, joined with ` | `, at most 300 characters.
fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    let t = lines[lines.len().saturating_sub(3)..].join(" | ");
    let start = t.char_indices().rev().nth(299).map_or(0, |(i, _)| i);
    t[start..].to_string()
}

fn write_config(dir: &Path, c: &InitiatorConfig) -> std::io::Result<()> {
    for sub in ["x509", "x509ca", "private"] {
        std::fs::create_dir_all(dir.join(sub))?;
    }
    std::fs::copy(c.ca_file, dir.join("x509ca/ca.pem"))?;
    std::fs::copy(c.cert_file, dir.join("x509/initiator.pem"))?;
    std::fs::copy(c.key_file, dir.join("private/initiator.pem"))?;
    let d = dir.display();
    std::fs::write(
        dir.join("strongswan.conf"),
        format!(
            "charon {{\n  port = 0\n  port_nat_t = 0\n  load = {INITIATOR_PLUGINS}\n  reuse_ikesa = no\n  \
             install_routes = no\n  install_virtual_ip = no\n  threads = {}\n  \
             plugins {{\n    vici {{\n      socket = unix://{d}/charon.vici\n    }}\n  }}\n  \
             syslog {{\n    daemon {{\n      default = -1\n    }}\n  }}\n  \
             filelog {{\n    log {{\n      path = {d}/charon.log\n      default = 0\n    }}\n  }}\n}}\n",
            c.threads
        ),
    )?;
    std::fs::write(
        dir.join("swanctl.conf"),
        format!(
            "connections {{\n  {CONNECTION} {{\n    version = 2\n    local_addrs = 127.0.0.2\n    remote_addrs = {}\n    \
             remote_port = {}\n    proposals = {}\n    childless = force\n    unique = never\n    \
             local {{\n      auth = pubkey\n      certs = initiator.pem\n    }}\n    \
             remote {{\n      auth = pubkey\n      cacerts = ca.pem\n    }}\n  }}\n}}\n",
            c.responder.ip(),
            c.responder.port(),
            c.proposal
        ),
    )
}

/// A vici connection of one load thread: set up and delete IKE SAs.
pub struct Vici {
    client: Client,
}

/// The value of the first key/value named `key` anywhere in `msg`, as text.
pub fn value(msg: &Message, key: &str) -> Option<String> {
    msg.elements().iter().find_map(|e| match e {
        Element::KeyValue(k, v) if k == key => Some(String::from_utf8_lossy(v).into_owned()),
        _ => None,
    })
}

/// The items of the first list named `key` in `msg`, as text.
pub fn list(msg: &Message, key: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut inside = false;
    for e in msg.elements() {
        match e {
            Element::ListStart(k) if k == key => inside = true,
            Element::ListItem(v) if inside => out.push(String::from_utf8_lossy(v).into_owned()),
            Element::ListEnd if inside => break,
            _ => {}
        }
    }
    out
}

impl Vici {
    /// Connect to the vici socket at `path`, registered for the log of its own commands.
    pub fn connect(path: &Path) -> Result<Vici, String> {
        let mut client = Client::connect(path).map_err(|e| format!("vici {}: {e}", path.display()))?;
        // A streamed command's events reach only a client registered for them.
        for event in ["control-log", "list-sa"] {
            client.register_event(event).map_err(|e| format!("vici {}: {event}: {e}", path.display()))?;
        }
        Ok(Vici { client })
    }

    /// Set up one IKE SA of [`CONNECTION`] (IKE_SA_INIT + IKE_AUTH, no CHILD SA) and return its
    /// unique id, with the daemon's log of it at `loglevel` (0: the least; 1 names a refusal's
    /// notify, e.g. NO_PROPOSAL_CHOSEN). Errors: the daemon's reason (its error message and the
    /// last error-like line of its log).
    pub fn establish(&mut self, loglevel: u8) -> Result<u32, String> {
        let req = Message::new()
            .kv_str("ike", CONNECTION)
            .kv_str("timeout", INITIATE_TIMEOUT_MS.to_string())
            .kv_str("init-limits", "no")
            .kv_str("loglevel", loglevel.to_string());
        let (mut id, mut last) = (None, String::new());
        let resp = self
            .client
            .call_streaming("initiate", &req, |name, msg| {
                if name == "control-log" {
                    if let Some(u) = value(msg, "ikesa-uniqueid").and_then(|u| u.parse().ok()) {
                        id = Some(u);
                    }
                    if let Some(m) = value(msg, "msg") {
                        let telling = ["error", "fail", "NO_PROPOSAL", "AUTHENTICATION", "no ", "not "];
                        if last.is_empty() || telling.iter().any(|w| m.contains(w)) {
                            last = m;
                        }
                    }
                }
            })
            .map_err(|e| format!("vici initiate: {e}"))?;
        if value(&resp, "success").as_deref() != Some("yes") {
            let why = value(&resp, "errmsg").unwrap_or_else(|| "failed".into());
            return Err(if last.is_empty() { why } else { format!("{why}: {last}") });
        }
        id.ok_or_else(|| "the initiator's log named no IKE SA".to_string())
    }

    /// Ask for IKE SA `id` to be deleted (an INFORMATIONAL exchange with a DELETE payload),
    /// without waiting for the responder's answer.
    pub fn delete(&mut self, id: u32) -> Result<(), String> {
        let req = Message::new().kv_str("ike-id", id.to_string()).kv_str("timeout", "-1");
        let resp = self.client.call_streaming("terminate", &req, |_, _| {}).map_err(|e| format!("vici terminate: {e}"))?;
        match value(&resp, "success").as_deref() {
            Some("yes") => Ok(()),
            _ => Err(format!("terminate IKE SA {id}: {}", value(&resp, "errmsg").unwrap_or_default())),
        }
    }

    /// What IKE SA `id` negotiated: its `list-sas` entry's keys (`encr-alg`, `encr-keysize`,
    /// `integ-alg`, `prf-alg`, `dh-group`, `state`, ...). Errors: no such SA.
    pub fn sa(&mut self, id: u32) -> Result<Message, String> {
        let req = Message::new().kv_str("ike-id", id.to_string());
        let mut found = None;
        self.client
            .call_streaming("list-sas", &req, |name, msg| {
                if name == "list-sa" && found.is_none() {
                    found = Some(msg.clone());
                }
            })
            .map_err(|e| format!("vici list-sas: {e}"))?;
        found.ok_or_else(|| format!("IKE SA {id} is not in the initiator's list"))
    }

    /// The daemon's version (`version`'s `daemon` and `version`, e.g. `charon 5.9.8`) and its
    /// loaded plugins (`stats`' `plugins`).
    pub fn daemon(&mut self) -> Result<(String, Vec<String>), String> {
        let v = self.client.call("version", &Message::new()).map_err(|e| format!("vici version: {e}"))?;
        let s = self.client.call("stats", &Message::new()).map_err(|e| format!("vici stats: {e}"))?;
        let version = format!("{} {}", value(&v, "daemon").unwrap_or_default(), value(&v, "version").unwrap_or_default());
        Ok((version.trim().to_string(), list(&s, "plugins")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_values_and_lists_from_a_vici_message() {
        let m = Message::new()
            .section_start("sa")
            .kv_str("dh-group", "ECP_256")
            .section_end()
            .list_start("plugins")
            .list_item_str("openssl")
            .list_item_str("vici")
            .list_end()
            .kv_str("after", "x");
        assert_eq!(value(&m, "dh-group").as_deref(), Some("ECP_256"));
        assert_eq!(value(&m, "nothing"), None);
        assert_eq!(list(&m, "plugins"), ["openssl", "vici"]);
        assert!(list(&m, "after").is_empty());
    }

    #[test]
    fn a_tail_keeps_the_last_lines() {
        assert_eq!(tail("a\n\nb\nc\nd\n"), "b | c | d");
        assert!(tail(&"x".repeat(1000)).len() == 300);
    }
}
