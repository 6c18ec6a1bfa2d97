"""The dispatcher's layers and the simulator's separation (issue 18, item 2), checked with import-linter: the
contracts in ``.importlinter`` hold, a planted upward import breaks them, the product and the simulator (``kubesim``)
import each other only where the entry points start rigs, and no two top-level modules import each other (imports
under TYPE_CHECKING, for types only, do not count)."""

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


#: The top-level packages the contracts name: the product, the simulator and the neutral code both use.
PACKAGES = ("dispatcher", "kubesim", "kubecommon")


def _copy(tmp_path: Path) -> Path:
    """The packages and the contracts, copied so that a test can plant an import."""
    for package in PACKAGES:
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / ".importlinter", tmp_path / ".importlinter")
    return tmp_path


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
    assert "8 kept, 0 broken" in result.stdout


def test_an_upward_import_breaks_them(tmp_path: Path) -> None:
    _copy(tmp_path)
    tree = tmp_path / "dispatcher" / "placement" / "kueue" / "tree.py"
    tree.write_text(tree.read_text() + "\nfrom ...service import Dispatcher  # planted\n")
    result = _lint(tmp_path)
    assert result.returncode != 0 and "dispatcher.placement.kueue.tree -> dispatcher.service" in result.stdout, (
        result.stdout[-3000:]
    )


def test_the_simulator_does_not_borrow_the_placement_model(tmp_path: Path) -> None:
    """The simulated Kueue and HAMi implement their rules themselves: importing the product's placement model or its
    request arithmetic from anywhere under kubesim breaks the ``sim-alone`` contract."""
    _copy(tmp_path)
    quota = tmp_path / "kubesim" / "kueue" / "quota.py"
    quota.write_text(quota.read_text() + "\nfrom dispatcher.placement.kueue.tree import QuotaTree as _Q  # planted\n")
    fit = tmp_path / "kubesim" / "hami" / "fit.py"
    fit.write_text(fit.read_text() + "\nfrom dispatcher.resources import pod_requests as _p  # planted\n")
    result = _lint(tmp_path)
    assert result.returncode != 0, result.stdout[-3000:]
    assert "kubesim.kueue.quota -> dispatcher.placement.kueue.tree" in result.stdout, result.stdout[-3000:]
    assert "kubesim.hami.fit -> dispatcher.resources" in result.stdout, result.stdout[-3000:]


def test_the_simulator_takes_nothing_of_the_dispatcher_but_kubecommon(tmp_path: Path) -> None:
    """Even the product's own re-export of the quantity format is the product: the simulator imports kubecommon."""
    _copy(tmp_path)
    store = tmp_path / "kubesim" / "store.py"
    store.write_text(store.read_text() + "\nfrom dispatcher.quantity import parse_quantity as _pq  # planted\n")
    quantity = tmp_path / "kubecommon" / "quantity.py"
    quantity.write_text(quantity.read_text() + "\nfrom kubesim.errors import ApiError as _E  # planted\n")
    result = _lint(tmp_path)
    assert result.returncode != 0, result.stdout[-3000:]
    assert "kubesim.store -> dispatcher.quantity" in result.stdout, result.stdout[-3000:]
    assert "kubecommon.quantity -> kubesim.errors" in result.stdout, result.stdout[-3000:]


def test_the_product_does_not_import_the_simulator(tmp_path: Path) -> None:
    """Only the entry points that start rigs import kubesim: a product module doing so, directly or through a module
    of its own, breaks the ``sim-apart`` contract; so does a product module importing an entry point (the layers)."""
    _copy(tmp_path)
    engine = tmp_path / "dispatcher" / "placement" / "engine.py"
    engine.write_text(engine.read_text() + "\nfrom kubesim.topology import default_topology as _t  # planted\n")
    health = tmp_path / "dispatcher" / "health.py"
    health.write_text(health.read_text() + "\nfrom .rig.world import RealWorld as _W  # planted\n")
    result = _lint(tmp_path)
    assert result.returncode != 0, result.stdout[-3000:]
    assert "dispatcher.placement.engine -> kubesim.topology" in result.stdout, result.stdout[-3000:]
    assert "dispatcher.health -> dispatcher.rig.world" in result.stdout, result.stdout[-3000:]
    assert "6 kept, 2 broken" in result.stdout, result.stdout[-3000:]


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
