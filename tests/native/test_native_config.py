"""Configuration and command line of Kueue-native mode: ``mode``, ``kueueNative``, ``run --mode``, and
``rig up --manager-kueue`` (real components only)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dispatcher.config import ConfigError, parse_config
from dispatcher.rig.multikueue import FLAVOURS, multikueue_config

BASE: dict[str, Any] = {"manager": {"inCluster": True}, "workers": [{"name": "worker-1", "inCluster": True}]}


def test_standalone_is_the_default() -> None:
    cfg = parse_config(BASE)
    assert cfg.mode == "standalone" and cfg.native.nominate == 1


def test_kueue_external_with_its_settings() -> None:
    cfg = parse_config(
        {**BASE, "mode": "kueue-external", "kueueNative": {"dispatcherName": "example.com/mine", "nominate": 2}}
    )
    assert (cfg.mode, cfg.native.dispatcher_name, cfg.native.nominate) == ("kueue-external", "example.com/mine", 2)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"mode": "multikueue"}, "mode: must be standalone or kueue-external"),
        ({"kueueNative": {"nominate": 0}}, "kueueNative.nominate: must be an integer from 1 to 20"),
        ({"kueueNative": {"dispatcherName": "scored"}}, "kueueNative.dispatcherName: must be a domain-prefixed path"),
        ({"kueueNative": {"dispatcher": "x/y"}}, "kueueNative.dispatcher"),
    ],
)
def test_bad_native_settings_name_the_key(extra: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_config({**BASE, **extra})


def test_the_rigs_multikueue_configuration_per_flavour() -> None:
    names = {f: multikueue_config(f, worker_lost_timeout=20)["multiKueue"]["dispatcherName"] for f in FLAVOURS}
    assert names == {
        "all-at-once": "kueue.x-k8s.io/multikueue-dispatcher-all-at-once",
        "incremental": "kueue.x-k8s.io/multikueue-dispatcher-incremental",
        "external": "kueue-dispatcher.io/scored",
    }
    assert multikueue_config("external", worker_lost_timeout=20)["multiKueue"]["workerLostTimeout"] == "20s"
    with pytest.raises(ValueError, match="flavour must be one of"):
        multikueue_config("bogus", worker_lost_timeout=20)


def test_manager_kueue_needs_real_components(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "dispatcher", "rig", "up", "--manager-kueue", "external", "--dir", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 2 and "--manager-kueue needs --real" in done.stderr, done.stderr
