//! System-wide CPU accounting from `/proc/stat`, read around every measuring window: steal
//! (time the hypervisor gave our vCPUs to someone else) and busy time (other load).

/// Cumulative ticks (USER_HZ) of the aggregate `cpu` line of `/proc/stat`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuTicks {
    /// All ticks: user + nice + system + idle + iowait + irq + softirq + steal.
    pub total: u64,
    /// Ticks the CPUs were neither idle nor waiting for I/O.
    pub busy: u64,
    /// Ticks stolen by the hypervisor.
    pub steal: u64,
}

impl CpuTicks {
    /// Read the current counters; all zero where `/proc/stat` is unreadable (not Linux).
    pub fn now() -> CpuTicks {
        std::fs::read_to_string("/proc/stat")
            .ok()
            .and_then(|text| parse(&text))
            .unwrap_or_default()
    }

    /// Ticks elapsed since `earlier` (saturating, so a counter reset cannot underflow).
    pub fn since(self, earlier: CpuTicks) -> CpuTicks {
        CpuTicks {
            total: self.total.saturating_sub(earlier.total),
            busy: self.busy.saturating_sub(earlier.busy),
            steal: self.steal.saturating_sub(earlier.steal),
        }
    }
}

/// Parse the first (`cpu `) line of a `/proc/stat` text.
fn parse(text: &str) -> Option<CpuTicks> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line.split_whitespace().skip(1).filter_map(|f| f.parse().ok()).collect();
    // user nice system idle iowait irq softirq steal [guest guest_nice: already in user/nice]
    let field = |i: usize| v.get(i).copied().unwrap_or(0);
    let total: u64 = (0..8).map(field).sum();
    let idle = field(3) + field(4);
    Some(CpuTicks { total, busy: total - idle, steal: field(7) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_aggregate_line() {
        let text = "cpu  100 5 50 1000 20 3 2 7 0 0\ncpu0 50 2 25 500 10 1 1 3 0 0\n";
        let t = parse(text).unwrap();
        assert_eq!(t.total, 100 + 5 + 50 + 1000 + 20 + 3 + 2 + 7);
        assert_eq!(t.busy, t.total - 1020);
        assert_eq!(t.steal, 7);
        let later = CpuTicks { total: t.total + 10, busy: t.busy + 4, steal: t.steal + 1 };
        assert_eq!(later.since(t), CpuTicks { total: 10, busy: 4, steal: 1 });
    }
}
