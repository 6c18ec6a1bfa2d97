"""Issue 16, item 9, on both rigs: `dispatcher run` with a rig's own clusters.yaml, two of its kubeconfigs broken,
reports both problems at once before connecting to anything, and never a credential."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest
import yaml
from realrig import RealRig


def _break(source: Path, tmp: Path) -> tuple[Path, list[str]]:
    raw = yaml.safe_load((source / "clusters.yaml").read_text())
    kube = yaml.safe_load(Path(raw["workers"][0]["kubeconfig"]).read_text())
    tokens = [str(u["user"].get("token", "")) for u in kube["users"] if u["user"].get("token")]
    wrong = tmp / "wrong-context.kubeconfig"
    wrong.write_text(yaml.safe_dump({**kube, "current-context": "nowhere"}))
    raw["workers"][0]["kubeconfig"] = str(wrong)
    raw["workers"][0].pop("context", None)
    raw["workers"][1]["kubeconfig"] = str(tmp / "missing.kubeconfig")
    config = tmp / "clusters.yaml"
    config.write_text(yaml.safe_dump(raw))
    return config, tokens


@pytest.mark.real_rig
async def test_run_reports_every_broken_kubeconfig_of_a_rig_at_once(
    tmp_path: Path, real_rig: RealRig | None, backend: str
) -> None:
    world = None
    if real_rig is not None:
        source = real_rig.directory
    else:
        from kubesim.world import SimWorld, WorldOptions

        world = SimWorld(WorldOptions(workers=2, gpu_workers=0))
        await world.start()
        source = tmp_path / "sim"
        await asyncio.to_thread(world.write_files, source)
    try:
        config, tokens = await asyncio.to_thread(_break, source, tmp_path)
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "dispatcher", "run", "--config", str(config), "--api-listen", "127.0.0.1:0",
            "--db-url", f"sqlite+aiosqlite:///{tmp_path / 'd.sqlite'}",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        async with asyncio.timeout(60):
            _out, err = await proc.communicate()
    finally:
        if world is not None:
            await world.stop()
    text = err.decode()
    assert proc.returncode == 2 and "2 problems" in text, text
    assert "workers[0].kubeconfig" in text and "context 'nowhere' not found" in text
    assert "workers[1].kubeconfig" in text and "cannot read it" in text
    assert not (tmp_path / "d.sqlite").exists(), "nothing is started before the configuration is sound"
    assert tokens and all(t not in text for t in tokens)
