"""Fixtures of the Kueue-native mode tests: the helpers beside them, and a real rig whose manager runs Kueue with
MultiKueue (its ``external`` flavour), started once for the module that asks for it."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from nativebuild import LOST_TIMEOUT
from realrig import RealRig, RealRigError, start_real_rig


@pytest.fixture(scope="module")
def kueue_rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealRig]:
    """``dispatcher rig up --real --workers 2 --manager-kueue external``: real Kueue with MultiKueue on the
    manager, this project's dispatcher as its external dispatcher (never skipped: unbuilt components fail)."""
    try:
        rig = start_real_rig(
            tmp_path_factory.mktemp("kueue-rig"),
            workers=2,
            gpu_workers=0,
            extra=("--manager-kueue", "external", "--worker-lost-timeout", str(LOST_TIMEOUT)),
        )
    except (RealRigError, OSError) as exc:
        pytest.fail(
            f"the real rig did not start: {exc}\n(build the components with `bash rig/build.sh`)", pytrace=False
        )
    try:
        yield rig
    finally:
        rig.stop()
