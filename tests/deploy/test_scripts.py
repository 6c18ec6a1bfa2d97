"""kind/*.sh and deploy/worker/mint-kubeconfig.sh: shellcheck clean, dry runs that need no docker/kind/kubectl,
and a kubeconfig minted for real that the dispatcher can use.

- shellcheck (the test extra installs it) finds nothing at any severity in any script;
- every script is strict (``set -euo pipefail``), executable and prints its usage on ``-h``;
- the dry runs, on a PATH that holds no docker, kind or kubectl, exit 0, create nothing, and print the commands
  a real run makes: kind create cluster for the three clusters, Kueue's release manifests, the queues, the
  HAMi node annotation (decoded here with HAMi's rules) and nvidia.com/gpu, the worker RBAC, the token, the
  docker stop/start of a drill, and a clusters.yaml the dispatcher accepts;
- a real run without those programs stops at once, naming the missing one;
- mint-kubeconfig.sh with a stand-in kubectl on the worker side writes a 0600 kubeconfig; the command it
  prints, run with the real kubectl against a simulated manager, makes the Secret, and the dispatcher's own
  client, configured with that secretRef, reaches the (simulated) worker over TLS with the minted token.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from deploytools import REPO, tool

from dispatcher.api.auth import ENV_VAR as API_TOKENS_VAR
from dispatcher.api.auth import TokenStore
from dispatcher.config import KubeconfigRef, parse_config
from dispatcher.kube.client import Resource, connect
from dispatcher.placement.hami.nodecodec import decode_node_devices
from kubesim.cluster import ClusterOptions, SimCluster

SCRIPTS = sorted(p for d in ("kind", "deploy") for p in (REPO / d).rglob("*.sh") if "out" not in p.parts)
RUNNABLE = [p for p in SCRIPTS if p.name != "lib.sh"]
UP, DOWN, DRILL = (REPO / "kind" / n for n in ("up.sh", "down.sh", "drill.sh"))
MINT = REPO / "deploy" / "worker" / "mint-kubeconfig.sh"
#: What the scripts may use in a dry run besides bash's builtins (and $PYTHON for HAMi's annotation).
BASICS = ("bash", "dirname", "cat", "date")
SECRETS = Resource("", "v1", "secrets", "Secret")


def test_every_script_is_found() -> None:
    names = {p.relative_to(REPO).as_posix() for p in SCRIPTS}
    assert {"kind/up.sh", "kind/down.sh", "kind/drill.sh", "kind/lib.sh", "deploy/worker/mint-kubeconfig.sh"} <= names


def test_shellcheck_finds_nothing() -> None:
    done = subprocess.run(
        [tool("shellcheck"), "--external-sources", "--severity=style", "--shell=bash", *map(str, SCRIPTS)],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
        cwd="/",  # source directives must not depend on where shellcheck runs
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("script", RUNNABLE, ids=lambda p: p.name)
def test_scripts_are_strict_executable_and_explain_themselves(script: Path, bare_path: dict[str, str]) -> None:
    text = script.read_text()
    assert text.startswith("#!/usr/bin/env bash\n")
    assert "\nset -euo pipefail\n" in text
    assert os.stat(script).st_mode & stat.S_IXUSR
    for flag in ("-h", "--help"):
        done = _run(script, flag, env=bare_path)
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("Usage:") and "--dry-run" in done.stdout


@pytest.fixture
def bare_path(tmp_path: Path) -> dict[str, str]:
    """An environment whose PATH has bash and a few coreutils, and no docker, kind or kubectl."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in BASICS:
        found = shutil.which(name)
        assert found, name
        (bin_dir / name).symlink_to(found)
    env = {
        "PATH": str(bin_dir),
        "HOME": str(tmp_path),
        "LANG": "C.UTF-8",
        "PYTHON": sys.executable,
        "OUT_DIR": str(tmp_path / "out"),
    }
    for name in ("docker", "kind", "kubectl"):
        assert (
            subprocess.run(["bash", "-c", f"command -v {name}"], check=False, env=env, capture_output=True).returncode
            != 0
        )
    return env


