//! The measured window's edges told to a sampling profiler: when the environment names a
//! `perf record --control` pair of FIFOs (`CRYPTOPERF_PROFILE_CTL` for commands,
//! `CRYPTOPERF_PROFILE_ACK` for perf's answers; `cryptoperf explain` sets them and starts perf
//! with its events disabled), [`window_starts`] enables perf's events and [`window_ends`]
//! disables them, each waiting for perf's acknowledgement, so the profile holds the window and
//! nothing else (not the start-up, the known-answer tests or the warm-up). Without them both do
//! nothing.

use std::io::{BufRead, BufReader, Write};
use std::sync::{Mutex, OnceLock};

/// The FIFO perf reads commands from.
pub const CTL_ENV: &str = "CRYPTOPERF_PROFILE_CTL";
/// The FIFO perf acknowledges them on.
pub const ACK_ENV: &str = "CRYPTOPERF_PROFILE_ACK";

struct Control {
    ctl: std::fs::File,
    ack: BufReader<std::fs::File>,
}

fn control() -> &'static Option<Mutex<Control>> {
    static CONTROL: OnceLock<Option<Mutex<Control>>> = OnceLock::new();
    CONTROL.get_or_init(|| {
        let (ctl, ack) = (std::env::var_os(CTL_ENV)?, std::env::var_os(ACK_ENV)?);
        let ctl = std::fs::OpenOptions::new().write(true).open(ctl).ok()?;
        let ack = BufReader::new(std::fs::File::open(ack).ok()?);
        Some(Mutex::new(Control { ctl, ack }))
    })
}

fn say(command: &str) {
    if let Some(c) = control() {
        let mut c = c.lock().unwrap_or_else(|e| e.into_inner());
        if writeln!(c.ctl, "{command}").and_then(|_| c.ctl.flush()).is_ok() {
            let mut line = String::new();
            let _ = c.ack.read_line(&mut line); // perf answers "ack"
        }
    }
}

/// The window starts now: a profiler under control starts sampling.
pub fn window_starts() {
    say("enable");
}

/// The window has ended: a profiler under control stops sampling.
pub fn window_ends() {
    say("disable");
}
