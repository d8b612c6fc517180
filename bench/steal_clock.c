/*
 * steal_clock: does CLOCK_THREAD_CPUTIME_ID count time the hypervisor stole?
 *
 * One thread, pinned to one CPU, busy-loops through many windows of wall time. Around each
 * window it reads
 *   - CLOCK_MONOTONIC (wall time) and CLOCK_THREAD_CPUTIME_ID (the thread's CPU time, which
 *     the kernel takes from the task's sum_exec_runtime),
 *   - /proc/thread-self/schedstat: sum_exec_runtime and run_delay (time spent runnable but
 *     waiting for the CPU while another task of this guest ran on it; the scheduler measures
 *     it on rq->clock, which includes steal),
 *   - the steal column of the pinned CPU's line in /proc/stat (USER_HZ ticks: 10 ms steps),
 *   - where debugfs is mounted, the CPU's `.clock` and `.clock_task` from the scheduler's
 *     debug file (<debugfs>/sched/debug, ns): rq->clock runs with sched_clock, rq->clock_task
 *     without the steal (and, with CONFIG_IRQ_TIME_ACCOUNTING, the IRQ time) subtracted from it
 *     in kernel/sched/core.c, update_rq_clock_task(), so their difference grows by the steal the
 *     scheduler took out, to the nanosecond.
 *
 * A busy thread that never sleeps is either running or waiting in the run queue, so
 *     wall - thread CPU - run_delay
 * is the time the guest saw it as running that its CPU clock did not count. If the thread
 * clock excludes stolen time (paravirt steal accounting subtracts steal from rq->clock_task,
 * on which sum_exec_runtime advances), that residue follows the CPU's steal ticks; if the
 * clock counts steal as on-CPU time, the residue stays near zero whatever the steal.
 *
 * Build and run (Linux; any C99 compiler):
 *     cc -O2 -o /tmp/steal_clock bench/steal_clock.c
 *     /tmp/steal_clock [--cpu N] [--windows W] [--seconds S] [--quiet] [--sched-debug PATH]
 * Defaults: --cpu 1 --windows 60 --seconds 1 --sched-debug /sys/kernel/debug/sched/debug (as
 * root: `mount -t debugfs none /sys/kernel/debug` if it is not mounted; without it the program
 * relates the residue to /proc/stat's ticks only). The program pins itself to --cpu (no taskset
 * needed). It prints one line per window (unless --quiet) and a summary: totals of wall time,
 * thread CPU time, run_delay, the residue and the CPU's steal, split between windows with and
 * without steal ticks, and the scheduler's own steal (clock - clock_task) where readable, with
 * the windows where it exceeds 0.1 ms. Steal on an idle cloud host is rare, so run many
 * windows; /proc/stat counts steal in 10 ms ticks, so without debugfs single windows are
 * coarse and only totals are meaningful.
 * Not a test: it asserts nothing and is run on demand. Result and host in
 * docs/methodology.md, "Clocks".
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int64_t now_ns(clockid_t id) {
    struct timespec ts;
    if (clock_gettime(id, &ts) != 0) {
        perror("clock_gettime");
        exit(1);
    }
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* The steal column (8th value) of "cpuN" in /proc/stat, in USER_HZ ticks. */
static int64_t steal_ticks(int cpu) {
    char want[32], line[512];
    snprintf(want, sizeof want, "cpu%d ", cpu);
    FILE *f = fopen("/proc/stat", "r");
    if (!f) {
        perror("/proc/stat");
        exit(1);
    }
    int64_t steal = -1;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, want, strlen(want)) == 0) {
            long long v[8] = {0};
            if (sscanf(line + strlen(want), "%lld %lld %lld %lld %lld %lld %lld %lld", &v[0], &v[1],
                       &v[2], &v[3], &v[4], &v[5], &v[6], &v[7]) == 8)
                steal = v[7];
            break;
        }
    }
    fclose(f);
    if (steal < 0) {
        fprintf(stderr, "no steal column for cpu%d in /proc/stat\n", cpu);
        exit(1);
    }
    return steal;
}

/* .clock - .clock_task of cpu N in the scheduler's debug file, in ns; -1 if unreadable. */
static int64_t sched_steal_ns(const char *path, int cpu) {
    if (!path) return -1;
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char want[32], line[512];
    snprintf(want, sizeof want, "cpu#%d,", cpu);
    int in_cpu = 0;
    double clock = -1, clock_task = -1;
    while (fgets(line, sizeof line, f)) {
        if (!strncmp(line, "cpu#", 4)) in_cpu = !strncmp(line, want, strlen(want));
        if (!in_cpu) continue;
        char *colon = strchr(line, ':');
        if (!colon) continue;
        if (strstr(line, ".clock_task ")) clock_task = atof(colon + 1);
        else if (strstr(line, ".clock ")) clock = atof(colon + 1);
        if (clock >= 0 && clock_task >= 0) break;
    }
    fclose(f);
    if (clock < 0 || clock_task < 0) return -1;
    return (int64_t)((clock - clock_task) * 1e6); /* the file prints ms with 6 decimals */
}

/* sum_exec_runtime and run_delay (ns) of this thread. */
static void schedstat(int64_t *exec_ns, int64_t *delay_ns) {
    FILE *f = fopen("/proc/thread-self/schedstat", "r");
    long long e = 0, d = 0;
    if (!f || fscanf(f, "%lld %lld", &e, &d) != 2) {
        fprintf(stderr, "cannot read /proc/thread-self/schedstat (CONFIG_SCHED_INFO?)\n");
        exit(1);
    }
    fclose(f);
    *exec_ns = e;
    *delay_ns = d;
}