def _run(script: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(script), *args], check=False, env=env, capture_output=True, text=True, timeout=120, cwd="/"
    )


def _commands(stdout: str) -> list[str]:
    return [line[2:] for line in stdout.splitlines() if line.startswith("+ ")]


def _heredoc(stdout: str, path: str) -> str:
    match = re.search(rf"^\+ cat > {re.escape(path)} <<'EOF'\n(.*?)^EOF$", stdout, re.MULTILINE | re.DOTALL)
    assert match, f"no listing of {path}"
    return match.group(1)


def _kueue_version() -> str:
    match = re.search(r"^KUEUE_VERSION=\$\{KUEUE_VERSION:-(v[0-9.]+)\}$", UP.read_text(), re.MULTILINE)
    assert match, "up.sh pins a default Kueue version"
    return match.group(1)


def test_up_dry_run_lists_every_step_and_needs_no_tools(bare_path: dict[str, str], tmp_path: Path) -> None:
    done = _run(UP, "--dry-run", env=bare_path)
    assert done.returncode == 0, done.stderr
    cmds = _commands(done.stdout)
    kind = REPO / "kind"
    version = _kueue_version()
    release = f"https://github.com/kubernetes-sigs/kueue/releases/download/{version}/manifests.yaml"
    for cluster in ("dispatcher-manager", "dispatcher-worker-1"):
        assert f"kind create cluster --name {cluster} --wait 120s" in cmds
    assert (
        f"kind create cluster --name dispatcher-worker-2 --wait 120s --config {kind}/manifests/kind-gpu-cluster.yaml"
        in cmds
    )
    manager = "kubectl --context kind-dispatcher-manager"
    assert any(c.startswith(f"{manager} apply --server-side -f https://raw.githubusercontent.com/kubernetes-sigs/"
                            f"kueue/{version}/config/components/crd/bases/") for c in cmds)  # fmt: skip
    assert f"{manager} apply --server-side -f {kind}/manifests/manager/" in cmds
    assert not any(release in c and "dispatcher-manager" in c for c in cmds), "no Kueue controller on the manager"
    for n, flavor in ((1, "worker-cpu"), (2, "worker-gpu")):
        worker = f"kubectl --context kind-dispatcher-worker-{n}"
        assert f"{worker} apply --server-side --force-conflicts -f {release}" in cmds
        assert (
            f"{worker} -n kueue-system wait --for=condition=Available --timeout=300s "
            "deployment/kueue-controller-manager" in cmds
        )
        assert f"{worker} apply --server-side -f {kind}/manifests/worker-common/ -f {kind}/manifests/{flavor}/" in cmds
        assert f"{worker} apply --server-side -k {REPO}/deploy/worker/" in cmds
        assert f"{worker} -n kueue-system create token kueue-dispatcher --duration 8760h" in cmds
    gpu = "kubectl --context kind-dispatcher-worker-2"
    assert f"{gpu} -n kueue-system rollout restart deployment/kueue-controller-manager" in cmds
    uuids: set[str] = set()
    for node in ("dispatcher-worker-2-worker", "dispatcher-worker-2-worker2"):
        assert f"{gpu} label node {node} --overwrite hami.io/vgpu=true nvidia.com/gpu.present=true gpu=on" in cmds
        [annotate] = [c for c in cmds if c.startswith(f"{gpu} annotate node {node} ")]
        value = shlex.split(annotate)[-1].split("=", 1)[1]
        devices = decode_node_devices(value)  # HAMi's own decoding rules
        assert [(d.count, d.devmem, d.devcore, d.health) for d in devices] == [(10, 40960, 100, True)] * 4
        uuids |= {d.id for d in devices}
        [patch] = [c for c in cmds if c.startswith(f"{gpu} patch node {node} --subresource=status")]
        body = json.loads(shlex.split(patch)[-1])
        assert body == {"status": {"capacity": {"nvidia.com/gpu": "40"}, "allocatable": {"nvidia.com/gpu": "40"}}}
    assert len(uuids) == 8, "every GPU has its own UUID"
    assert not any(c.startswith(("docker ", "kind load")) for c in cmds), "no image without --deploy"

    out = bare_path["OUT_DIR"]
    assert f"kind export kubeconfig --name dispatcher-manager --kubeconfig {out}/manager.kubeconfig" in cmds
    config = parse_config(yaml.safe_load(_heredoc(done.stdout, f"{out}/clusters.yaml")), base=Path(out))
    assert config.manager.path == f"{out}/manager.kubeconfig"
    assert [(w.name, w.kube.path, dict(w.labels)) for w in config.workers] == [
        ("worker-1", f"{out}/worker-1.kubeconfig", {"gpu": "false"}),
        ("worker-2", f"{out}/worker-2.kubeconfig", {"gpu": "true"}),
    ]
    assert not Path(out).exists(), "a dry run writes nothing"


