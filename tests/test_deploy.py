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


#: What compose.yaml requires from its operator (it refuses to start without them).
REQUIRED_ENV = {"NOETA_ENCRYPTION_KEYS": "k1:" + "A" * 44, "NOETA_CODEC_TOKENS": "t" * 32}


def compose_config(path: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    command = compose_command()
    if command is None:
        missing("docker-compose (or the docker compose plugin)")
    environ = {k: v for k, v in os.environ.items() if k not in REQUIRED_ENV}
    return subprocess.run(
        [*command, "-f", str(path), "config"], capture_output=True, text=True, cwd=path.parent,
        env={**environ, **(REQUIRED_ENV if env is None else env)},
    )


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


NOETA_SERVICES = ("setup", "worker", "serve", "codec-server")


def compose_services() -> dict[str, Any]:
    proc = compose_config(DEPLOY / "compose.yaml")
    assert proc.returncode == 0, proc.stderr
    services: dict[str, Any] = yaml.safe_load(proc.stdout)["services"]
    return services


@pytest.mark.server
def test_the_compose_file_is_valid():
    services = compose_services()
    assert set(services) == {
        "temporal-db", "temporal-schema", "temporal", "temporal-namespace", "temporal-ui", "content-db", "setup",
        "worker", "serve", "codec-server", "otel-collector",
    }
    for name in ("temporal-db", "temporal", "content-db", "worker", "serve", "codec-server"):
        assert "healthcheck" in services[name], name
    # The search-attribute step runs before workers and the API start.
    assert services["setup"]["command"] == ["setup"]
    for name in ("worker", "serve"):
        assert services[name]["depends_on"]["setup"]["condition"] == "service_completed_successfully"
    worker = services["worker"]
    grace = float(worker["environment"]["NOETA_SHUTDOWN_GRACE_SECONDS"])
    assert seconds(worker["stop_grace_period"]) > grace
    assert worker["environment"]["NOETA_CONTENT_STORE"].startswith("postgresql://")


@pytest.mark.server
def test_compose_wires_observability_and_the_codec_server():
    services = compose_services()
    # Every Noeta process sends its traces to the collector, over OTLP/HTTP, and logs JSON.
    collector = services["otel-collector"]
    assert any("otel/collector.yaml" in str(volume) for volume in collector["volumes"])
    collector_config = yaml.safe_load((DEPLOY / "otel" / "collector.yaml").read_text())
    otlp_http = collector_config["receivers"]["otlp"]["protocols"]["http"]["endpoint"].rsplit(":", 1)[1]
    for name in NOETA_SERVICES:
        env = services[name]["environment"]
        assert env["OTEL_EXPORTER_OTLP_ENDPOINT"] == f"http://otel-collector:{otlp_http}", name
        assert env["OTEL_EXPORTER_OTLP_PROTOCOL"] == "http/protobuf" and env["NOETA_LOG_FORMAT"] == "json", name
        assert env["NOETA_ENCRYPTION_KEYS"] == REQUIRED_ENV["NOETA_ENCRYPTION_KEYS"], name
    assert len({services[name]["environment"]["OTEL_SERVICE_NAME"] for name in ("worker", "serve", "codec-server")}) == 3
    # The collector scrapes every worker replica on the port the workers serve their metrics on.
    worker_args = parser().parse_args(services["worker"]["command"])
    assert worker_args.metrics_host == "0.0.0.0"
    scrape = {job["job_name"]: job for job in collector_config["receivers"]["prometheus"]["config"]["scrape_configs"]}
    [workers] = scrape["noeta-worker"]["dns_sd_configs"]
    assert (workers["names"], workers["port"]) == (["worker"], worker_args.metrics_port)
    assert "metrics" in collector_config["service"]["pipelines"] and "traces" in collector_config["service"]["pipelines"]
    # The codec server runs with its token, for the UI's origin.
    codec = services["codec-server"]
    assert codec["environment"]["NOETA_CODEC_TOKENS"] == REQUIRED_ENV["NOETA_CODEC_TOKENS"]
    codec_args = parser().parse_args(codec["command"])
    assert codec_args.ui_origin == ["http://127.0.0.1:8233"]
    # The UI reaches it with the kit's own token in the endpoint's path: payloads decode on first start.
    ui_env = services["temporal-ui"]["environment"]
    assert ui_env["TEMPORAL_CODEC_ENDPOINT"] == f"http://127.0.0.1:{codec_args.port}/{REQUIRED_ENV['NOETA_CODEC_TOKENS']}"
    assert ui_env["TEMPORAL_CODEC_PASS_ACCESS_TOKEN"] == "false"


def test_the_kubernetes_ui_decodes_with_the_codec_servers_own_token():
    docs = {(doc["kind"], doc["metadata"]["name"]): doc for _, doc in documents()}
    [ui] = docs[("Deployment", "noeta-temporal-ui")]["spec"]["template"]["spec"]["containers"]
    env = [e["name"] for e in ui["env"]]
    values = {e["name"]: e for e in ui["env"]}
    # Kubernetes expands $(NOETA_CODEC_TOKENS) only from a variable defined before it.
    assert env.index("NOETA_CODEC_TOKENS") < env.index("TEMPORAL_CODEC_ENDPOINT")
    assert values["NOETA_CODEC_TOKENS"]["valueFrom"]["secretKeyRef"] == {"name": "noeta-secrets", "key": "NOETA_CODEC_TOKENS"}
    [codec] = docs[("Deployment", "noeta-codec-server")]["spec"]["template"]["spec"]["containers"]
    args = parser().parse_args(codec["args"])
    assert values["TEMPORAL_CODEC_ENDPOINT"]["value"] == f"http://127.0.0.1:{args.port}/$(NOETA_CODEC_TOKENS)"
    assert "http://127.0.0.1:8233" in args.ui_origin  # the port-forwarded UI's origin
    hosts = next(e["value"] for e in codec["env"] if e["name"] == "NOETA_CODEC_ALLOWED_HOSTS").split(",")
    assert "127.0.0.1" in hosts


@pytest.mark.server
def test_compose_runs_a_maintained_temporal_and_the_ui_the_docs_describe():
    services = compose_services()
    images = {name: s.get("image", "") for name, s in services.items()}
    assert not any("auto-setup" in image for image in images.values())  # deprecated
    server, tools = images["temporal"].split(":"), images["temporal-schema"].split(":")
    assert server[0] == "temporalio/server" and tools[0] == "temporalio/admin-tools" and server[1] == tools[1]
    assert services["temporal"]["depends_on"]["temporal-schema"]["condition"] == "service_completed_successfully"
    assert services["setup"]["depends_on"]["temporal-namespace"]["condition"] == "service_completed_successfully"
    ui_version = images["temporal-ui"].split(":")[1]
    assert f"UI {ui_version}" in (ROOT / "docs" / "inspection.md").read_text()


@pytest.mark.server
def test_compose_refuses_to_start_without_keys():
    proc = compose_config(DEPLOY / "compose.yaml", env={"NOETA_CODEC_TOKENS": "t" * 32})
    assert proc.returncode != 0 and "NOETA_ENCRYPTION_KEYS" in proc.stderr


@pytest.mark.server
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


def test_worker_metrics_are_scraped_and_disruptions_are_bounded():
    worker = resource("Deployment", "noeta-worker")["spec"]["template"]
    container = worker["spec"]["containers"][0]
    args = parser().parse_args(container["args"])
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports["metrics"] == args.metrics_port and args.metrics_host == "0.0.0.0"
    annotations = worker["metadata"]["annotations"]
    assert (annotations["prometheus.io/scrape"], int(annotations["prometheus.io/port"])) == ("true", args.metrics_port)
    service = resource("Service", "noeta-worker-metrics")
    assert service["spec"]["selector"].items() <= worker["metadata"]["labels"].items()
    assert {p["name"]: p["targetPort"] for p in service["spec"]["ports"]} == {"metrics": "metrics"}
    monitor = yaml.safe_load((DEPLOY / "k8s" / "monitoring" / "servicemonitor.yaml").read_text())
    assert (monitor["apiVersion"], monitor["kind"]) == ("monitoring.coreos.com/v1", "ServiceMonitor")
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert [e["port"] for e in monitor["spec"]["endpoints"]] == ["metrics"]
    budget = resource("PodDisruptionBudget", "noeta-worker")["spec"]
    assert budget["selector"]["matchLabels"].items() <= worker["metadata"]["labels"].items()
    assert budget["maxUnavailable"] == 1
    config = resource("ConfigMap", "noeta-config")["data"]
    assert config["NOETA_LOG_FORMAT"] == "json" and config["OTEL_EXPORTER_OTLP_ENDPOINT"].startswith("http")
    codec = resource("Deployment", "noeta-codec-server")["spec"]["template"]["spec"]["containers"][0]
    assert codec["args"][0] == "codec-server"
    secret = resource("Secret", "noeta-secrets")["stringData"]
    assert {"NOETA_CODEC_TOKENS", "NOETA_ENCRYPTION_KEYS"} <= set(secret)


def test_the_dashboard_reads_only_metrics_noeta_and_temporal_export():
    import json

    from noeta.telemetry import metrics

    names = {value for key, value in vars(metrics).items() if key.isupper() and isinstance(value, str) and value.startswith("noeta_")}
    dashboard = json.loads((DEPLOY / "grafana" / "noeta-dashboard.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    used = {m for e in exprs for m in re.findall(r"\b(noeta_\w+)", e)}
    assert used, "the dashboard shows Noeta's metrics"
    for metric in used:
        base = re.sub(r"_(total|bucket|count|sum)$", "", metric)
        assert metric in names or base in names, metric
    assert "noeta_cost_usd_total" in used and "noeta_approval_wait_bucket" in used


def test_every_noeta_command_in_deploy_exists():
    commands = set(parser()._subparsers._group_actions[0].choices)  # type: ignore[union-attr]
    used = {"worker", "serve", "setup", "retention", "codec-server"}
    assert used <= commands
    for _, doc in documents():
        spec = doc.get("spec", {})
        template = spec.get("jobTemplate", {}).get("spec", spec).get("template")
        for container in template["spec"]["containers"] if template else ():
            if "noeta" not in container["image"]:
                continue  # the Temporal UI
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
    assert any(op == "RUN" and 'install --no-cache-dir --no-compile ".[postgres,serve,otel]"' in arg for op, arg in steps)
    entrypoint = next(arg for op, arg in runtime if op == "ENTRYPOINT")
    assert entrypoint.startswith("["), "exec form: the worker is PID 1 and receives SIGTERM"
    ignore = [line for line in (DEPLOY / "Dockerfile.dockerignore").read_text().splitlines() if line and line[0] != "#"]
    assert ignore[0] == "*" and "!noeta/" in ignore, "the build context holds only the project"


def test_the_deploy_readme_and_the_security_docs_agree_on_serves_api_keys():
    readme, security = (DEPLOY / "README.md").read_text(), (ROOT / "docs" / "security.md").read_text()
    assert "NOETA_API_KEYS" in security and "NOETA_API_KEYS" in readme
    assert "no authentication of its own" not in readme


def test_the_readme_explains_every_file():
    readme = (DEPLOY / "README.md").read_text()
    for path in sorted(p for p in DEPLOY.rglob("*") if p.is_file() and p.name != "README.md"):
        assert str(path.relative_to(DEPLOY)) in readme, path
