"""Where the rig's components are: the binaries and manifests that ``rig/build.sh`` leaves in its cache folder."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["BUILD_HINT", "RigBinaries", "find_binaries"]

BUILD_HINT = (
    "build them with `bash rig/build.sh` (Go >= 1.26 and the Go module proxy), or point --bin-dir or "
    "DISPATCHER_RIG_BIN at a folder that holds them"
)

#: Every binary the rig needs, by component.
REQUIRED = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "kueue")
#: Binaries the rig uses when present (the JobSet controller).
OPTIONAL = ("jobset",)


def _candidates(explicit: str | None) -> list[Path]:
    out: list[Path] = []
    if explicit:
        return [Path(explicit).expanduser()]
    env = os.environ.get("DISPATCHER_RIG_BIN")
    if env:
        return [Path(env).expanduser()]
    out.append(Path.cwd() / "rig" / ".bin")
    # A source checkout: rig/ sits beside the package.
    out.append(Path(__file__).resolve().parents[2] / "rig" / ".bin")
    return out


@dataclass(frozen=True)
class RigBinaries:
    directory: Path

    def path(self, name: str) -> Path:
        return self.directory / name

    def has(self, name: str) -> bool:
        p = self.path(name)
        return p.is_file() and os.access(p, os.X_OK)

    @property
    def manifests(self) -> Path:
        return self.directory / "manifests"

    def missing(self) -> list[str]:
        absent = [b for b in REQUIRED if not self.has(b)]
        for component in ("kueue", "kwok"):
            if not (self.manifests / component).is_dir():
                absent.append(f"manifests/{component}")
        return absent


def find_binaries(explicit: str | None = None) -> RigBinaries:
    """The first candidate folder that holds every required binary; else an error naming what is missing where."""
    candidates = _candidates(explicit)
    for c in candidates:
        found = RigBinaries(c)
        if not found.missing():
            return found
    first = RigBinaries(candidates[0])
    raise FileNotFoundError(
        f"the real rig's components are not built: {', '.join(first.missing())} missing in {first.directory}; "
        + BUILD_HINT
    )
