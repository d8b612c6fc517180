"""Contrasts (issue 25): any pair of a study's configurations compared paired, block by block,
in the study's multiplicity family — ``[[contrast]]`` in the study file, and ``report RUN
--reference CONFIG`` after the fact. The fake worker's scripted latencies give known ratios:
A × 1, B × 1.5, C × 3, so C ÷ B = 2 and A ÷ B = 2/3 in every block, whatever the block's drift."""

import json

import pytest

from conftest import assert_one_line_error
from cryptoperf import stats, study
from cryptoperf.errors import StudyError

DRIFT = [1.0, 1.05, 0.97, 1.02, 0.99]

THREE = """\
[study]
name = "t"
baseline = "A"
backends = ["openssl"]
repetitions = {reps}
seconds = 0.01
warmup_s = 0
timeout_s = 5
{extra}
[[configuration]]
name = "A"

[[configuration]]
name = "B"

[[configuration]]
name = "C"

[[operation]]
label = "hash"
op = "sha256"
sizes = [1024]
{contrasts}"""

C_VS_B = '[[contrast]]\nbaseline = "B"\nconfiguration = "C"\n'


def three(contrasts: str = C_VS_B, reps: int = 5, extra: str = "") -> str:
    return THREE.format(reps=reps, extra=extra, contrasts="\n" + contrasts if contrasts else "")


# ----------------------------------------------------------------------------- the study file


def with_d(text: str) -> str:
    """The study with a fourth configuration, D."""
    return text.replace('[[configuration]]\nname = "C"', '[[configuration]]\nname = "C"\n\n[[configuration]]\nname = "D"')


def test_a_contrast_is_parsed_with_its_default_name():
    s = study.parse(with_d(three(C_VS_B + '\n[[contrast]]\nname = "D against C"\nbaseline = "C"\nconfiguration = "D"\n')))
    assert [(k.name, k.baseline, k.configuration, k.index) for k in s.contrasts] == [
        ("C vs B", "B", "C", 0), ("D against C", "C", "D", 1)]
    assert study.parse(three("")).contrasts == ()


@pytest.mark.parametrize("contrast, line, where, problem", [
    ('baseline = "B"\nconfiguration = "D"', 26, "contrast 'D vs B', field 'configuration'",
     "no configuration named \"D\" (configurations: A, B, C)"),
    ('baseline = "b"\nconfiguration = "C"', 25, "contrast 'C vs b', field 'baseline'",
     "no configuration named \"b\" (configurations: A, B, C)"),
    ('baseline = "C"\nconfiguration = "C"', 26, "field 'configuration'",
     "'C' is also the contrast's baseline; a contrast compares two different configurations"),
    ('baseline = "A"\nconfiguration = "C"', 25, "field 'baseline'",
     "duplicates a comparison the study makes already: every configuration is compared with the baseline 'A'"),
    ('baseline = "C"\nconfiguration = "A"', 25, "field 'baseline'", "duplicates a comparison the study makes already"),
    ('baseline = "B"', 24, "contrast #1", "missing required key 'configuration'"),
    ('baseline = "B"\nconfiguration = "C"\nreference = "A"', 27, "field 'reference'",
     "unknown key (known: baseline, configuration, name)"),
])
def test_a_wrong_contrast_is_one_line_naming_file_line_and_key(contrast, line, where, problem):
    with pytest.raises(StudyError) as e:
        study.parse(three("[[contrast]]\n" + contrast + "\n"), "s.toml")
    text = str(e.value)
    assert "\n" not in text
    assert text.startswith(f"s.toml:{line}: contrast ") and where in text, text
    assert problem in text, text


def test_a_contrast_given_twice_either_way_round_or_a_name_twice_is_refused():
    twice = C_VS_B + '\n[[contrast]]\nbaseline = "C"\nconfiguration = "B"\n'
    with pytest.raises(StudyError, match=r"s.toml:30: contrast 'B vs C', field 'configuration': duplicate "
                                         r"contrast: contrast #1 compares the same two configurations"):
        study.parse(three(twice), "s.toml")
    named = with_d(three(C_VS_B.replace("[[contrast]]", '[[contrast]]\nname = "x"')))
    named = named + '\n[[contrast]]\nname = "x"\nbaseline = "B"\nconfiguration = "D"\n'
    with pytest.raises(StudyError, match=r"contrast 'x', field 'name': duplicate contrast name 'x'"):
        study.parse(named, "s.toml")


