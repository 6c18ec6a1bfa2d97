"""The dispatcher's layers and the simulator's separation (issue 18, item 2), checked with import-linter: the
contracts in ``.importlinter`` hold, a planted upward import breaks them, and no two top-level modules import
each other (imports under TYPE_CHECKING, for types only, do not count)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parent.parent
LINT = [
    sys.executable,
    "-c",
    "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())",
]


def _lint(cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*LINT, "--config", str(cwd / ".importlinter"), "--no-cache"],
        check=False,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        env={"PYTHONPATH": str(cwd), "PATH": "/usr/bin:/bin"},
    )


def test_the_layer_contracts_hold() -> None:
    result = _lint(ROOT)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "5 kept, 0 broken" in result.stdout


def test_an_upward_import_breaks_them(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "dispatcher", tmp_path / "dispatcher", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / ".importlinter", tmp_path / ".importlinter")
    tree = tmp_path / "dispatcher" / "placement" / "kueue" / "tree.py"
    tree.write_text(tree.read_text() + "\nfrom ...service import Dispatcher  # planted\n")
    result = _lint(tmp_path)
    assert result.returncode != 0 and "dispatcher.placement.kueue.tree -> dispatcher.service" in result.stdout, (
        result.stdout[-3000:]
    )


def test_the_simulator_does_not_borrow_the_placement_model(tmp_path: Path) -> None:
    """The simulated Kueue and HAMi implement their rules themselves: importing the product's placement model or its
    request arithmetic from anywhere under dispatcher.sim breaks the ``sim-own-rules`` contract."""
    shutil.copytree(ROOT / "dispatcher", tmp_path / "dispatcher", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / ".importlinter", tmp_path / ".importlinter")
    quota = tmp_path / "dispatcher" / "sim" / "kueue" / "quota.py"
    quota.write_text(quota.read_text() + "\nfrom ...placement.kueue.tree import QuotaTree as _Q  # planted\n")
    fit = tmp_path / "dispatcher" / "sim" / "hami" / "fit.py"
    fit.write_text(fit.read_text() + "\nfrom ...resources import pod_requests as _p  # planted\n")
    result = _lint(tmp_path)
    assert result.returncode != 0, result.stdout[-3000:]
    assert "dispatcher.sim.kueue.quota -> dispatcher.placement.kueue.tree" in result.stdout, result.stdout[-3000:]
    assert "dispatcher.sim.hami.fit -> dispatcher.resources" in result.stdout, result.stdout[-3000:]


def test_no_two_top_level_modules_import_each_other() -> None:
    graph = grimp.build_graph("dispatcher", exclude_type_checking_imports=True)
    tops = sorted(m for m in graph.find_children("dispatcher"))
    edges = {
        (a, b) for a in tops for b in tops if a != b and graph.chain_exists(importer=a, imported=b, as_packages=True)
    }
    # A chain both ways, direct or through other modules: a cycle.
    cycles = sorted(f"{a} <-> {b}" for a, b in edges if (b, a) in edges and a < b)
    assert cycles == [], f"import cycles between top-level modules: {cycles}"
    assert len(edges) > 50, "the graph was read (a broken build would find no edges, hence no cycles)"
