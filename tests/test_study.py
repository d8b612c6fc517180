"""Study files: parsing, defaults, validation and its messages (file, line, field)."""

import json
from pathlib import Path

import pytest

from conftest import BACKENDS, worker_rules
from cryptoperf import builds, study
from cryptoperf.errors import StudyError
from cryptoperf.hello import WorkerRules

ROOT = Path(__file__).resolve().parents[1]
RULES = worker_rules()

GOOD = """\
[study]
name = "key-size"
baseline = "small"
backends = ["openssl", "aws-lc"]

[[configuration]]
name = "small"
digest = "sha1"
rsa_bits = 2048

[[configuration]]
name = "big"
digest = "sha256"
rsa_bits = 4096
params = { padding = "pss" }

[[operation]]
label = "sign"
op = "rsa{rsa_bits}-sign"
sizes = [4096, 1048576]

[[operation]]
op = "{digest}"
sizes = [4096]

[[operation]]
op = "x25519-derive"
"""


def err(text: str) -> StudyError:
    with pytest.raises(StudyError) as e:
        s = study.parse(text, "s.toml")
        study.check_against_worker(s, RULES)
    return e.value


def line_of(text: str, fragment: str) -> int:
    return next(i for i, l in enumerate(text.splitlines(), 1) if fragment in l)


def test_good_study_parses_with_defaults():
    s = study.parse(GOOD, "s.toml")
    assert s.name == "key-size" and s.baseline == "small"
    assert s.repetitions == 10 and s.seconds == 1.0 and s.warmup_s == 0.2 and s.threads == 1
    assert s.timeout_s == 60.0 and s.seed is None  # unset: each run draws its own
    assert s.until == "fixed" and s.max_repetitions == 10 and s.margin_pct == 2.0 and s.multiplicity
    assert [c.name for c in s.configurations] == ["small", "big"]
    assert s.configurations[0].variables == {"digest": "sha1", "rsa_bits": 2048}
    assert [o.label for o in s.operations] == ["sign", "{digest}", "x25519-derive"]
    assert s.operations[2].sizes is None


def test_resolve_substitutes_and_passes_digest_and_padding():
    s = study.check_against_worker(study.parse(GOOD, "s.toml"), RULES)
    small, big = s.configurations
    sign, digest, derive = s.operations
    assert s.resolve(small, sign) == ("rsa2048-sign", {"digest": "sha1"})
    assert s.resolve(big, sign) == ("rsa4096-sign", {"digest": "sha256", "padding": "pss"})
    # a digest operation does not take a digest parameter; key agreement takes none
    assert s.resolve(big, digest) == ("sha256", {})
    assert s.resolve(big, derive) == ("x25519-derive", {})


def test_which_op_takes_which_param_comes_from_the_worker():
    """The parser has no rules of its own: a worker that (hypothetically) gave ECDSA a padding
    parameter would get it passed."""
    s = study.parse(GOOD.replace('op = "rsa{rsa_bits}-sign"', 'op = "ecdsa-p{rsa_bits}-sign"')
                    .replace("rsa_bits = 2048", "rsa_bits = 256").replace("rsa_bits = 4096", "rsa_bits = 256"),
                    "s.toml")
    big = s.configuration("big")
    assert study.check_against_worker(s, RULES).resolve(big, s.operations[0]) == (
        "ecdsa-p256-sign", {"digest": "sha256"})
    hello = dict(conftest_hello())
    hello["op_params"] = dict(hello["op_params"])
    hello["op_params"]["ecdsa-p256-sign"] = {"params": ["size_bytes", "digest", "padding"], "default_size_bytes": 32}
    from cryptoperf.hello import WorkerRules
    other = study.check_against_worker(s, WorkerRules.from_hello(hello))
    assert other.resolve(big, s.operations[0]) == ("ecdsa-p256-sign", {"digest": "sha256", "padding": "pss"})


def conftest_hello():
    from conftest import WORKER_HELLO
    return dict(WORKER_HELLO, backends=[{"backend": b} for b in BACKENDS])


def test_resolve_needs_the_workers_rules():
    s = study.parse(GOOD, "s.toml")
    with pytest.raises(ValueError, match="check_against_worker"):
        s.resolve(s.configurations[0], s.operations[0])


@pytest.mark.parametrize("key,value,limit", [("warmup_s", 900, "max_warmup_s"), ("seconds", 4000, "max_seconds"),
                                              ("threads", 2048, "max_threads")])
