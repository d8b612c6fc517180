"""The host: a fingerprint stored with every run, and checks that warn about noisy hosts.

``fingerprint`` says what machine the numbers belong to (CPU model and crypto flags, kernel,
hypervisor, logical CPUs, library versions), so stored runs are compared only with runs from
like machines. The checks (CPU governor, turbo, SMT, steal, other load) are one small class
each, run from one ordered list (``CHECKS``); each gives a state and advice. Nothing here fails:
what cannot be read is reported as unknown.
"""

from __future__ import annotations

import errno
import os
import platform
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, TYPE_CHECKING, Any, Mapping

if TYPE_CHECKING:  # pragma: no cover
    from cryptoperf.result import WorkerResult

CRYPTO_FLAGS = ("aes", "pclmulqdq", "sha_ni", "avx", "avx2", "avx512f", "vaes", "vpclmulqdq")


def _read(path: str | Path) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


def _cpuinfo() -> tuple[str | None, set[str]]:
    """(model name, flags) of the first CPU in /proc/cpuinfo; (None, set()) if unreadable."""
    text = _read("/proc/cpuinfo") or ""
    model, flags = None, set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "model name" and model is None:
            model = value.strip()
        elif key in ("flags", "Features") and not flags:
            flags = set(value.split())
    return model, flags


#: The CPU mask capability names (the worker's ``clears``) that /proc/cpuinfo spells otherwise.
_CPUINFO_NAMES = {"sha": "sha_ni"}


def cpu_flags(names: "Iterable[str]") -> dict[str, bool]:
    """Whether this CPU has each capability of ``names`` (the worker's names: ``aes``,
    ``sha``, ``avx512ifma``...), from /proc/cpuinfo's flags; all False when unreadable."""
    _, flags = _cpuinfo()
    return {n: _CPUINFO_NAMES.get(n, n) in flags for n in names}