def test_up_dry_run_with_deploy_builds_loads_and_applies(bare_path: dict[str, str]) -> None:
    done = _run(UP, "--dry-run", "--deploy", env=bare_path)
    assert done.returncode == 0, done.stderr
    cmds = _commands(done.stdout)
    out = bare_path["OUT_DIR"]
    manager = "kubectl --context kind-dispatcher-manager"
    expected = [
        f"docker build -t kueue-dispatcher:dev {REPO}",
        "kind load docker-image kueue-dispatcher:dev --name dispatcher-manager",
        f"{manager} -n dispatcher-system create secret generic worker-1-kubeconfig "
        f"--from-file=kubeconfig={out}/worker-1.internal.kubeconfig",
        f"{manager} -n dispatcher-system create secret generic kueue-dispatcher-api-tokens "
        f"--from-file=tokens={out}/api-tokens",
        f"{manager} apply --server-side -k {REPO}/kind/manifests/dispatcher/",
    ]
    positions = [cmds.index(c) for c in expected]
    assert positions == sorted(positions), "build, load, secrets, then the Deployment"
    assert f"+ write {out}/worker-2.internal.kubeconfig (mode 0600): a kubeconfig for worker-2 at " \
           "https://dispatcher-worker-2-control-plane:6443" in done.stdout  # fmt: skip


STAND_IN = """#!/usr/bin/env bash
# A stand-in for docker, kind and kubectl: logs its command line and answers what the scripts read back.
prog=${0##*/}
{ printf '%q ' "$prog" "$@"; printf '\\n'; } >>"$STAND_IN_LOG"
case "$prog $*" in
  "kind get clusters") echo dispatcher-manager ;;
  *"get serviceaccount kueue-dispatcher -o name") echo serviceaccount/kueue-dispatcher ;;
  *"create token kueue-dispatcher --duration 8760h") echo minted-token ;;
  *"jsonpath={.clusters[0].cluster.server}") echo https://127.0.0.1:6443 ;;
  *"jsonpath={.clusters[0].cluster.certificate-authority-data}") echo Q0EK ;;
esac
"""