def test_limits_are_the_workers(key, value, limit):
    """warmup_s = 900 used to pass the parser and then fail every repetition in the worker."""
    text = GOOD.replace('backends = ["openssl", "aws-lc"]', f'backends = ["openssl", "aws-lc"]\n{key} = {value}'
                        + ("\ntimeout_s = 5000" if key != "threads" else ""))
    e = err(text)
    assert e.line == line_of(text, f"{key} = {value}") and f"({limit} in its hello)" in str(e)


def test_size_above_the_workers_limit():
    e = err(GOOD.replace("sizes = [4096]", "sizes = [4096, 67108865]"))
    assert "67108865 bytes is above the worker's limit" in str(e)


PQ_OPS = ["x25519-keygen", "x25519mlkem768-keygen", "x25519mlkem768-encaps", "x25519mlkem768-decaps",
          "ecdsa-p256-verify", "ml-dsa-44-sign", "ml-dsa-44-verify", "ml-dsa-65-sign", "ml-dsa-65-verify"]


def test_pq_migration_study():
    s = study.load(ROOT / "studies" / "pq-migration.toml")
    s = study.check_against_worker(s, RULES)
    assert s.baseline == "classical-ecdsa" and s.backends == ("aws-lc", "rustcrypto")
    assert [o.label for o in s.operations] == ["key share", "server", "client finish", "sign", "verify"]
    pq = s.configuration("pq-ml-dsa-65")
    assert [s.resolve(pq, o)[0] for o in s.operations] == [
        "x25519mlkem768-keygen", "x25519mlkem768-encaps", "x25519mlkem768-decaps",
        "ml-dsa-65-sign", "ml-dsa-65-verify"]
    base = s.configuration("classical-ecdsa")
    assert [s.resolve(base, o)[0] for o in s.operations] == [
        "x25519-keygen", "x25519-derive", "x25519-derive", "ecdsa-p256-sign", "ecdsa-p256-verify"]
    # Sizes only where there is a message; ML-DSA takes no digest parameter.
    assert [o.sizes for o in s.operations] == [None, None, None, (32,), (32,)]
    assert s.resolve(pq, s.operations[3]) == ("ml-dsa-65-sign", {})


def test_a_size_on_a_keygen_op_is_refused():
    text = GOOD.replace('op = "x25519-derive"', 'op = "x25519mlkem768-keygen"\nsizes = [64]')
    e = err(text)
    assert "'x25519mlkem768-keygen' has no message" in str(e)


def test_backends_default_to_the_workers():
    s = study.parse(GOOD.replace('backends = ["openssl", "aws-lc"]\n', ""), "s.toml")
    assert s.backends is None
    s = study.check_against_worker(s, RULES)
    assert s.backends == BACKENDS


def test_shipped_studies_are_valid():
    """Every file in studies/ loads and names only operations the worker has (the fixture of the
    worker's hello, which test_fake_worker checks against the real one)."""
    shipped = sorted((ROOT / "studies").glob("*.toml"))
    assert len(shipped) >= 6, shipped
    rules = worker_rules(devices=("pkcs11",))  # the worker's device backend (offload-pkcs11.toml)
    go = WorkerRules.from_hello(json.loads((ROOT / "tests" / "fixtures" / "worker-go-hello.json").read_text()))
    for path in shipped:
        s = study.load(path)
        s = study.check_against_worker(s, rules, {c.build: go for c in s.configurations if builds.get(c.build).backends})
        assert s.configurations and s.operations, path


def test_accel_off_study_masks_aes_ni_and_sha_ni_on_maskable_libraries():
    s = study.load(ROOT / "studies" / "accel-off.toml")
    assert {c.name: c.cpu for c in s.configurations} == {
        "baseline": "baseline", "aes-ni-off": "no-aesni", "sha-ni-off": "no-shani"}
    assert s.baseline == "baseline" and s.backends == ("openssl", "aws-lc")
    assert [(o.op, o.sizes) for o in s.operations] == [
        ("aes-128-gcm-seal", (16384, 1048576)), ("sha256", (8192,)), ("rsa2048-sign", None)]