def test_a_contrast_of_configurations_pinned_to_different_backends_is_refused():
    text = three().replace('name = "B"', 'name = "B"\nbackend = "openssl"').replace(
        'name = "C"', 'name = "C"\nbackend = "aws-lc"').replace('backends = ["openssl"]', 'backends = ["openssl", "aws-lc"]')
    with pytest.raises(StudyError, match=r"'C' runs on backend aws-lc only and 'B' on openssl only: "
                                         "they never run side by side"):
        study.parse(text, "s.toml")


def test_the_cli_refuses_a_wrong_contrast_in_one_line(cli, write_study, fake_worker):
    fake_worker()
    res = cli("study", write_study(three('[[contrast]]\nbaseline = "B"\nconfiguration = "X"\n')), "--dry-run")
    assert_one_line_error(res, "study.toml:26", "contrast 'X vs B', field 'configuration'", 'no configuration named "X"')


def test_options_list_the_contrast_keys():
    text = study.options_help()
    assert "[[contrast]]" in text and "multiplicity family" in text


# --------------------------------------------------------------------- decided from the blocks


def run_three(cli, write_study, tmp_path, text: str):
    res = cli("study", write_study(text), "--out", tmp_path / "out", "--no-report")
    assert res.code == 0, res.err
    return res, json.loads(next((tmp_path / "out").glob("t-*.json")).read_text())


def test_a_contrast_is_decided_from_the_same_blocks_in_the_studys_family(cli, write_study, fake_worker, tmp_path):
    """C ÷ B = 2 in every block (the drift is shared, so pairing cancels it): the contrast says
    2× slower over the 5 blocks both ran; the family is the two comparisons with the baseline and
    the contrast — three — in the dry run's power line and in the intervals' level."""
    fake_worker({"config_factor": {"B": 1.5, "C": 3.0}, "rep_factors": DRIFT})
    dry = cli("study", write_study(three()), "--dry-run")
    assert dry.code == 0, dry.err
    expected = stats.smallest_effect(5, 0.03, 3) * 100
    (power,) = [l for l in dry.err.splitlines() if l.startswith("power: ")]
    assert f"finds a change of {expected:.1f} % at CV 3 % per repetition (5 blocks, 3 comparisons adjusted together)" in power

    res, doc = run_three(cli, write_study, tmp_path, three())
    pairs = {(d["configuration"], d["baseline"]): d for d in doc["deltas"]}
    assert set(pairs) == {("B", "A"), ("C", "A"), ("C", "B")}
    d = pairs[("C", "B")]
    assert d["latency"]["ratio"] == pytest.approx(2.0, rel=1e-3)
    assert d["latency"]["ci_low"] == pytest.approx(2.0, rel=3e-3) == d["latency"]["ci_high"]
    assert d["throughput"]["ratio"] == pytest.approx(0.5, rel=1e-3)
    assert d["verdict"]["kind"] == "slower" and d["blocks"] == 5 and d["baseline_op"] == "sha256"
    assert pairs[("B", "A")]["latency"]["ratio"] == pytest.approx(1.5, rel=1e-3)
    assert doc["analysis"]["comparisons"] == 3
    assert doc["analysis"]["level"] == pytest.approx(stats.adjusted_level(0.95, 3, 1))
    assert "Bonferroni over 3 comparisons" in doc["analysis"]["method"]
    assert doc["analysis"]["reference"] is None
    rows = [l for l in res.out.splitlines() if " C vs B " in l]
    assert len(rows) == 1 and "2.0× higher" in rows[0], res.out
    assert "in a contrast's row, the configuration after 'vs'" in " ".join(res.out.split()), res.out


def test_reports_name_the_contrasts_reference(cli, write_study, fake_worker, tmp_path):
    fake_worker({"config_factor": {"B": 1.5, "C": 3.0}})
    run_three(cli, write_study, tmp_path, three())
    store = tmp_path / "runs.sqlite"
    md = cli("report", "--store", store, "--format", "md", "-o", "-")
    assert md.code == 0, md.err
    (line,) = [l for l in md.out.splitlines() if l.startswith("- ") and "C vs B" in l]
    assert line.startswith("- hash 1 KiB on openssl, C vs B: p50 latency 2.0× higher"), line
    html = cli("report", "--store", store, "--format", "html", "-o", "-")
    assert html.code == 0, html.err
    assert "openssl C vs B" in html.out