@pytest.mark.parametrize("deploy", [False, True], ids=["host", "deploy"])
def test_up_real_run_runs_exactly_what_its_dry_run_lists(tmp_path: Path, deploy: bool) -> None:
    """With stand-ins for docker, kind and kubectl: the same commands in the same order as the dry run
    (less the creation of the cluster that already exists), and the files it writes."""
    stand_ins = tmp_path / "stand-ins"
    stand_ins.mkdir()
    for name in ("docker", "kind", "kubectl"):
        (stand_ins / name).write_text(STAND_IN)
        (stand_ins / name).chmod(0o755)
    out = tmp_path / "out"
    log = tmp_path / "commands.log"
    env = {
        "PATH": f"{stand_ins}:/usr/bin:/bin",
        "HOME": str(tmp_path),
        "PYTHON": sys.executable,
        "OUT_DIR": str(out),
        "STAND_IN_LOG": str(log),
    }
    flags = ["--deploy"] if deploy else []
    listed = _run(UP, "--dry-run", *flags, env=env)
    assert listed.returncode == 0, listed.stderr
    assert not log.exists(), "the dry run ran none of them"
    expected = [
        shlex.split(c)
        for c in _commands(listed.stdout)
        if c.split()[0] in ("docker", "kind", "kubectl") and "create cluster --name dispatcher-manager " not in c
    ]
    done = _run(UP, *flags, env=env)
    assert done.returncode == 0, done.stderr
    assert "cluster dispatcher-manager exists; reusing it" in done.stderr
    ran = [shlex.split(line) for line in log.read_text().splitlines()]
    assert ran == expected
    assert stat.S_IMODE((out / "clusters.yaml").stat().st_mode) == 0o600
    config = parse_config(yaml.safe_load((out / "clusters.yaml").read_text()), base=out)
    assert [w.name for w in config.workers] == ["worker-1", "worker-2"]
    for n in (1, 2):
        kubeconfig = yaml.safe_load((out / f"worker-{n}.kubeconfig").read_text())
        assert kubeconfig["users"][0]["user"] == {"token": "minted-token"}
        assert kubeconfig["clusters"][0]["cluster"]["server"] == "https://127.0.0.1:6443"
        internal = out / f"worker-{n}.internal.kubeconfig"
        assert internal.exists() == deploy
        if deploy:
            server = yaml.safe_load(internal.read_text())["clusters"][0]["cluster"]["server"]
            assert server == f"https://dispatcher-worker-{n}-control-plane:6443"
    if deploy:
        tokens = (out / "api-tokens").read_text()
        assert [line.split()[0] for line in tokens.splitlines()] == ["read", "admin"]
        assert len(TokenStore.load(None, environ={API_TOKENS_VAR: tokens})) == 2, "the API accepts both"


def test_up_takes_the_kueue_version_from_the_environment_and_refuses_junk(bare_path: dict[str, str]) -> None:
    done = _run(UP, "--dry-run", env={**bare_path, "KUEUE_VERSION": "v0.20.1"})
    assert done.returncode == 0
    assert "releases/download/v0.20.1/manifests.yaml" in done.stdout
    done = _run(UP, "--kueue-version", "latest", "--dry-run", env=bare_path)
    assert done.returncode != 0 and "vX.Y.Z" in done.stderr and not _commands(done.stdout)


def test_dry_run_by_environment_variable(bare_path: dict[str, str]) -> None:
    done = _run(DOWN, env={**bare_path, "DRY_RUN": "1"})
    assert done.returncode == 0, done.stderr
    out = bare_path["OUT_DIR"]
    assert _commands(done.stdout) == [
        "kind delete cluster --name dispatcher-manager",
        "kind delete cluster --name dispatcher-worker-1",
        "kind delete cluster --name dispatcher-worker-2",
        f"rm -rf -- {out}",
    ]
    done = _run(DOWN, "--dry-run", "--keep-out", env=bare_path)
    assert not any(c.startswith("rm ") for c in _commands(done.stdout))


def test_drill_dry_run_stops_waits_and_starts_the_control_plane(bare_path: dict[str, str]) -> None:
    done = _run(DRILL, "--dry-run", "worker-1", "45", env=bare_path)
    assert done.returncode == 0, done.stderr
    assert _commands(done.stdout) == [
        "docker stop dispatcher-worker-1-control-plane",
        "sleep 45",
        "docker start dispatcher-worker-1-control-plane",
        "kubectl --context kind-dispatcher-worker-1 get --raw /readyz",
    ]
    done = _run(DRILL, "--dry-run", "dispatcher-worker-2", env=bare_path)
    assert _commands(done.stdout)[:2] == ["docker stop dispatcher-worker-2-control-plane", "sleep 90"]
    for bad in (["worker-7"], ["worker-1", "soon"]):
        done = _run(DRILL, "--dry-run", *bad, env=bare_path)
        assert done.returncode != 0 and not _commands(done.stdout), bad
    done = _run(DRILL, "--dry-run", env=bare_path)
    assert done.returncode == 2 and done.stderr.startswith("Usage:")