def test_key_size_study_is_the_reference_configuration():
    s = study.load(ROOT / "studies" / "key-size.toml")
    assert s.baseline == "sha1-rsa2048" and s.backends == ("openssl", "aws-lc")
    assert [c.name for c in s.configurations] == ["sha1-rsa2048", "sha256-rsa4096"]
    assert [o.label for o in s.operations] == ["sign", "verify", "digest"]
    assert all(o.sizes == (4096, 1048576) for o in s.operations)


def test_toml_syntax_error_names_line():
    e = err(GOOD.replace('rsa_bits = 4096', 'rsa_bits = = 4096'))
    assert e.line == line_of(GOOD, "rsa_bits = 4096")
    assert str(e).startswith(f"s.toml:{e.line}: not valid TOML")


@pytest.mark.parametrize("bad, fragment, expect", [
    ('repetitions = 5\nrepetitons = 3', "repetitons = 3", "did you mean 'repetitions'?"),
    ('seconds = 0', "seconds = 0", "out of range"),
    ('seconds = -1.5', "seconds = -1.5", "out of range"),
    ('threads = 0', "threads = 0", "allowed: >= 1"),
    ('threads = 2000', "threads = 2000", "above the worker's limit of 1024"),
    ('repetitions = 2', "repetitions = 2", "allowed: 3..1000"),
    ('until = "decide"', 'until = "decide"', "did you mean 'decided'?"),
    ('max_repetitions = 40', "max_repetitions = 40", 'applies only with until = "decided"'),
    ('until = "decided"\nmax_repetitions = 4', "max_repetitions = 4", "fewer than repetitions"),
    ('margin_pct = -1', "margin_pct = -1", "allowed: 0..100"),
    ('multiplicity = "yes"', 'multiplicity = "yes"', "must be true or false"),
    ('seconds = "fast"', 'seconds = "fast"', 'must be a number, not "fast"'),
    ('repetitions = 2.5', "repetitions = 2.5", "must be an integer"),
    ('timeout_s = 0.5', "timeout_s = 0.5", "does not exceed warmup_s + seconds"),
])
def test_study_table_errors(bad, fragment, expect):
    text = GOOD.replace('name = "key-size"', 'name = "key-size"\n' + bad)
    e = err(text)
    assert e.line == line_of(text, fragment), str(e)
    assert expect in str(e)
    assert "[study]" in str(e) and str(e).startswith(f"s.toml:{e.line}: ")


def test_missing_baseline_configuration_suggests():
    text = GOOD.replace('baseline = "small"', 'baseline = "smal"')
    e = err(text)
    assert e.line == line_of(text, "baseline =")
    assert "no configuration named 'smal'; did you mean 'small'?" in str(e)


def test_missing_required_key():
    text = GOOD.replace('name = "key-size"\n', "")
    e = err(text)
    assert "missing required key 'name'" in str(e) and e.line == 1


def test_duplicate_configuration_name():
    text = GOOD.replace('name = "big"', 'name = "small"')
    e = err(text)
    assert "duplicate configuration name 'small'" in str(e)
    assert e.line == line_of(text, 'digest = "sha256"') - 1


def test_size_out_of_range():
    text = GOOD.replace("sizes = [4096]", "sizes = [4096, 100000000]")
    e = err(text)
    assert e.line == line_of(text, "100000000") and "above the worker's limit of 67108864 bytes" in str(e)
    assert "field 'sizes'" in str(e)


def test_zero_size():
    e = err(GOOD.replace("sizes = [4096]", "sizes = [0]"))
    assert "out of range" in str(e)


def test_unknown_operation_lists_known_ones():
    text = GOOD.replace('op = "x25519-derive"', 'op = "x25519-derve"')
    e = err(text)
    assert e.line == line_of(text, "x25519-derve")
    assert "unknown operation 'x25519-derve'; did you mean 'x25519-derive'?" in str(e)
    assert "known: sha1, sha256" in str(e)


def test_unknown_operation_after_substitution_names_configuration():
    text = GOOD.replace("rsa_bits = 4096", "rsa_bits = 4097")
    e = err(text)
    assert "unknown operation 'rsa4097-sign' (from 'rsa{rsa_bits}-sign' in configuration 'big')" in str(e)
    assert e.line == line_of(text, 'op = "rsa{rsa_bits}-sign"')


def test_unknown_backend_lists_known_ones():
    text = GOOD.replace('"aws-lc"]', '"awslc"]')
    e = err(text)
    assert "unknown backend 'awslc'; did you mean 'aws-lc'?" in str(e)
    assert "(known: openssl, aws-lc, ring, rustcrypto)" in str(e)
    assert e.line == line_of(text, "backends =")


