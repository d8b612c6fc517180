"""Statistics: pure functions on numbers.

Nothing here knows about studies, cells or workers (that is ``analysis.py``); functions take
numbers, arrays, histograms or a worker result's counters and return numbers. Nothing here is
random, so every interval reproduces from the stored values.

- ``figures``: per-run figures (latency percentiles from HdrHistograms, throughput and CPU from
  counters, the coefficient of variation).
- ``intervals``: Student t intervals on the log scale, Bonferroni multiplicity, power.
- ``verdicts``: what an interval says against an equivalence margin, in words.
- ``outliers``: the screen that sets disturbed repetitions aside (Rosner's generalized ESD).

The rules are checked by simulation through these very functions in ``cryptoperf.simulate``.
The names below are the room's public face: callers write ``stats.decide``, ``stats.Interval``.
"""

from cryptoperf.stats.figures import (HISTOGRAM_MAX_NS, HISTOGRAM_SIGFIG, PERCENTILES, Latency, Throughput,
                                      cdf, cv, decode_histogram, histogram_bucket, histogram_resolution,
                                      latency_from_histogram, latency_of, merge_histograms, throughput)
from cryptoperf.stats.intervals import (BONFERRONI, DEFAULT_LEVEL, DEFAULT_MARGIN_PCT, DEFAULT_POWER, JOB_SD_T,
                                        JOBS_T, MIN_BLOCKS, PAIRED_T, RUN_SD_T, RUNS_T, WELCH_T, Estimate,
                                        Interval, adjusted_level, log_interval, log_mean, mean_interval,
                                        paired_log_ratio, positive_logs, power, smallest_effect, t_quantile,
                                        welch_log_ratio)
from cryptoperf.stats.verdicts import (ASSUMED_SD, BY_LOAD, EQUIVALENT, FASTER, HINT_PROBABILITY, INCONCLUSIVE,
                                       MAX_PROJECTED_BLOCKS, METRICS, OPERATION, RATIO_FORM_AT, SLOWER,
                                       VERDICT_KINDS, Transaction, Verdict, blocks_to_decide, change_words,
                                       decide, decide_probability, factor_form, factor_text, hint_text,
                                       metric_for, metric_key)

__all__ = [
    "HISTOGRAM_MAX_NS", "HISTOGRAM_SIGFIG", "PERCENTILES", "Latency", "Throughput", "cdf", "cv",
    "decode_histogram", "histogram_bucket", "histogram_resolution", "latency_from_histogram", "latency_of",
    "merge_histograms", "throughput",
    "BONFERRONI", "DEFAULT_LEVEL", "DEFAULT_MARGIN_PCT", "DEFAULT_POWER", "JOB_SD_T", "JOBS_T", "MIN_BLOCKS",
    "PAIRED_T", "RUN_SD_T", "RUNS_T", "WELCH_T", "Estimate", "Interval", "adjusted_level", "log_interval",
    "log_mean", "mean_interval", "paired_log_ratio", "positive_logs", "power", "smallest_effect", "t_quantile",
    "welch_log_ratio",
    "ASSUMED_SD", "BY_LOAD", "EQUIVALENT", "FASTER", "HINT_PROBABILITY", "INCONCLUSIVE", "MAX_PROJECTED_BLOCKS",
    "METRICS", "OPERATION", "RATIO_FORM_AT", "SLOWER", "VERDICT_KINDS", "Transaction", "Verdict",
    "blocks_to_decide", "change_words", "decide", "decide_probability", "factor_form", "factor_text", "hint_text",
    "metric_for", "metric_key",
]