@pytest.mark.parametrize("script", [UP, DOWN, DRILL, MINT], ids=lambda p: p.name)
def test_real_run_without_the_tools_stops_at_once_naming_them(script: Path, bare_path: dict[str, str]) -> None:
    args = {"drill.sh": ["worker-1", "1"], "mint-kubeconfig.sh": ["ctx", "worker-1"]}.get(script.name, [])
    done = _run(script, *args, env=bare_path)
    assert done.returncode != 0
    assert re.search(r"\b(kind|docker|kubectl) is required", done.stderr), done.stderr
    assert not _commands(done.stdout)
    assert not Path(bare_path["OUT_DIR"]).exists()


def test_mint_dry_run_lists_the_token_request_and_the_manager_command(bare_path: dict[str, str]) -> None:
    done = _run(MINT, "--dry-run", "kind-dispatcher-worker-1", "worker-1", env=bare_path)
    assert done.returncode == 0, done.stderr
    cmds = _commands(done.stdout)
    ctx = "kubectl --context kind-dispatcher-worker-1"
    assert cmds[:2] == [
        f"{ctx} -n kueue-system get serviceaccount kueue-dispatcher -o name",
        f"{ctx} -n kueue-system create token kueue-dispatcher --duration 8760h",
    ]
    assert (
        "  kubectl -n dispatcher-system create secret generic worker-1-kubeconfig "
        "--from-file=kubeconfig=worker-1.kubeconfig" in done.stdout.splitlines()
    )
    done = _run(MINT, "--dry-run", "--secret-token", "ctx", "worker-1", env=bare_path)
    assert done.returncode == 0, done.stderr
    assert "kubectl --context ctx apply -f - <<EOF" in done.stdout
    assert "type: kubernetes.io/service-account-token" in done.stdout
    done = _run(MINT, "--dry-run", "ctx", "Not_A_Name", env=bare_path)
    assert done.returncode != 0 and "DNS label" in done.stderr


FAKE_KUBECTL = """#!/usr/bin/env bash
# A stand-in for kubectl on the worker side: answers the calls mint-kubeconfig.sh makes, refuses anything else.
printf '%s\\n' "$*" >>"$FAKE_LOG"
case "$*" in
  *"get serviceaccount kueue-dispatcher -o name") echo serviceaccount/kueue-dispatcher ;;
  *"create token kueue-dispatcher --duration 8760h") printf '%s\\n' "$FAKE_TOKEN" ;;
  *"apply -f -") cat >>"$FAKE_LOG" ;;
  *"get secret kueue-dispatcher-token -o jsonpath={.data.token}") printf '%s' "$FAKE_TOKEN" | base64 -w0 ;;
  *"jsonpath={.clusters[0].cluster.server}") printf '%s' "$FAKE_SERVER" ;;
  *"jsonpath={.clusters[0].cluster.certificate-authority-data}") printf '%s' "$FAKE_CA" ;;
  *) echo "unexpected kubectl $*" >&2; exit 1 ;;
esac
"""