def test_unresolved_template_variable():
    text = GOOD.replace("rsa_bits = 2048\n", "")
    e = err(text)
    assert "'{rsa_bits}' is not defined in configuration 'small'" in str(e)
    assert e.line == line_of(text, 'op = "rsa{rsa_bits}-sign"')


def test_misspelt_configuration_key_suggests():
    text = GOOD.replace('name = "big"', 'name = "big"\ndescripton = "x"')
    e = err(text)
    assert "did you mean 'description'?" in str(e)
    assert "configuration 'big', field 'descripton'" in str(e)
    assert e.line == line_of(text, "descripton")


def test_misspelt_variable_suggests_the_used_one():
    text = GOOD.replace("rsa_bits = 4096", "rsa_bits = 4096\nrsa_bit = 3")
    e = err(text)
    assert "did you mean 'rsa_bits'?" in str(e)


def test_unknown_table_suggests():
    text = GOOD.replace("[[operation]]\nop = \"x25519-derive\"", "[[operations]]\nop = \"x25519-derive\"")
    e = err(text)
    assert "did you mean 'operation'?" in str(e) and e.line == line_of(text, "[[operations]]")


def test_unknown_operation_key_suggests():
    text = GOOD.replace("sizes = [4096]\n", "size = [4096]\n")
    e = err(text)
    assert "did you mean 'sizes'?" in str(e) and e.line == line_of(text, "size = [4096]")


def test_bad_param_value_and_name():
    e = err(GOOD.replace('padding = "pss"', 'padding = "psss"'))
    assert "padding \"psss\" is not one of pkcs1, pss; did you mean 'pss'?" in str(e)
    e = err(GOOD.replace('padding = "pss"', 'paddin = "pss"'))
    assert "unknown worker parameter 'paddin'; did you mean 'padding'?" in str(e)
    e = err(GOOD.replace('digest = "sha1"', 'digest = "md5"'))
    assert 'digest "md5" is not one of' in str(e)


def test_sizes_on_an_operation_without_message():
    e = err(GOOD.replace('op = "x25519-derive"', 'op = "x25519-derive"\nsizes = [64]'))
    assert "'x25519-derive' has no message" in str(e)


def test_pinned_backend_without_baseline():
    text = GOOD.replace('params = { padding = "pss" }', 'params = { padding = "pss" }\nbackend = "ring"')
    e = err(text)
    assert "runs on ring where the baseline 'small' does not" in str(e)


def test_no_operations():
    text = GOOD.split("[[operation]]")[0]
    e = err(text)
    assert "no [[operation]] table" in str(e)


def test_missing_file():
    with pytest.raises(StudyError) as e:
        study.load("/nonexistent/x.toml")
    assert str(e.value) == "/nonexistent/x.toml: no such study file"


def test_options_table_drives_help_and_docs():
    text = study.options_help()
    doc = (ROOT / "docs" / "study-files.md").read_text()
    for o in study.OPTIONS:
        assert o.name in text
        assert f"`{o.name}`" in doc, f"docs/study-files.md does not describe {o.section}.{o.name}"



def test_each_workloads_params_are_listed_from_the_workers_hello():
    """The help names no workload by itself: with a worker's rules it lists each workload the
    hello announces, its params with their defaults and values; without, none."""
    assert "tls_version" not in study.options_help()
    text = study.options_help(RULES)
    for op, spec in RULES.workloads.items():
        line = next(l for l in text.splitlines() if l.strip().startswith(f"{op} (levels"))
        # not the orchestrator's own (dir, server_pid, ...): a study does not set them
        assert all(name in line for name in spec.params if name != "load" and name not in spec.set_by_cryptoperf())
    assert "tls_version=1.3 (1.2|1.3)" in text


def test_one_did_you_mean_for_every_unknown_name():
    from cryptoperf.errors import closest, did_you_mean
    assert did_you_mean("secnods", ["seconds", "threads"]) == "; did you mean 'seconds'?"
    assert did_you_mean("zzz", ["seconds"]) == "" and closest("zzz", ["seconds"]) is None
    assert did_you_mean("s" * 10_000, ["s" * 10_000]) == ""  # a key of megabytes is not compared
    assert "did you mean 'seconds'?" in str(_raises(GOOD.replace('baseline = "small"', 'baseline = "small"\nsecnods = 1')))


