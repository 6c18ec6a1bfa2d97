"""One-line errors that say what to do, and no database made as a side effect of reading (issue 16, item 8)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:9"}}]
users: [{name: u, user: {token: s3cret-kubeconfig-token}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
"""


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dispatcher", *args], cwd=cwd, capture_output=True, text=True, check=False, timeout=120
    )


def test_explain_outside_the_databases_folder_says_so_and_creates_nothing(tmp_path: Path) -> None:
    done = _cli("explain", "team-a/job", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "no dispatcher database at" in done.stderr and "--db-url" in done.stderr and "--api" in done.stderr
    assert list(tmp_path.iterdir()) == [], "reading never creates a database"


def test_explain_of_a_file_that_is_not_the_dispatchers_database_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "other.sqlite").write_bytes(b"")
    done = _cli("explain", "team-a/job", "--db-url", f"sqlite+aiosqlite:///{tmp_path / 'other.sqlite'}", cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "cannot be read as the dispatcher's" in done.stderr and "dispatcher db upgrade" in done.stderr


def test_run_with_a_sqlite_path_in_a_missing_folder_is_one_line(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "k.kubeconfig"
    kubeconfig.write_text(KUBECONFIG)
    config = tmp_path / "clusters.yaml"
    config.write_text(f"manager: {{kubeconfig: {kubeconfig}}}\nworkers: [{{name: w, kubeconfig: {kubeconfig}}}]\n")
    url = f"sqlite+aiosqlite:///{tmp_path / 'missing' / 'd.sqlite'}"
    done = _cli("run", "--config", str(config), "--db-url", url, "--api-listen", "127.0.0.1:0", cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "the folder of the SQLite database" in done.stderr and "does not exist" in done.stderr
    assert not (tmp_path / "missing").exists()


def test_every_configuration_problem_is_reported_at_once_with_file_key_path_and_value(tmp_path: Path) -> None:
    """Issue 16, item 9: clusters.yaml and every kubeconfig it names, checked at start; all problems in one go."""
    good = tmp_path / "good.kubeconfig"
    good.write_text(KUBECONFIG)
    wrong_context = tmp_path / "wrong-context.kubeconfig"
    wrong_context.write_text(KUBECONFIG.replace("current-context: x", "current-context: y"))
    no_user = tmp_path / "no-user.kubeconfig"
    no_user.write_text(KUBECONFIG.replace("user: u}", "user: nobody}"))
    config = tmp_path / "clusters.yaml"
    config.write_text(
        f"manager: {{kubeconfig: {good}}}\n"
        "workers:\n"
        f"- {{name: w1, kubeconfig: {wrong_context}, weight: heavy}}\n"
        f"- {{name: w2, kubeconfig: {no_user}}}\n"
        f"- {{name: w3, kubeconfig: {tmp_path / 'missing.kubeconfig'}}}\n"
        "policy: {mode: pack, lostTimeout: 5 minutes}\n"
    )
    done = _cli("run", "--config", str(config), "--api-listen", "127.0.0.1:0", cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    text = done.stderr
    # The file's own problems first (all of them), then those of its kubeconfigs would follow a fixed file:
    for shown in ("workers[0].weight", "'heavy'", "policy.mode", "'pack'", "policy.lostTimeout", "'5 minutes'"):
        assert shown in text, text
    assert text.count(f"{config}:") >= 3 and "3 problems" in text, text
    # Fixed: now every kubeconfig problem, at once.
    config.write_text(
        config.read_text().replace(", weight: heavy", "").replace("policy: {mode: pack, lostTimeout: 5 minutes}\n", "")
    )
    done = _cli("run", "--config", str(config), "--api-listen", "127.0.0.1:0", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    text = done.stderr
    assert "3 problems" in text, text
    assert f"workers[0].kubeconfig {wrong_context}: context 'y' not found (contexts: x)" in text
    assert f"workers[1].kubeconfig {no_user}: context 'x' names user 'nobody'" in text
    assert f"workers[2].kubeconfig {tmp_path / 'missing.kubeconfig'}: cannot read it" in text
    assert "s3cret-kubeconfig-token" not in text


def test_the_workloads_table_wraps_a_long_reason_instead_of_cutting_it() -> None:
    from dispatcher.remote import workloads_table

    reason = (
        "no worker can ever hold this: worker-1: no node has 9 GPUs (largest: 4); worker-2: no GPU nodes; "
        "worker-3: ClusterQueue gpu-cq allows at most 8 nvidia.com/gpu"
    )
    item = {"namespace": "team-a", "name": "big", "state": "Pending", "cluster": None, "queue": "user-queue",
            "priority": 0, "generation": 0, "reason": reason}  # fmt: skip
    lines = workloads_table({"items": [item]}).splitlines()
    column = lines[0].index("REASON")
    assert len(lines) > 2 and all(len(line) <= column + 60 for line in lines)
    assert all(line[:column].strip() == "" for line in lines[2:]), "continuation lines sit under REASON"
    assert " ".join(line[column:].strip() for line in lines[1:]) == reason, "nothing of the reason is cut"
