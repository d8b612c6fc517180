"""The orchestrator knows no workload by name: outside the workloads' own modules
(``src/cryptoperf/workloads/``) and their report sections (``src/cryptoperf/report/sections/``),
no string in the code is a workload's name. What the orchestrator needs of a workload it reads
from the spec the worker announces in ``hello`` (``WorkloadSpec``: levels, modes, a server
under test, file and connection parameters, a job, its spread)."""

import ast
from pathlib import Path

import pytest

from conftest import WORKER_HELLO

pytestmark = pytest.mark.parallel

PACKAGE = Path(__file__).resolve().parent.parent / "src" / "cryptoperf"
#: Where a workload's name may be written: its own module and its report section.
ITS_OWN = (PACKAGE / "workloads", PACKAGE / "report" / "sections")
NAMES = {op for op, entry in WORKER_HELLO["op_params"].items() if entry.get("workload")}


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the docstring nodes in ``tree`` (prose may name a workload as an example)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def named_workloads(path: Path, root: Path = PACKAGE) -> list[str]:
    """``file:line: name`` (the file relative to ``root``) for each string constant (not a
    docstring) in ``path`` that is a workload's name, or mentions one quoted."""
    tree = ast.parse(path.read_text(), str(path))
    skip = _docstrings(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            hit = next((n for n in NAMES if node.value == n or f"'{n}'" in node.value or f'"{n}"' in node.value), None)
            if hit:
                found.append(f"{path.relative_to(root)}:{node.lineno}: {hit}")
    return found


def test_the_worker_announces_workloads_this_test_can_look_for():
    assert {"tls-handshake", "storage", "fleet-job"} <= NAMES  # the test can fail


def test_no_workload_is_named_outside_its_own_modules():
    found = [hit for path in sorted(PACKAGE.rglob("*.py")) if not any(d in path.parents for d in ITS_OWN)
             for hit in named_workloads(path)]
    assert not found, "workload names in the orchestrator (read the trait from its WorkloadSpec instead):\n" + "\n".join(found)


def test_the_scan_finds_a_name_written_in_code(tmp_path):
    planted = tmp_path / "leak.py"
    planted.write_text('"""Says tls-handshake in prose, which is fine."""\n'
                       'def f(op):\n    return op == "tls-handshake"\n')
    assert [h.split(": ")[-1] for h in named_workloads(planted, tmp_path)] == ["tls-handshake"]



def test_the_registries_list_every_module_of_their_package():
    """The workload kinds (``workloads.KINDS``) and the report's section modules
    (``report.sections.MODULES``) are explicit lists, one line each; a module added to either
    package without its line would be silently left out, so this holds them to the folders."""
    from cryptoperf import workloads
    from cryptoperf.report import sections
    shared = {"__init__", "access", "generic"}
    kinds_dir = {p.stem for p in (PACKAGE / "workloads").glob("*.py")} - shared
    assert {m.__name__.rsplit(".", 1)[1] for m in workloads.KINDS.values()} == kinds_dir
    assert all(m.KIND == k for k, m in workloads.KINDS.items())
    assert set(sections.MODULES) == {p.stem for p in (PACKAGE / "report" / "sections").glob("*.py")} - {"__init__"}