def _raises(text: str) -> StudyError:
    with pytest.raises(StudyError) as e:
        study.parse(text, "s.toml")
    return e.value


# --------------------------------------------------------------------------- sizes with suffixes, op spellings


def test_sizes_take_binary_suffixes():
    text = GOOD.replace("sizes = [4096, 1048576]", 'sizes = [4096, "16KiB", "1MiB", "64k", "2 M"]')
    s = study.parse(text, "s.toml")
    assert s.operations[0].sizes == (4096, 16384, 1 << 20, 65536, 2 << 20)
    s = study.check_against_worker(s, RULES)
    from cryptoperf import schedule
    assert {c.size_bytes for c in schedule.expand(s) if c.label == "sign"} == {4096, 16384, 1 << 20, 65536, 2 << 20}


@pytest.mark.parametrize("element, fragment", [
    ('"16KB"', "element 2 (\"16KB\") is not a size: '16KB' is ambiguous"),
    ('"16x"', "element 2 (\"16x\") is not a size: '16x' has an unknown unit 'x'"),
    ('"lots"', "element 2 (\"lots\") is not a size: 'lots' is not a size"),
    ("1.5", "element 2 (1.5) is not a size: write bytes as an integer (4096) or a string with a binary suffix"),
    ("true", "element 2 (true) is not a size"),
    ('"1.3k"', "element 2 (\"1.3k\") is not a size: '1.3k' is not a whole number of bytes"),
])
def test_a_bad_size_element_is_named(element, fragment):
    text = GOOD.replace("sizes = [4096, 1048576]", f"sizes = [4096, {element}]")
    e = err(text)
    assert "operation 'sign', field 'sizes'" in str(e) and fragment in str(e), str(e)
    assert e.line == line_of(text, "sizes = [4096, ")
    assert "1024" in str(e)  # what k means


def test_sizes_are_checked_as_bytes():
    assert "lists a size twice" in str(err(GOOD.replace("sizes = [4096]", 'sizes = [4096, "4k"]')))
    assert "0 bytes is out of range" in str(err(GOOD.replace("sizes = [4096]", 'sizes = ["0k"]')))
    e = err(GOOD.replace("sizes = [4096]", 'sizes = ["65MiB"]'))
    assert "68157440 bytes is above the worker's limit of 67108864 bytes" in str(e)
    assert "has no message" in str(err(GOOD.replace('op = "x25519-derive"', 'op = "x25519-derive"\nsizes = ["1k"]')))


def test_operation_spellings_resolve_to_the_canonical_op():
    text = (GOOD.replace('op = "rsa{rsa_bits}-sign"', 'op = "RSA-{rsa_bits}_sign"')
                .replace('op = "x25519-derive"', 'op = "ECDSA-secp256r1-SIGN"')
                .replace('digest = "sha1"', 'digest = "SHA-1"').replace('digest = "sha256"', 'digest = "SHA2-256"'))
    s = study.check_against_worker(study.parse(text, "s.toml"), RULES)
    from cryptoperf import schedule
    cells = schedule.expand(s)
    assert {c.op for c in cells} == {"rsa2048-sign", "rsa4096-sign", "sha1", "sha256", "ecdsa-p256-sign"}
    big_sign = next(c for c in cells if c.configuration == "big" and c.op == "rsa4096-sign")
    assert big_sign.params == {"digest": "sha256", "padding": "pss"}  # the digest as the worker spells it
    assert {c.label for c in cells} == {"sign", "{digest}", "ECDSA-secp256r1-SIGN"}  # labels as written


def test_an_unknown_operation_gets_no_suggestion_of_another_algorithm():
    e = err(GOOD.replace('op = "x25519-derive"', 'op = "sha257"'))
    assert "unknown operation 'sha257'; known: sha1, sha256" in str(e) and "did you mean" not in str(e)
    e = err(GOOD.replace('op = "x25519-derive"', 'op = "aes-128-gcm"'))
    assert ("unknown operation 'aes-128-gcm'; it names several operations: 'aes-128-gcm-seal', "
            "'aes-128-gcm-open' (give one); known: sha1") in str(e)
    e = err(GOOD.replace('digest = "sha1"', 'digest = "sha257"'))
    assert 'digest "sha257" is not one of sha1, sha256, sha384, sha512, sha3-256' in str(e)
    assert "did you mean" not in str(e)