def _detect_virt(flag: str) -> str | None:
    """``systemd-detect-virt FLAG`` output ('none' → None), or None if not installed."""
    tool = shutil.which("systemd-detect-virt")
    if not tool:
        return None
    try:
        r = subprocess.run([tool, flag], capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    out = r.stdout.strip()
    return out if out and out != "none" else None


def hypervisor() -> dict[str, Any]:
    """``{"present": bool|None, "type": str|None, "container": str|None, "source": str}``.

    ``present`` comes from the cpuinfo ``hypervisor`` flag and /sys/hypervisor/type; ``type``
    from /sys/hypervisor/type or ``systemd-detect-virt --vm`` (kvm, xen, ...); ``container``
    from ``systemd-detect-virt --container`` (docker, lxc, ...). None means unknown.
    """
    _, flags = _cpuinfo()
    present: bool | None = ("hypervisor" in flags) if flags else None
    sources = ["cpuinfo"] if flags else []
    kind = _read("/sys/hypervisor/type")
    if kind:
        present = True
        sources.append("/sys/hypervisor/type")
    vm = _detect_virt("--vm")
    container = _detect_virt("--container")
    if vm or container or shutil.which("systemd-detect-virt"):
        sources.append("systemd-detect-virt")
    if vm:
        present, kind = True, kind or vm
    return {"present": present, "type": kind, "container": container, "source": "+".join(sources)}


def fingerprint(hello: Mapping[str, Any] | None = None,
                other_builds: Mapping[str, Mapping[str, Any]] | None = None) -> dict[str, Any]:
    """The host fingerprint as a JSON-ready dict.

    Keys: ``cpu_model``, ``crypto_flags`` (those of CRYPTO_FLAGS present), ``logical_cpus``,
    ``kernel`` (uname release and version), ``machine``, ``os``, ``hostname``, ``hypervisor``
    (see ``hypervisor()``), ``python``, and from the worker's ``hello`` (when given)
    ``worker_version``, ``worker_cpu``, ``libraries`` (backend → library, version, fips) and
    ``workloads`` (workload → ``{"transaction": {"one": …, "many": …}}``, what one transaction
    is as the worker names it, for figure names and verdict texts; workers that do not say
    leave it out). ``other_builds`` (build name → that worker's hello) adds ``builds``: build name →
    ``{"libraries": ...}`` in the same shape, for the worker builds other than the default
    that the run used (the FIPS build, another OpenSSL).
    """
    model, flags = _cpuinfo()
    u = platform.uname()
    fp: dict[str, Any] = {
        "cpu_model": model or u.processor or None,
        "crypto_flags": [f for f in CRYPTO_FLAGS if f in flags],
        "logical_cpus": os.cpu_count(),
        "kernel": f"{u.system} {u.release} {u.version}",
        "machine": u.machine,
        "os": platform.platform(),
        "hostname": u.node,
        "hypervisor": hypervisor(),
        "python": platform.python_version(),
    }
    if hello:
        fp["worker_version"] = hello.get("worker_version")
        fp["worker_cpu"] = hello.get("cpu")
        fp["libraries"] = _libraries(hello)
        words = {name: {"transaction": spec["transaction"]} for name, spec in (hello.get("op_params") or {}).items()
                 if isinstance(spec, Mapping) and spec.get("workload") and isinstance(spec.get("transaction"), Mapping)}
        if words:
            fp["workloads"] = words
    if other_builds:
        fp["builds"] = {name: {"worker_version": h.get("worker_version"),
                               "libraries": _libraries(h)} for name, h in other_builds.items()}
    return fp


def _libraries(hello: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    return {b["backend"]: {"library": b.get("library"), "library_version": b.get("library_version"),
                           "fips": b.get("fips")}
            for b in hello.get("backends", [])}


# --------------------------------------------------------------------------- host checks

@dataclass(frozen=True)
class CheckResult:
    """One check's finding: ``state`` is ``ok``, ``warning`` or ``unknown``; ``value`` what was
    read; ``advice`` what to do (empty when ok)."""

    name: str
    state: str
    value: str
    advice: str = ""

    def as_dict(self) -> dict[str, str]:
        """``name``, ``state``, ``value``, ``advice`` as a JSON-ready dict."""
        return dict(self.__dict__)


class Check:
    """A host check: subclasses set ``name`` and implement ``run()``."""

    name = "check"

    def run(self) -> CheckResult:  # pragma: no cover - interface
        """Inspect the host; never raises."""
        raise NotImplementedError

    def result(self, state: str, value: str, advice: str = "") -> CheckResult:
        """A CheckResult carrying this check's name."""
        return CheckResult(self.name, state, value, advice)


class Governor(Check):
    """CPU frequency governor: ``performance`` keeps the clock steady."""

    name = "cpu governor"

    def run(self) -> CheckResult:
        """Read every CPU's scaling_governor."""
        govs = {g for p in Path("/sys/devices/system/cpu").glob("cpu[0-9]*/cpufreq/scaling_governor")
                if (g := _read(p))}
        if not govs:
            return self.result("unknown", "no cpufreq (typical in VMs)")
        if govs == {"performance"}:
            return self.result("ok", "performance")
        return self.result("warning", ",".join(sorted(govs)),
                           "set the governor to performance (cpupower frequency-set -g performance)")


class Turbo(Check):
    """Turbo/boost changes the clock with temperature and load."""

    name = "turbo"

    def run(self) -> CheckResult:
        """Read intel_pstate/no_turbo or cpufreq/boost."""
        no_turbo = _read("/sys/devices/system/cpu/intel_pstate/no_turbo")
        if no_turbo is not None:
            on = no_turbo == "0"
        else:
            boost = _read("/sys/devices/system/cpu/cpufreq/boost")
            if boost is None:
                return self.result("unknown", "not exposed")
            on = boost == "1"
        if on:
            return self.result("warning", "on", "disable turbo/boost for steadier numbers")
        return self.result("ok", "off")


class SMT(Check):
    """Simultaneous multithreading: a sibling thread shares the core's crypto units."""

    name = "smt"

    def run(self) -> CheckResult:
        """Read /sys/devices/system/cpu/smt/active."""
        active = _read("/sys/devices/system/cpu/smt/active")
        if active is None:
            return self.result("unknown", "not exposed")
        if active == "1":
            return self.result("warning", "active",
                               "keep other work off the sibling threads, or disable SMT")
        return self.result("ok", "inactive")


class Clocksource(Check):
    """The kernel's clocksource: ``tsc`` reads in ~20 ns through the vDSO; others (``hpet``,
    ``acpi_pm``, ``kvm-clock`` on some hosts) cost a system call or a slow device read per
    ``CLOCK_MONOTONIC``, which the batching then has to hide."""

    name = "clocksource"

    def run(self) -> CheckResult:
        """Read /sys/devices/system/clocksource/clocksource0/current_clocksource; warn unless tsc."""
        cs = _read("/sys/devices/system/clocksource/clocksource0/current_clocksource")
        if cs is None:
            return self.result("unknown", "not exposed")
        if cs == "tsc":
            return self.result("ok", cs)
        return self.result("warning", cs, "clock reads are slower than with tsc; timings of operations "
                           "under a few µs carry more clock overhead (see the batch column)")


def _proc_stat() -> tuple[int, int, int] | None:
    """(steal, idle+iowait, total) ticks from /proc/stat's aggregate line."""
    text = _read("/proc/stat")
    if not text:
        return None
    parts = text.splitlines()[0].split()
    if parts[0] != "cpu":
        return None
    v = [int(x) for x in parts[1:]]
    steal = v[7] if len(v) > 7 else 0
    idle = v[3] + (v[4] if len(v) > 4 else 0)
    return steal, idle, sum(v[:8])


class _StatWindow:
    """Samples /proc/stat over a short window, shared by the steal and load checks."""

    _cache: tuple[float, float] | None = None
    window_s = 0.25

    @classmethod
    def sample(cls) -> tuple[float, float] | None:
        """(steal %, busy %) system-wide over ``window_s``; None if unreadable."""
        if cls._cache is None:
            a = _proc_stat()
            time.sleep(cls.window_s)
            b = _proc_stat()
            if not a or not b or b[2] <= a[2]:
                return None
            total = b[2] - a[2]
            cls._cache = (100.0 * (b[0] - a[0]) / total, 100.0 * (total - (b[1] - a[1])) / total)
        return cls._cache


class Steal(Check):
    """Hypervisor steal time: CPU time the VM wanted but did not get."""

    name = "steal"

    def run(self) -> CheckResult:
        """Steal % over a short /proc/stat window; warn above 1 %."""
        s = _StatWindow.sample()
        if s is None:
            return self.result("unknown", "no /proc/stat")
        if s[0] > 1.0:
            return self.result("warning", f"{s[0]:.1f} %",
                               "the hypervisor is taking CPU time; results will be noisy")
        return self.result("ok", f"{s[0]:.1f} %")


class OtherLoad(Check):
    """Other processes using the CPU while we measure."""

    name = "other load"

    def run(self) -> CheckResult:
        """Busy % system-wide over a short /proc/stat window; warn above 10 %."""
        s = _StatWindow.sample()
        if s is None:
            return self.result("unknown", "no /proc/stat")
        if s[1] > 10.0:
            return self.result("warning", f"{s[1]:.0f} % busy",
                               "stop other work on this machine before measuring")
        return self.result("ok", f"{s[1]:.0f} % busy")


#: The host checks, in the order they run and are reported.
CHECKS: tuple[type[Check], ...] = (Governor, Turbo, SMT, Clocksource, Steal, OtherLoad)


def run_checks() -> list[CheckResult]:
    """Run every check in ``CHECKS`` (about 0.25 s: steal and load sample /proc/stat)."""
    _StatWindow._cache = None
    out = []
    for cls in CHECKS:
        try:
            out.append(cls().run())
        except Exception as e:  # a check must never stop a measurement
            out.append(CheckResult(cls.name, "unknown", f"check failed: {e}"))
    return out


def load_before() -> dict[str, float] | None:
    """The other load the host checks measured (``run_checks``, just before a study, when no
    worker runs): ``{"other_load_pct": busy % of all CPUs, "window_s": the window's length}``,
    or None when /proc/stat could not be read. The checks' window when they ran (else a new one)."""
    s = _StatWindow.sample()
    if s is None:
        return None
    return {"other_load_pct": round(s[1], 1), "window_s": _StatWindow.window_s}


# --------------------------------------------------------------------------- per repetition


def other_load_pct(result: "WorkerResult", logical_cpus: int) -> float | None:
    """Share of all CPUs (in %) that other work kept busy during a repetition's window: the
    system-wide busy ticks beyond the worker's own threads (its CPU time over the window, spread
    over ``logical_cpus``). None without the counters. ``result`` is a worker result; a socket
    workload's server process counts as the worker's own (``server.cpu_ns`` when it listened
    on an address; in memory mode the server side is already inside ``cpu_ns_total``), and so
    do a device's own process (a PKCS#11 token's daemon: ``device_process_cpu_ns``) and the
    workload's own client-side process (ike-sa's initiator daemon: ``peer_process_cpu_ns``)."""
    total, busy = result.total_ticks, result.busy_ticks
    wall, cpu = result.wall_ns, result.cpu_ns_total
    if not total or busy is None or not wall or cpu is None or logical_cpus < 1:
        return None
    server = result.server
    if server is not None and server.address and server.cpu_ns:
        cpu += server.cpu_ns + (server.device_process_cpu_ns or 0)
    cpu += (result.device_process_cpu_ns or 0) + (result.peer_process_cpu_ns or 0)
    own = 100.0 * cpu / (wall * logical_cpus)
    return max(0.0, 100.0 * busy / total - own)


# --------------------------------------------------------------------------- this process


def _start_ticks(pid: int) -> int | None:
    """The start time of process ``pid`` in clock ticks since boot (/proc/<pid>/stat field 22),
    None if there is no such process."""
    text = _read(f"/proc/{pid}/stat")
    if not text or ")" not in text:
        return None
    fields = text.rsplit(")", 1)[1].split()
    try:
        return int(fields[19])  # field 22 overall: the 20th after "pid (comm)"
    except (IndexError, ValueError):
        return None


def process_identity(job: str | None = None) -> dict[str, Any]:
    """Who is running this study, so that a later reader can tell whether it is still alive:
    ``pid``, ``start_ticks`` (its start time since boot), ``boot_id`` (this boot of this
    machine), ``hostname``, and with ``job`` the CI job's label (``ci_job``): the session whose
    runs a comparison across runs counts as one unit (``across_runs.Session``)."""
    out = {"pid": os.getpid(), "start_ticks": _start_ticks(os.getpid()),
           "boot_id": _read("/proc/sys/kernel/random/boot_id"), "hostname": platform.node()}
    if job:
        out["job"] = job
    return out


#: The CI job labels ``ci_job`` reads, in order: (system, the variables whose values make the
#: label, joined with '.'); a system's label is taken when its first variable is set.
CI_JOB_VARIABLES = (
    ("github", ("GITHUB_RUN_ID", "GITHUB_RUN_ATTEMPT", "GITHUB_JOB")),  # GitHub Actions
    ("gitlab", ("CI_JOB_ID",)),                                          # GitLab CI
    ("buildkite", ("BUILDKITE_JOB_ID",)),                                # Buildkite
    ("circleci", ("CIRCLE_WORKFLOW_JOB_ID",)),                           # CircleCI
    ("jenkins", ("BUILD_TAG",)),                                         # Jenkins: jenkins-JOB-NUMBER
    ("jenkins", ("JENKINS_URL", "BUILD_ID")),                            # Jenkins without BUILD_TAG
)
#: Longest job label kept (``--job``).
MAX_JOB_LABEL = 200


def ci_job(job: str | None = None, environ: Mapping[str, str] | None = None) -> str | None:
    """The label of the job making a run: ``job`` when given (``--job``; '' for none), else
    the first CI system of ``CI_JOB_VARIABLES`` whose variables are set in ``environ``
    (default ``os.environ``), as ``system:value.value`` (``github:9876543210.1.bench``,
    ``gitlab:4242``; Jenkins' ``JENKINS_URL`` is not part of its label), else None. Raises
    ValueError for a label longer than ``MAX_JOB_LABEL`` or with a control character."""
    if job is not None:
        label = job.strip()
        if len(label) > MAX_JOB_LABEL or any(ord(ch) < 32 for ch in label):
            raise ValueError(f"a job label is one line of at most {MAX_JOB_LABEL} characters")
        return label or None
    env = os.environ if environ is None else environ
    for system, names in CI_JOB_VARIABLES:
        if env.get(names[0]):
            parts = [env[n] for n in names if env.get(n) and n != "JENKINS_URL"]
            if parts:
                return f"{system}:" + ".".join(parts)[:MAX_JOB_LABEL]
    return None


def process_alive(identity: Mapping[str, Any] | None) -> bool | None:
    """Whether the process ``process_identity()`` described is still running: False when this
    machine rebooted since or the pid is gone or now names another process (another start
    time), True when it runs, None when it cannot be told (another machine, or no /proc)."""
    if not identity or not identity.get("pid"):
        return None
    if identity.get("hostname") != platform.node():
        return None
    boot = _read("/proc/sys/kernel/random/boot_id")
    if boot is None or identity.get("boot_id") is None:
        return None
    if boot != identity["boot_id"]:
        return False
    ticks = _start_ticks(int(identity["pid"]))
    return ticks is not None and ticks == identity.get("start_ticks")


def port_problem(address: str, port: int) -> str | None:
    """Why ``address:port`` cannot be listened on, or None (port 0 is always free: the kernel
    picks one). Tries to bind it and lets go at once."""
    if not 0 <= port <= 65535:
        return f"port {port} is not a TCP port (0..65535; 0 or none: any free port)"
    if port == 0:
        return None
    if "\0" in address or len(address) > 255:
        return f"address '{address[:60]}' is not an IP address or host name"
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        # As the worker's listener (Rust's TcpListener sets it): a port whose last connections
        # linger in TIME_WAIT is free to listen on.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((address, port))
        except OSError as e:
            if e.errno == errno.EADDRINUSE:
                return f"port {port} on {address} is in use; choose another port or leave it out (any free port)"
            return f"cannot listen on {address}:{port}: {e.strerror or e}"
        except (ValueError, UnicodeError) as e:  # a host name IDNA cannot encode, ...
            return f"cannot listen on {address}:{port}: {e}"
    return None