@pytest.mark.parametrize("mode", ["bound-token", "secret-token"])
async def test_minted_kubeconfig_reaches_the_worker_through_the_printed_secret(tmp_path: Path, mode: str) -> None:
    def options() -> ClusterOptions:
        return ClusterOptions(kueue=False, jobs=False, scheduler=False, kubelet=False)

    manager, worker = SimCluster("manager", options()), SimCluster("worker-1", options())
    manager.ensure_namespace("dispatcher-system")
    await manager.start()
    await worker.start()
    try:
        assert worker.tls is not None
        fake_bin = tmp_path / "fake-bin"
        fake_bin.mkdir()
        (fake_bin / "kubectl").write_text(FAKE_KUBECTL)
        (fake_bin / "kubectl").chmod(0o755)
        env = {
            **os.environ,
            "PATH": f"{fake_bin}:{os.environ['PATH']}",
            "FAKE_LOG": str(tmp_path / "kubectl.log"),
            "FAKE_TOKEN": worker.options.token,
            "FAKE_SERVER": worker.url,
            "FAKE_CA": worker.tls.ca_data,
        }
        out = tmp_path / "worker-1.kubeconfig"
        flags = ["--secret-token"] if mode == "secret-token" else []
        done = await asyncio.to_thread(
            subprocess.run,
            [str(MINT), *flags, "--out", str(out), "kind-dispatcher-worker-1", "worker-1"],
            env=env, check=False, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert stat.S_IMODE(out.stat().st_mode) == 0o600
        written = yaml.safe_load(out.read_text())
        assert written["current-context"] == "worker-1"
        assert written["clusters"][0]["cluster"] == {
            "server": worker.url,
            "certificate-authority-data": worker.tls.ca_data,
        }
        assert written["users"][0]["user"] == {"token": worker.options.token}
        if mode == "secret-token":
            assert "kubernetes.io/service-account.name: kueue-dispatcher" in (tmp_path / "kubectl.log").read_text()

        # The printed command, run with the real kubectl (client side: this kubectl speaks protobuf to the API
        # server for built-in kinds, which the simulator does not), then the Secret it makes onto the manager.
        [printed] = [line.strip() for line in done.stdout.splitlines() if "create secret generic" in line]
        argv = shlex.split(printed)
        assert argv[0] == "kubectl"
        rendered = await asyncio.to_thread(
            subprocess.run,
            [tool("kubectl"), *argv[1:], "--dry-run=client", "-o", "json"],
            check=False, capture_output=True, text=True, timeout=60, cwd=tmp_path, env={"HOME": str(tmp_path)},
        )  # fmt: skip
        assert rendered.returncode == 0, rendered.stderr
        secret_obj = json.loads(rendered.stdout)
        manager_kubeconfig = tmp_path / "manager.kubeconfig"
        manager_kubeconfig.write_text(yaml.safe_dump(manager.kubeconfig()))
        manager_client = await connect("manager", KubeconfigRef(path=str(manager_kubeconfig)))
        try:
            await manager_client.create(SECRETS, secret_obj["metadata"]["namespace"], secret_obj)
        finally:
            await manager_client.close()

        # The dispatcher reads it through the secretRef the script told us to write, and reaches the worker.
        snippet = "\n".join(
            line for line in done.stdout.splitlines() if line.startswith("  ") and "kubectl" not in line
        )
        config = parse_config({"manager": {"kubeconfig": str(manager_kubeconfig)}, "workers": yaml.safe_load(snippet)})
        ref = config.workers[0].kube
        assert (ref.secret_namespace, ref.secret_name, ref.secret_key) == (
            "dispatcher-system", "worker-1-kubeconfig", "kubeconfig"
        )  # fmt: skip
        manager_client = await connect("manager", KubeconfigRef(path=str(manager_kubeconfig)))
        try:
            worker_client = await connect("worker-1", ref, manager=manager_client)
            try:
                assert await worker_client.readyz()
                secret = await manager_client.get(SECRETS, "dispatcher-system", "worker-1-kubeconfig")
                assert secret is not None
                assert base64.b64decode(secret["data"]["kubeconfig"]) == out.read_bytes()
            finally:
                await worker_client.close()
        finally:
            await manager_client.close()
    finally:
        await worker.stop()
        await manager.stop()
