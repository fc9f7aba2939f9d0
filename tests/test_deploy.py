"""deploy/ validated offline: the compose file by ``docker-compose config`` (Debian's package) or
``docker compose config``, the Kubernetes manifests against the Kubernetes schemas that
kubernetes-validate ships, the Dockerfile by its structure; and the facts they share with the code
(grace period, health endpoints, commands) agree. No registry, no images.

A validator that is not installed skips its test, unless NOETA_REQUIRE_DEPLOY_TOOLS=1 (CI, whose
script installs them) makes that a failure."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from noeta.cli import parser
from noeta.client.config import DEFAULT_SHUTDOWN_GRACE_SECONDS

yaml = pytest.importorskip("yaml")

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
MANIFESTS = sorted((DEPLOY / "k8s").glob("*.yaml"))


def missing(what: str) -> None:
    if os.environ.get("NOETA_REQUIRE_DEPLOY_TOOLS") == "1":
        pytest.fail(f"{what} is required (NOETA_REQUIRE_DEPLOY_TOOLS=1)")
    pytest.skip(f"{what} is not installed")


def kubernetes_validator() -> Any:
    try:
        import kubernetes_validate
    except ImportError:
        missing("kubernetes-validate")
    return kubernetes_validate


def compose_command() -> list[str] | None:
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    if shutil.which("docker") and subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    return None


def compose_config(path: Path) -> subprocess.CompletedProcess[str]:
    command = compose_command()
    if command is None:
        missing("docker-compose (or the docker compose plugin)")
    return subprocess.run([*command, "-f", str(path), "config"], capture_output=True, text=True, cwd=path.parent)


def documents() -> list[tuple[str, dict[str, Any]]]:
    found = []
    for path in MANIFESTS:
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                found.append((f"{path.name}:{doc['kind']}/{doc['metadata']['name']}", doc))
    return found


def resource(kind: str, name: str) -> dict[str, Any]:
    return next(doc for _, doc in documents() if doc["kind"] == kind and doc["metadata"]["name"] == name)


def seconds(duration: str) -> float:
    match = re.fullmatch(r"(\d+)s", duration)
    assert match, duration
    return float(match.group(1))


# -- compose ------------------------------------------------------------------------------------


def test_the_compose_file_is_valid():
    proc = compose_config(DEPLOY / "compose.yaml")
    assert proc.returncode == 0, proc.stderr
    services = yaml.safe_load(proc.stdout)["services"]
    assert set(services) == {"temporal-db", "temporal", "temporal-ui", "content-db", "setup", "worker", "serve"}
    for name in ("temporal-db", "temporal", "content-db", "worker", "serve"):
        assert "healthcheck" in services[name], name
    # The search-attribute step runs before workers and the API start.
    assert services["setup"]["command"] == ["setup"]
    for name in ("worker", "serve"):
        assert services[name]["depends_on"]["setup"]["condition"] == "service_completed_successfully"
    worker = services["worker"]
    grace = float(worker["environment"]["NOETA_SHUTDOWN_GRACE_SECONDS"])
    assert seconds(worker["stop_grace_period"]) > grace
    assert worker["environment"]["NOETA_CONTENT_STORE"].startswith("postgresql://")


def test_the_compose_validator_rejects_a_broken_file(tmp_path: Path):
    """So the test above can fail: an unknown service key is an error."""
    broken = tmp_path / "compose.yaml"
    broken.write_text("services:\n  worker:\n    image: noeta\n    restart_policy_typo: always\n")
    assert compose_config(broken).returncode != 0


# -- Kubernetes -----------------------------------------------------------------------------------


@pytest.mark.parametrize("name,doc", documents(), ids=[n for n, _ in documents()])
def test_each_manifest_matches_the_kubernetes_schema(name: str, doc: dict[str, Any]):
    kubernetes_validate = kubernetes_validator()
    kubernetes_validate.validate(doc, kubernetes_validate.latest_version(), strict=True)


def test_the_schema_validator_rejects_a_broken_manifest():
    kubernetes_validate = kubernetes_validator()
    worker = resource("Deployment", "noeta-worker")
    broken = {**worker, "spec": {**worker["spec"], "replicas": "two"}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, kubernetes_validate.latest_version(), strict=True)


def test_the_worker_deployment_fits_the_workers_shutdown_and_health():
    config = resource("ConfigMap", "noeta-config")["data"]
    grace = float(config["NOETA_SHUTDOWN_GRACE_SECONDS"])
    assert grace == DEFAULT_SHUTDOWN_GRACE_SECONDS
    pod = resource("Deployment", "noeta-worker")["spec"]["template"]["spec"]
    assert pod["terminationGracePeriodSeconds"] > grace
    container = pod["containers"][0]
    assert container["args"][0] == "worker"
    health_port = int(config["NOETA_HEALTH_PORT"])
    assert {p["name"]: p["containerPort"] for p in container["ports"]}["health"] == health_port
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert pod["securityContext"]["runAsNonRoot"] is True
    refs = {ref.get("configMapRef", ref.get("secretRef"))["name"] for ref in container["envFrom"]}
    assert refs == {"noeta-config", "noeta-secrets"}
    # Secrets hold the credentials, never the ConfigMap.
    assert not {k for k in config if k.endswith(("_API_KEY", "CONTENT_STORE"))}


def test_every_noeta_command_in_deploy_exists():
    commands = set(parser()._subparsers._group_actions[0].choices)  # type: ignore[union-attr]
    used = {"worker", "serve", "setup", "retention"}
    assert used <= commands
    for _, doc in documents():
        spec = doc.get("spec", {})
        template = spec.get("jobTemplate", {}).get("spec", spec).get("template")
        for container in template["spec"]["containers"] if template else ():
            assert container["args"][0] in used
            parser().parse_args(container["args"])  # the arguments parse


# -- Dockerfile -----------------------------------------------------------------------------------


def instructions(path: Path) -> list[tuple[str, str]]:
    text = re.sub(r"\\\n", " ", path.read_text())
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1]) for line in lines]


def test_the_dockerfile_builds_a_small_non_root_image_from_the_checkout():
    steps = instructions(DEPLOY / "Dockerfile")
    froms = [arg for op, arg in steps if op == "FROM"]
    assert len(froms) == 2, "a build stage and a slim runtime stage"
    assert all(":" in f.split()[0] and not f.split()[0].endswith(":latest") for f in froms), "pinned base images"
    runtime = steps[max(i for i, (op, _) in enumerate(steps) if op == "FROM") :]
    users = [arg for op, arg in runtime if op == "USER"]
    assert users and users[-1].split(":")[0] not in ("root", "0")
    assert all(op != "ADD" for op, _ in steps), "COPY only: nothing fetched at build time"
    for op, arg in steps:
        if op == "COPY" and not arg.startswith("--from"):
            for source in arg.split()[:-1]:
                assert (ROOT / source).exists(), f"{source} is not in the checkout"
    assert any(op == "RUN" and 'install --no-cache-dir --no-compile ".[postgres,serve]"' in arg for op, arg in steps)
    entrypoint = next(arg for op, arg in runtime if op == "ENTRYPOINT")
    assert entrypoint.startswith("["), "exec form: the worker is PID 1 and receives SIGTERM"
    ignore = [line for line in (DEPLOY / "Dockerfile.dockerignore").read_text().splitlines() if line and line[0] != "#"]
    assert ignore[0] == "*" and "!noeta/" in ignore, "the build context holds only the project"


def test_the_readme_explains_every_file():
    readme = (DEPLOY / "README.md").read_text()
    for path in sorted(p for p in DEPLOY.rglob("*") if p.is_file() and p.name != "README.md"):
        assert str(path.relative_to(DEPLOY)) in readme, path