int main(int argc, char **argv) {
    int cpu = 1, windows = 60, quiet = 0;
    double seconds = 1.0;
    const char *sched_debug = "/sys/kernel/debug/sched/debug";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--cpu") && i + 1 < argc) cpu = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--windows") && i + 1 < argc) windows = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--seconds") && i + 1 < argc) seconds = atof(argv[++i]);
        else if (!strcmp(argv[i], "--quiet")) quiet = 1;
        else if (!strcmp(argv[i], "--sched-debug") && i + 1 < argc) sched_debug = argv[++i];
        else {
            fprintf(stderr, "usage: %s [--cpu N] [--windows W] [--seconds S] [--quiet] "
                            "[--sched-debug PATH]\n", argv[0]);
            return 2;
        }
    }
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0) {
        perror("sched_setaffinity");
        return 1;
    }
    const double tick_ms = 1000.0 / (double)sysconf(_SC_CLK_TCK);
    const int64_t window_ns = (int64_t)(seconds * 1e9);

    double t_wall = 0, t_cpu = 0, t_delay = 0, t_resid = 0, t_steal = 0;
    double s_resid = 0, s_steal = 0, n_resid = 0; /* windows with / without steal ticks */
    int s_windows = 0;
    int have_sched = sched_steal_ns(sched_debug, cpu) >= 0;
    double t_sched = 0, q_resid = 0, q_sched = 0; /* scheduler's steal; windows where it is > 0.1 ms */
    int q_windows = 0;
    double max_exec_vs_clock = 0;
    volatile uint64_t sink = 0;

    if (!quiet)
        printf("%6s %10s %10s %10s %10s %10s %12s\n", "window", "wall_ms", "cpu_ms", "delay_ms",
               "resid_ms", "steal_ms", "sched_steal");
    for (int w = 0; w < windows; w++) {
        int64_t st0 = steal_ticks(cpu), k0 = have_sched ? sched_steal_ns(sched_debug, cpu) : 0, e0, d0;
        schedstat(&e0, &d0);
        int64_t c0 = now_ns(CLOCK_THREAD_CPUTIME_ID), m0 = now_ns(CLOCK_MONOTONIC);
        int64_t m1 = m0;
        while (m1 - m0 < window_ns) {
            for (int k = 0; k < 1000; k++) sink = sink * 6364136223846793005ULL + 1442695040888963407ULL;
            m1 = now_ns(CLOCK_MONOTONIC);
        }
        int64_t c1 = now_ns(CLOCK_THREAD_CPUTIME_ID), e1, d1;
        schedstat(&e1, &d1);
        int64_t st1 = steal_ticks(cpu), k1 = have_sched ? sched_steal_ns(sched_debug, cpu) : 0;
        double ksteal = (k1 - k0) / 1e6;

        double wall = (m1 - m0) / 1e6, cpu_ms = (c1 - c0) / 1e6, delay = (d1 - d0) / 1e6;
        double resid = wall - cpu_ms - delay, steal = (double)(st1 - st0) * tick_ms;
        /* sum_exec_runtime around the window should match the thread clock, up to the slice the
         * scheduler has not yet folded into it (the thread clock adds that slice; schedstat does not) */
        double diff = ((e1 - e0) - (c1 - c0)) / 1e6;
        if (diff < 0) diff = -diff;
        if (diff > max_exec_vs_clock) max_exec_vs_clock = diff;
        t_wall += wall; t_cpu += cpu_ms; t_delay += delay; t_resid += resid; t_steal += steal;
        if (st1 > st0) { s_resid += resid; s_steal += steal; s_windows++; }
        else n_resid += resid;
        t_sched += ksteal;
        if (ksteal > 0.1) { q_resid += resid; q_sched += ksteal; q_windows++; }
        if (!quiet) {
            printf("%6d %10.3f %10.3f %10.3f %10.3f %10.1f", w, wall, cpu_ms, delay, resid, steal);
            if (have_sched) printf(" %12.3f", ksteal);
            printf("\n");
        }
        fflush(stdout);
    }
    printf("\ncpu%d, %d windows of %.3g s (%.1f s of wall time)\n", cpu, windows, seconds, t_wall / 1e3);
    printf("thread CPU time        %12.3f ms (wall - CPU = %.3f ms)\n", t_cpu, t_wall - t_cpu);
    printf("run_delay              %12.3f ms (waiting for other tasks of this guest)\n", t_delay);
    printf("residue                %12.3f ms (wall - CPU - run_delay)\n", t_resid);
    printf("steal on cpu%d          %12.1f ms (/proc/stat, %.0f ms ticks)\n", cpu, t_steal, tick_ms);
    printf("windows with steal     %12d: residue %.3f ms, steal %.1f ms\n", s_windows, s_resid, s_steal);
    printf("windows without steal  %12d: residue %.3f ms\n", windows - s_windows, n_resid);
    printf("schedstat exec vs CLOCK_THREAD_CPUTIME_ID: max |difference| per window %.3f ms "
           "(up to a scheduler tick)\n", max_exec_vs_clock);
    if (have_sched) {
        printf("scheduler's steal      %12.3f ms (cpu%d .clock - .clock_task, %s)\n", t_sched, cpu, sched_debug);
        printf("windows with > 0.1 ms  %12d: residue %.3f ms, scheduler's steal %.3f ms\n", q_windows,
               q_resid, q_sched);
    } else {
        printf("scheduler's steal      unreadable (%s): mount debugfs for ns resolution\n", sched_debug);
    }
    if (t_steal > 0)
        printf("residue / steal = %.3f (about 1: the thread clock excludes steal; about 0: it counts it)\n",
               t_resid / t_steal);
    else
        printf("no steal on cpu%d during the run: nothing to relate the residue to\n", cpu);
    return (int)(sink & 0); /* keep the loop's result live */
}
