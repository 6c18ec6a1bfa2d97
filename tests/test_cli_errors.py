"""One-line errors that say what to do, and no database made as a side effect of reading (issue 16, item 8)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


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
    config = tmp_path / "clusters.yaml"
    config.write_text("manager: {kubeconfig: /nonexistent}\nworkers: [{name: w, kubeconfig: /nonexistent}]\n")
    url = f"sqlite+aiosqlite:///{tmp_path / 'missing' / 'd.sqlite'}"
    done = _cli("run", "--config", str(config), "--db-url", url, "--api-listen", "127.0.0.1:0", cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "the folder of the SQLite database" in done.stderr and "does not exist" in done.stderr
    assert not (tmp_path / "missing").exists()