def test_report_reference_reanalyses_against_another_configuration(cli, write_study, fake_worker, tmp_path):
    """``report --reference B``: A and C each against B, paired by block — A ÷ B = 2/3, C ÷ B = 2
    — two comparisons adjusted as their own family, which the method says; in every format."""
    fake_worker({"config_factor": {"B": 1.5, "C": 3.0}, "rep_factors": DRIFT})
    run_three(cli, write_study, tmp_path, three())
    store = tmp_path / "runs.sqlite"
    res = cli("report", "latest", "--reference", "B", "--format", "json", "--store", store, "-o", "-")
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    ratios = {(d["configuration"], d["baseline"]): d["latency"]["ratio"] for d in doc["deltas"]}
    assert ratios == {("A", "B"): pytest.approx(2 / 3, rel=1e-3), ("C", "B"): pytest.approx(2.0, rel=1e-3)}
    assert {d["verdict"]["kind"] for d in doc["deltas"]} == {"faster", "slower"}
    a = doc["analysis"]
    assert a["comparisons"] == 2 and a["reference"] == "B"
    assert a["level"] == pytest.approx(stats.adjusted_level(0.95, 2, 1))
    assert a["method"].startswith("re-analysed against the reference B: every other configuration compared with it, "
                                  "block by block, its 2 comparisons adjusted as a family of their own (not with the study's)")
    assert "Bonferroni over 2 comparisons" in a["method"]
    md = cli("report", "latest", "--reference", "B", "--format", "md", "--store", store, "-o", "-")
    assert md.code == 0, md.err
    assert "re-analysed against the reference B" in md.out and "against the baseline **B**" in md.out
    assert "- hash 1 KiB on openssl, A: p50 latency" in md.out and "- hash 1 KiB on openssl, C: p50 latency 2.0× higher" in md.out
    for fmt in ("html", "csv"):
        out = cli("report", "latest", "--reference", "B", "--format", fmt, "--store", store, "-o", "-")
        assert out.code == 0, out.err
    assert "re-analysed against the reference B" in cli("report", "--reference", "B", "--store", store, "-o", "-").out
    # without -o, the file is named for its reference, beside the run's own report
    written = cli("report", "latest", "--reference", "B", "--store", store)
    assert written.code == 0, written.err
    assert written.out.strip().endswith("-run1-vs-B.html"), written.out


def test_report_reference_must_name_a_configuration_of_the_run(cli, write_study, fake_worker, tmp_path):
    fake_worker()
    run_three(cli, write_study, tmp_path, three(""))
    res = cli("report", "--reference", "D", "--store", tmp_path / "runs.sqlite", "-o", "-")
    assert_one_line_error(res, "--reference D: run 1 (study t) has no such configuration (configurations: A, B, C)",
                          code=2)


# ------------------------------------------------------------------------------- sequential


def test_a_sequential_study_keeps_an_undecided_contrasts_configurations_running(cli, write_study, fake_worker,
                                                                             tmp_path):
    """B and C are both 10× A (2 % noise): each against A is decided at the first look (3
    blocks), C against B is not; the later looks run B and C only, and the contrast is decided
    on every block both ran."""
    fake_worker({"noise_cv": 0.02, "config_factor": {"B": 10.0, "C": 10.0}})
    text = three(reps=3, extra='until = "decided"\nmax_repetitions = 24')
    _, doc = run_three(cli, write_study, tmp_path, text)
    pairs = {(d["configuration"], d["baseline"]): d for d in doc["deltas"]}
    assert pairs[("B", "A")]["blocks"] == pairs[("C", "A")]["blocks"] == 3
    assert pairs[("B", "A")]["verdict"]["kind"] == pairs[("C", "A")]["verdict"]["kind"] == "slower"
    contrast = pairs[("C", "B")]
    assert contrast["blocks"] in (6, 12, 24)
    blocks = {c: {r["block"] for r in doc["repetitions"] if r["block"] > 0 and not r["superseded"]
                  and r["configuration"] == c} for c in "ABC"}
    assert blocks["A"] == {1, 2, 3}
    assert blocks["B"] == blocks["C"] == set(range(1, contrast["blocks"] + 1))
    assert doc["analysis"]["comparisons"] == 3 and "and 4 looks" in doc["analysis"]["method"]
