"""Checks of rendered Kubernetes objects: schemas, security, consistency with the code, network.

Each ``check_*`` function takes the objects of one rendered overlay and returns problems as
readable strings (``"Deployment/wallet: ..."``); an empty list means the check passed.
``python -m deploy.checks [DIR ...]`` renders the shipped overlays (or the given kustomize
directories) and prints every problem, exiting non-zero if there is any.
"""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml
from kubernetes_validate import utils as kubernetes_validate

from deploy.contract import (
    EXTERNAL,
    REACHABILITY,
    SECRETS,
    WORKLOADS,
    Workload,
    default_shutdown_grace_seconds,
    settings_env_vars,
)
from deploy.envoy import generate as envoy_generate
from deploy.netpol import Endpoint, PolicySet, UnsupportedPolicy
from deploy.render import OVERLAYS, Manifest, RenderError, overlay_dir, render
from services.common.access import browser_rpcs
from services.common.settings import SECRET_FILE_SUFFIX, SERVICE_SECRET_ENV

# kubernetes_validate reads and parses a schema file on every object it checks (three
# quarters of a whole check's time): parse each file once (jsonschema only reads them).
kubernetes_validate.schema_contents = functools.cache(kubernetes_validate.schema_contents)

# The oldest Kubernetes release the manifests target (gRPC probes, preStop sleep, HPA v2).
KUBERNETES_VERSION = "1.33"
POD_OWNERS = ("Deployment", "StatefulSet", "Job", "DaemonSet", "ReplicaSet", "CronJob")
CLUSTER_SCOPED = ("Namespace", "ClusterRole", "ClusterRoleBinding", "PersistentVolume")
GRPC_PORT_ENV = "KISHPA_GRPC_PORT"
METRICS_PORT_ENV = "KISHPA_METRICS_PORT"
SHUTDOWN_GRACE_ENV = "KISHPA_SHUTDOWN_GRACE_SECONDS"
ADDRESS_ENVS = {
    "KISHPA_WALLET_ADDR": "wallet",
    "KISHPA_TABLE_ADDR": "table",
    "KISHPA_MATCHMAKING_ADDR": "matchmaking",
}
DEFAULT_TERMINATION_GRACE_SECONDS = 30


def ref(obj: Manifest) -> str:
    """``Kind/name`` of an object, as problems name it."""
    return f"{obj.get('kind')}/{obj.get('metadata', {}).get('name')}"


def pod_template(obj: Manifest) -> Manifest | None:
    """The pod template of a workload object (None for other kinds)."""
    if obj.get("kind") == "CronJob":
        template: Manifest = obj["spec"]["jobTemplate"]["spec"]["template"]
        return template
    if obj.get("kind") in POD_OWNERS:
        template = obj["spec"]["template"]
        return template
    return None


def pods(objects: list[Manifest]) -> Iterator[tuple[Manifest, Manifest]]:
    """Every (owner, pod template) pair."""
    for obj in objects:
        template = pod_template(obj)
        if template is not None:
            yield obj, template


def app_name(template: Manifest) -> str:
    """The ``app.kubernetes.io/name`` label of a pod template."""
    return str(template.get("metadata", {}).get("labels", {}).get("app.kubernetes.io/name", ""))


def find(objects: list[Manifest], kind: str, name: str) -> Manifest | None:
    """The object of that kind and name, if rendered."""
    for obj in objects:
        if obj.get("kind") == kind and obj.get("metadata", {}).get("name") == name:
            return obj
    return None


def _labels_match(selector: Mapping[str, str], labels: Mapping[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


# --- schemas -------------------------------------------------------------------------------


CERT_MANAGER_API = "cert-manager.io/v1"
WORKLOAD_URI_PREFIX = "spiffe://kishpa/"


def _cert_manager_shape(obj: Manifest) -> list[str]:
    """cert-manager's kinds have no schema in kubernetes_validate: the fields we rely on."""
    spec = obj.get("spec") or {}
    if obj.get("kind") == "Issuer":
        return [] if (spec.get("ca") or {}).get("secretName") else [f"{ref(obj)}: needs spec.ca"]
    if obj.get("kind") != "Certificate":
        return [f"{ref(obj)}: schema: unexpected cert-manager kind"]
    missing = [k for k in ("secretName", "issuerRef", "uris") if not spec.get(k)]
    return [f"{ref(obj)}: schema: spec.{k} is required" for k in missing]


def check_certificates(objects: list[Manifest]) -> list[str]:
    """A workload with TLS files mounts the certificate Secret that names *it*
    (``spiffe://kishpa/<workload>``): the services authorize by that identity."""
    problems = []
    identity = {
        (o.get("spec") or {}).get("secretName"): (o.get("spec") or {}).get("uris") or []
        for o in objects
        if o.get("apiVersion") == CERT_MANAGER_API and o.get("kind") == "Certificate"
    }
    for owner, template in pods(objects):
        name = app_name(template)
        container = template["spec"]["containers"][0]
        values, _, _ = _container_env(owner, container, _config_maps(objects))
        cert = values.get("KISHPA_TLS_CERT_FILE", "")
        if not cert or name not in WORKLOADS or WORKLOADS[name].kind != "Deployment":
            continue
        directory = cert.rpartition("/")[0]
        volumes = {v["name"]: v for v in template["spec"].get("volumes", [])}
        mount = next(
            (m for m in container.get("volumeMounts", []) if m["mountPath"] == directory), None
        )
        secret = (volumes.get(mount["name"], {}) if mount else {}).get("secret") or {}
        uris = identity.get(secret.get("secretName"))
        if uris is None:
            problems.append(f"{ref(owner)}: {cert} is not from a cert-manager Certificate's Secret")
        elif WORKLOAD_URI_PREFIX + name not in uris:
            problems.append(
                f"{ref(owner)}: mounts the certificate of {uris}, not {WORKLOAD_URI_PREFIX}{name}"
            )
    return problems


def check_schemas(objects: list[Manifest]) -> list[str]:
    """Every object validates (strictly: no unknown fields) against the Kubernetes schemas."""
    problems = []
    for obj in objects:
        if obj.get("apiVersion") == CERT_MANAGER_API:
            problems.extend(_cert_manager_shape(obj))
            continue
        try:
            kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.ValidationError as exc:
            cause = exc.__cause__ or exc.__context__
            where = "/".join(str(p) for p in getattr(cause, "absolute_path", []))
            message = getattr(cause, "message", str(exc).splitlines()[0])
            problems.append(f"{ref(obj)}: schema: {message} (at /{where})")
        except kubernetes_validate.SchemaNotFoundError:
            problems.append(f"{ref(obj)}: schema: unknown kind/apiVersion {obj.get('apiVersion')}")
    return problems


# --- security ------------------------------------------------------------------------------


def check_no_committed_secrets(objects: list[Manifest]) -> list[str]:
    """No Secret is rendered: secrets are created by hand (docs/operations.md)."""
    return [f"{ref(o)}: Secrets must not be committed" for o in objects if o["kind"] == "Secret"]


def check_namespace(objects: list[Manifest]) -> list[str]:
    """One Namespace, enforcing the restricted Pod Security Standard, holds every object."""
    namespaces = [o for o in objects if o["kind"] == "Namespace"]
    if len(namespaces) != 1:
        return [f"expected exactly one Namespace, found {len(namespaces)}"]
    namespace = namespaces[0]["metadata"]["name"]
    problems = []
    labels = namespaces[0]["metadata"].get("labels", {})
    if labels.get("pod-security.kubernetes.io/enforce") != "restricted":
        problems.append(f"Namespace/{namespace}: must enforce the restricted Pod Security Standard")
    for obj in objects:
        if obj["kind"] not in CLUSTER_SCOPED and obj["metadata"].get("namespace") != namespace:
            problems.append(f"{ref(obj)}: not in namespace {namespace}")
    return problems


def _pod_security(owner: Manifest, template: Manifest) -> Iterator[str]:
    spec = template["spec"]
    pod_ctx = spec.get("securityContext", {})
    for flag in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(flag):
            yield f"{ref(owner)}: {flag} is not allowed"
    if any("hostPath" in v for v in spec.get("volumes", [])):
        yield f"{ref(owner)}: hostPath volumes are not allowed"
    if spec.get("automountServiceAccountToken") is not False:
        yield f"{ref(owner)}: set automountServiceAccountToken: false (no workload calls the API)"
    account = spec.get("serviceAccountName")
    if not account or account == "default":
        yield f"{ref(owner)}: needs its own ServiceAccount"
    for container in spec.get("initContainers", []) + spec["containers"]:
        ctx = container.get("securityContext", {})
        where = f"{ref(owner)} container {container['name']}"

        def effective(key: str, _ctx: Mapping[str, Any] = ctx) -> Any:
            return _ctx.get(key, pod_ctx.get(key))

        if effective("runAsNonRoot") is not True:
            yield f"{where}: runAsNonRoot must be true"
        if effective("runAsUser") == 0:
            yield f"{where}: runs as root (runAsUser 0)"
        if (effective("seccompProfile") or {}).get("type") != "RuntimeDefault":
            yield f"{where}: seccompProfile must be RuntimeDefault"
        if ctx.get("allowPrivilegeEscalation") is not False:
            yield f"{where}: allowPrivilegeEscalation must be false"
        if ctx.get("readOnlyRootFilesystem") is not True:
            yield f"{where}: readOnlyRootFilesystem must be true"
        if ctx.get("privileged"):
            yield f"{where}: privileged is not allowed"
        caps = ctx.get("capabilities", {})
        if "ALL" not in caps.get("drop", []) or caps.get("add"):
            yield f"{where}: capabilities must drop ALL and add none"
        resources = container.get("resources", {})
        for section in ("requests", "limits"):
            for resource in ("cpu", "memory"):
                if resource not in resources.get(section, {}):
                    yield f"{where}: resources.{section}.{resource} is missing"


def check_pod_security(objects: list[Manifest]) -> list[str]:
    """Non-root, read-only, no capabilities, seccomp, resources, own account: every pod."""
    problems = [p for owner, template in pods(objects) for p in _pod_security(owner, template)]
    accounts: dict[str, str] = {}
    for owner, template in pods(objects):
        account = template["spec"].get("serviceAccountName")
        if not account:
            continue
        if find(objects, "ServiceAccount", account) is None:
            problems.append(f"{ref(owner)}: ServiceAccount {account} is not rendered")
        if account in accounts:
            problems.append(
                f"{ref(owner)}: shares ServiceAccount {account} with {accounts[account]}"
            )
        accounts[account] = ref(owner)
    return problems


PLACEHOLDER_DIGEST = "sha256:" + "0" * 64
"""The production overlay's digest until the release process sets the real one."""


def check_images(objects: list[Manifest], *, production: bool, release: bool = False) -> list[str]:
    """Images are tagged (never ``latest``); production images come from a registry, pinned
    by digest and pulled ``Always``; a release must not ship the placeholder digest."""
    problems = []
    for owner, template in pods(objects):
        for container in template["spec"]["containers"]:
            image = str(container.get("image", ""))
            name, _, tag = image.rpartition(":") if ":" in image.split("/")[-1] else (image, "", "")
            if production and container.get("imagePullPolicy") != "Always":
                problems.append(f"{ref(owner)}: production pulls must be imagePullPolicy Always")
            if production and "@sha256:" not in image:
                problems.append(f"{ref(owner)}: production image {image!r} must be a digest")
            if release and image.endswith("@" + PLACEHOLDER_DIGEST):
                problems.append(
                    f"{ref(owner)}: image {image!r} still has the placeholder digest: set the "
                    "released one (kustomize edit set image)"
                )
            if "@sha256:" in image:
                continue
            if not tag or tag == "latest":
                problems.append(f"{ref(owner)}: image {image!r} needs a fixed tag")
            elif production and (tag == "dev" or "/" not in name):
                problems.append(f"{ref(owner)}: production image {image!r} must be a released tag")
    return problems


# --- consistency with the code -------------------------------------------------------------


def _config_maps(objects: list[Manifest]) -> dict[str, Mapping[str, str]]:
    return {o["metadata"]["name"]: o.get("data", {}) for o in objects if o["kind"] == "ConfigMap"}


def _container_env(
    owner: Manifest, container: Manifest, config_maps: Mapping[str, Mapping[str, str]]
) -> tuple[dict[str, str], dict[str, Manifest], list[str]]:
    """(plain values, valueFrom entries, problems) of one container's environment."""
    values: dict[str, str] = {}
    problems = []
    for source in container.get("envFrom", []):
        name = source.get("configMapRef", {}).get("name")
        if name is None:
            problems.append(f"{ref(owner)}: envFrom may only name ConfigMaps")
        elif name not in config_maps:
            problems.append(f"{ref(owner)}: ConfigMap {name} is not rendered")
        else:
            values.update(config_maps[name])
    refs: dict[str, Manifest] = {}
    for entry in container.get("env", []):
        if "valueFrom" in entry:
            refs[entry["name"]] = entry["valueFrom"]
            values.pop(entry["name"], None)
        else:
            values[entry["name"]] = str(entry.get("value", ""))
    return values, refs, problems


def secret_files(
    template: Manifest, container: Manifest, values: Mapping[str, str]
) -> tuple[dict[str, tuple[str, str]], list[str]]:
    """Secret settings read from files: {VARIABLE: (Secret name, key)} for each
    ``VARIABLE_FILE`` value that points into a mounted Secret volume, and the problems."""
    volumes = {v["name"]: v for v in template["spec"].get("volumes", [])}
    mounts = [
        (str(m["mountPath"]).rstrip("/"), volumes.get(m["name"], {}))
        for m in container.get("volumeMounts", [])
    ]
    files: dict[str, tuple[str, str]] = {}
    problems = []
    for env, path in values.items():
        if not env.endswith(SECRET_FILE_SUFFIX) or env.removesuffix(SECRET_FILE_SUFFIX) not in (
            SECRETS
        ):
            continue
        name = env.removesuffix(SECRET_FILE_SUFFIX)
        directory, _, filename = path.rpartition("/")
        volume = next((v for mount, v in mounts if mount == directory), None)
        secret = (volume or {}).get("secret")
        if secret is None:
            problems.append(f"{env}={path} is not in a mounted Secret volume")
            continue
        if secret.get("optional"):
            problems.append(f"secret volume of {name} must not be optional")
        items = {i["path"]: i["key"] for i in secret.get("items", [])}
        files[name] = (str(secret.get("secretName")), items.get(filename, filename))
    return files, problems


def _probe_ports(container: Manifest) -> Iterator[tuple[str, Manifest]]:
    for kind in ("readinessProbe", "livenessProbe", "startupProbe"):
        if kind in container:
            yield kind, container[kind]


def _check_workload(
    owner: Manifest, template: Manifest, workload: Workload, objects: list[Manifest]
) -> Iterator[str]:
    config_maps = _config_maps(objects)
    known_env = settings_env_vars()
    containers = template["spec"]["containers"]
    if len(containers) != 1:
        yield f"{ref(owner)}: expected one container, found {len(containers)}"
        return
    container = containers[0]
    if "command" in container:
        yield f"{ref(owner)}: must not override the image's ENTRYPOINT (kishpa)"
    if tuple(container.get("args", [])) != workload.args:
        yield f"{ref(owner)}: args {container.get('args')} != kishpa {' '.join(workload.args)}"
    values, refs, problems = _container_env(owner, container, config_maps)
    yield from problems
    for name in sorted(set(values) | set(refs)):
        if name not in known_env:
            yield f"{ref(owner)}: env {name} is not a setting the services read"
    for name in sorted(set(values) & set(SECRETS)):
        yield f"{ref(owner)}: {name} is a secret and must come from a Secret, not a value"
    for name, source in refs.items():
        # Secrets are files (a mounted Secret, <VARIABLE>_FILE): an environment variable
        # shows in `kubectl describe`, in crash dumps and to every child process.
        if "secretKeyRef" in source:
            yield (
                f"{ref(owner)}: {name} is a secret as an environment variable: mount the Secret "
                f"and set {name}{SECRET_FILE_SUFFIX} instead"
            )
        else:
            yield f"{ref(owner)}: env {name} must be a plain value"
    files, file_problems = secret_files(template, container, values)
    for problem in file_problems:
        yield f"{ref(owner)}: {problem}"
    for name, (secret_name, key) in files.items():
        expected = workload.secret_source(name) if name in SECRETS else None
        if expected is None:
            yield f"{ref(owner)}: {name}{SECRET_FILE_SUFFIX} is not a secret setting"
        elif (secret_name, key) != (expected.name, expected.key):
            yield f"{ref(owner)}: {name} must come from Secret {expected.name} key {expected.key}"
    needed = workload.secrets
    if certificate_identity(values):
        # Mutual TLS: the workload is its certificate; a shared service key would only be
        # something to steal (issue 32).
        needed = needed - {SERVICE_SECRET_ENV}
    if is_production(objects) and values.get(PRODUCTION_ENV) != "1":
        yield f"{ref(owner)}: production runs with {PRODUCTION_ENV}=1 (docs/operations.md)"
    for name in sorted(needed - set(files) - set(refs)):
        yield f"{ref(owner)}: needs {name} (from Secret {workload.secret_source(name).name})"
    for name in sorted((set(files) | set(refs)) - needed):
        yield f"{ref(owner)}: gets {name}, which {workload.name} does not need"

    ports = {p.get("name"): p["containerPort"] for p in container.get("ports", [])}
    for port_name, env, expected_port in (
        ("grpc", GRPC_PORT_ENV, workload.grpc_port),
        ("metrics", METRICS_PORT_ENV, workload.metrics_port),
    ):
        effective = int(values.get(env, expected_port or 0))
        if expected_port is None:
            if port_name in ports:
                yield f"{ref(owner)}: declares a {port_name} port but serves none"
            continue
        if effective != expected_port:
            yield f"{ref(owner)}: {env}={effective}, the documented port is {expected_port}"
        if ports.get(port_name) != effective:
            yield f"{ref(owner)}: container port {port_name} must be {effective}"

    probes = dict(_probe_ports(container))
    if workload.http_port is not None:
        yield from _check_http_workload(owner, container, workload, values, probes)
    if workload.grpc_port is not None:
        grpc_port = int(values.get(GRPC_PORT_ENV, workload.grpc_port))
        # With TLS on the gRPC port, kubelet asks the plaintext health-only port instead.
        grpc_port = int(values.get(HEALTH_PORT_ENV) or grpc_port)
        for kind in ("readinessProbe", "livenessProbe"):
            grpc_probe = probes.get(kind, {}).get("grpc")
            if grpc_probe is None:
                yield f"{ref(owner)}: needs a gRPC {kind}"
                continue
            if grpc_probe.get("port") != grpc_port:
                yield f"{ref(owner)}: {kind} port {grpc_probe.get('port')} != gRPC port {grpc_port}"
        readiness = probes.get("readinessProbe", {}).get("grpc", {})
        if readiness and readiness.get("service") != workload.health_service:
            yield (
                f"{ref(owner)}: readinessProbe asks about {readiness.get('service')!r}, "
                f"the server reports {workload.health_service!r}"
            )
    if workload.grpc_port is not None or workload.http_port is not None:
        grace = float(values.get(SHUTDOWN_GRACE_ENV, default_shutdown_grace_seconds()))
        pre_stop = container.get("lifecycle", {}).get("preStop", {}).get("sleep", {})
        budget = template["spec"].get(
            "terminationGracePeriodSeconds", DEFAULT_TERMINATION_GRACE_SECONDS
        )
        if budget < grace + int(pre_stop.get("seconds", 0)):
            yield (
                f"{ref(owner)}: terminationGracePeriodSeconds {budget} < preStop "
                f"{pre_stop.get('seconds', 0)} + shutdown grace {grace}: calls would be cut"
            )


def _check_http_workload(
    owner: Manifest,
    container: Manifest,
    workload: Workload,
    values: Mapping[str, str],
    probes: Mapping[str, Manifest],
) -> Iterator[str]:
    """An HTTP server's port and its probes (HTTP GET on the paths the code serves)."""
    port = int(values.get(workload.http_port_env, workload.http_port or 0))
    if port != workload.http_port:
        env = workload.http_port_env
        yield f"{ref(owner)}: {env}={port}, the documented port is {workload.http_port}"
    ports = {p.get("name"): p["containerPort"] for p in container.get("ports", [])}
    if ports.get("http") != port:
        yield f"{ref(owner)}: container port http must be {port}"
    for kind, path in zip(("readinessProbe", "livenessProbe"), workload.http_probes, strict=True):
        probe = probes.get(kind, {}).get("httpGet")
        if probe is None:
            yield f"{ref(owner)}: needs an HTTP {kind}"
            continue
        if probe.get("path") != path:
            yield f"{ref(owner)}: {kind} path {probe.get('path')!r}, the edge serves {path!r}"
        if probe.get("port") not in ("http", port):
            yield f"{ref(owner)}: {kind} port {probe.get('port')} != HTTP port {port}"


def workload_environment(objects: list[Manifest], name: str) -> tuple[dict[str, str], set[str]]:
    """What the rendered pod of workload ``name`` sees: plain values, and the secret variables.

    Plain values merge its ConfigMaps with its ``env`` entries the way the kubelet does
    (``env`` wins); secret variables are only named, since their values live in the cluster.
    """
    for owner, template in pods(objects):
        if app_name(template) == name:
            container = template["spec"]["containers"][0]
            values, refs, problems = _container_env(owner, container, _config_maps(objects))
            files, file_problems = secret_files(template, container, values)
            if problems or file_problems:
                raise ValueError("; ".join(problems + file_problems))
            plain = {
                k: v for k, v in values.items() if k.removesuffix(SECRET_FILE_SUFFIX) not in files
            }
            return plain, set(refs) | set(files)
    raise KeyError(f"no workload named {name} in the render")


PRODUCTION_ENV = "KISHPA_PRODUCTION"


def certificate_identity(values: Mapping[str, str]) -> bool:
    """Whether a container's settings make it known by its certificate (mutual TLS)."""
    files = ("KISHPA_TLS_CERT_FILE", "KISHPA_TLS_KEY_FILE", "KISHPA_TLS_CA_FILE")
    client_auth = values.get("KISHPA_TLS_CLIENT_AUTH", "1").lower() not in {"0", "false"}
    return all(values.get(f) for f in files) and client_auth


def check_workloads(objects: list[Manifest]) -> list[str]:
    """Each process runs once, with the right command, ports, probes, settings and secrets."""
    problems = []
    seen: dict[str, Manifest] = {}
    for owner, template in pods(objects):
        name = app_name(template)
        workload = WORKLOADS.get(name)
        if workload is None:
            continue
        if name in seen:
            problems.append(f"{ref(owner)}: {name} is run by {ref(seen[name])} too")
        seen[name] = owner
        problems.extend(_check_workload(owner, template, workload, objects))
        if owner["kind"] != workload.kind:
            problems.append(f"{ref(owner)}: {name} must be a {workload.kind}")
    problems.extend(f"{name}: no workload runs it" for name in sorted(set(WORKLOADS) - set(seen)))
    beat = seen.get("beat")
    if beat is not None and (
        beat["spec"].get("replicas") != 1
        or beat["spec"].get("strategy", {}).get("type") != "Recreate"
    ):
        problems.append(f"{ref(beat)}: beat must be a singleton (replicas 1, strategy Recreate)")
    return problems


def check_services_and_scaling(objects: list[Manifest]) -> list[str]:
    """Services reach their pods' ports; gRPC services have an HPA and a PDB; HPA owns replicas."""
    problems = []
    templates = [(owner, t) for owner, t in pods(objects)]
    for service in (o for o in objects if o["kind"] == "Service"):
        selector = service["spec"].get("selector")
        if not selector:
            continue  # an external datastore: its EndpointSlices say where it is
        matched = [t for _, t in templates if _labels_match(selector, t["metadata"]["labels"])]
        if not matched:
            problems.append(f"{ref(service)}: selects no pods")
            continue
        container_ports = {
            p.get("name") or p["containerPort"]: p["containerPort"]
            for t in matched
            for c in t["spec"]["containers"]
            for p in c.get("ports", [])
        }
        for port in service["spec"]["ports"]:
            target = port.get("targetPort", port["port"])
            if target not in container_ports and target not in container_ports.values():
                problems.append(f"{ref(service)}: targetPort {target} is no container port")
    autoscalers = [o for o in objects if o["kind"] == "HorizontalPodAutoscaler"]
    budgets = [o for o in objects if o["kind"] == "PodDisruptionBudget"]
    for hpa in autoscalers:
        target = hpa["spec"]["scaleTargetRef"]
        if find(objects, target["kind"], target["name"]) is None:
            problems.append(f"{ref(hpa)}: scales {target['kind']}/{target['name']}, not rendered")
        if hpa["spec"].get("minReplicas", 1) > hpa["spec"]["maxReplicas"]:
            problems.append(f"{ref(hpa)}: minReplicas > maxReplicas")
    for name, workload in WORKLOADS.items():
        served = workload.grpc_port if workload.grpc_port is not None else workload.http_port
        if served is None:
            continue
        deployment = find(objects, "Deployment", name)
        if deployment is None:
            continue
        grpc_service = find(objects, "Service", name)
        if grpc_service is None:
            problems.append(f"{ref(deployment)}: no Service named {name}")
        elif not any(p["port"] == served for p in grpc_service["spec"]["ports"]):
            problems.append(f"Service/{name}: does not expose port {served}")
        if not any(h["spec"]["scaleTargetRef"]["name"] == name for h in autoscalers):
            problems.append(f"{ref(deployment)}: no HorizontalPodAutoscaler")
        elif "replicas" in deployment["spec"]:
            problems.append(f"{ref(deployment)}: replicas set, but its HPA owns the count")
        labels = deployment["spec"]["template"]["metadata"]["labels"]
        if not any(
            _labels_match(b["spec"]["selector"].get("matchLabels", {}), labels) for b in budgets
        ):
            problems.append(f"{ref(deployment)}: no PodDisruptionBudget")
    return problems


def check_config(objects: list[Manifest]) -> list[str]:
    """ConfigMaps hold only known, non-secret settings whose addresses name rendered Services."""
    problems = []
    known_env = settings_env_vars()
    services = {o["metadata"]["name"]: o for o in objects if o["kind"] == "Service"}

    def service_port(host: str, port: int, what: str) -> Iterator[str]:
        service = services.get(host.split(".")[0])
        if service is None:
            yield f"{what}: no Service named {host}"
        elif not any(p["port"] == port for p in service["spec"]["ports"]):
            yield f"{what}: Service {host} has no port {port}"

    for name, data in _config_maps(objects).items():
        for key, value in data.items():
            what = f"ConfigMap/{name} {key}"
            if key not in known_env:
                problems.append(f"{what}: not a setting the services read")
            if key in SECRETS:
                problems.append(f"{what}: a secret must live in a Secret")
            if key in ADDRESS_ENVS:
                host, _, port = value.rpartition(":")
                expected = WORKLOADS[ADDRESS_ENVS[key]].grpc_port
                if not port.isdigit() or int(port) != expected:
                    problems.append(f"{what}: {value} must use port {expected}")
                else:
                    problems.extend(service_port(host, int(port), what))
            if key in ("REDIS_URL", "KISHPA_BROKER_URL") and value.startswith("redis"):
                url = urlsplit(value)
                problems.extend(service_port(url.hostname or "", url.port or 6379, what))
    return problems


def check_public_route(objects: list[Manifest]) -> list[str]:
    """Browsers reach the edge: an Ingress (or Gateway API HTTPRoute) sends ``/`` to its
    Service's HTTP port."""
    edge = WORKLOADS["edge"]
    service = find(objects, "Service", edge.name)
    if service is None:
        return []  # check_services_and_scaling reports the missing Service
    ports = {p.get("name"): p["port"] for p in service["spec"]["ports"]}
    for obj in objects:
        if obj["kind"] == "Ingress":
            for rule in obj["spec"].get("rules", []):
                for path in rule.get("http", {}).get("paths", []):
                    backend = path["backend"].get("service", {})
                    port = backend.get("port", {})
                    number = port.get("number", ports.get(port.get("name")))
                    if (
                        backend.get("name") == edge.name
                        and number == edge.http_port
                        and path.get("path") == "/"
                    ):
                        return []
        if obj["kind"] == "HTTPRoute":
            for rule in obj["spec"].get("rules", []):
                for backend in rule.get("backendRefs", []):
                    if backend.get("name") == edge.name and backend.get("port") == edge.http_port:
                        return []
    return [f"Service/{edge.name}: no Ingress or HTTPRoute sends / to port {edge.http_port}"]


ENVOY_CONFIG = envoy_generate.ENVOY_CONFIG


def check_envoy_routes(config: Mapping[str, Any]) -> list[str]:
    """Envoy's gRPC-Web routes are exactly the edge's allowlist (the RPCs browsers may reach,
    :func:`services.common.access.browser_rpcs`), each to the right service."""
    problems = []
    resources = config["static_resources"]
    clusters = {}
    for cluster in resources["clusters"]:
        endpoint = cluster["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["endpoint"]
        address = endpoint["address"]["socket_address"]
        clusters[cluster["name"]] = (address["address"], address["port_value"])
    manager = resources["listeners"][0]["filter_chains"][0]["filters"][0]["typed_config"]
    filters = [f["name"] for f in manager["http_filters"]]
    if "envoy.filters.http.grpc_web" not in filters:
        problems.append("envoy: no envoy.filters.http.grpc_web filter")
    routed: dict[str, str] = {}
    for host in manager["route_config"]["virtual_hosts"]:
        for route in host["routes"]:
            match = route["match"]
            if "route" not in route:
                continue
            if "path" not in match:
                problems.append(f"envoy: route {match} forwards more than one exact RPC path")
                continue
            routed[match["path"]] = route["route"]["cluster"]
    expected = browser_rpcs()
    for path in sorted(set(routed) - set(expected)):
        problems.append(f"envoy: routes {path}, which the edge does not expose")
    for path in sorted(set(expected) - set(routed)):
        problems.append(f"envoy: does not route {path}")
    for path in sorted(set(routed) & set(expected)):
        upstream = expected[path]
        target = clusters.get(routed[path])
        want = (upstream, WORKLOADS[upstream].grpc_port)
        if target != want:
            problems.append(f"envoy: {path} goes to {target}, not {want[0]}:{want[1]}")
    return problems


ENVOY_SDS_DIR = ENVOY_CONFIG.parent / "sds"
ENVOY_SDS_MOUNT = "/etc/envoy/sds"


def _sds_secrets(sds_dir: Path) -> dict[tuple[str, str], Mapping[str, Any]]:
    """The SDS secrets shipped in ``sds_dir``, by (path as Envoy sees it, secret name)."""
    secrets = {}
    for path in sorted(sds_dir.glob("*.yaml")):
        for resource in yaml.safe_load(path.read_text()).get("resources", []):
            secrets[(f"{ENVOY_SDS_MOUNT}/{path.name}", resource.get("name", ""))] = resource
    return secrets


def _watched_sds(
    where: str, ref: Mapping[str, Any], kind: str, secrets: Mapping[tuple[str, str], Any]
) -> list[str]:
    """One SDS reference: a watched file whose secret watches its certificate directory."""
    source = ref.get("sds_config", {}).get("path_config_source", {})
    key = (source.get("path", ""), ref.get("name", ""))
    if key not in secrets:
        return [f"envoy: {where} {kind} {key} is not a shipped file-based SDS secret"]
    problems = []
    if not source.get("watched_directory", {}).get("path"):
        problems.append(f"envoy: {where} {kind} SDS file {key[0]} is not watched")
    body = secrets[key].get(kind, {})
    watched = body.get("watched_directory", {}).get("path")
    files = [v["filename"] for v in body.values() if isinstance(v, dict) and "filename" in v]
    if not files or any(str(Path(f).parent) != watched for f in files):
        problems.append(
            f"envoy: {where} {kind} secret {key[1]} does not watch its files' directory"
        )
    return problems


def check_envoy_tls(config: Mapping[str, Any], sds_dir: Path = ENVOY_SDS_DIR) -> list[str]:
    """Every Envoy TLS context takes its certificate and CA by watched file-based SDS, so a
    cert-manager renewal is picked up without a restart (no inline files, read at start only)."""
    secrets = _sds_secrets(sds_dir)
    problems = []
    for cluster in config["static_resources"]["clusters"]:
        where = f"cluster {cluster['name']}"
        socket = cluster.get("transport_socket")
        if socket is None:
            problems.append(f"envoy: {where} has no TLS transport_socket")
            continue
        context = socket["typed_config"].get("common_tls_context", {})
        if "tls_certificates" in context or "validation_context" in context:
            problems.append(f"envoy: {where} reads inline certificate files only at start")
        refs = context.get("tls_certificate_sds_secret_configs", [])
        if not refs:
            problems.append(f"envoy: {where} has no client certificate by SDS")
        for ref in refs:
            problems += _watched_sds(where, ref, "tls_certificate", secrets)
        combined = context.get("combined_validation_context", {})
        ca = combined.get("validation_context_sds_secret_config")
        if ca is None:
            problems.append(f"envoy: {where} has no CA by SDS")
        else:
            problems += _watched_sds(where, ca, "validation_context", secrets)
        if not combined.get("default_validation_context", {}).get("match_typed_subject_alt_names"):
            problems.append(f"envoy: {where} does not check the upstream's identity (SAN)")
    return problems


# --- network -------------------------------------------------------------------------------


def _destinations(objects: list[Manifest], namespace: str, name: str) -> list[Endpoint]:
    for _, template in pods(objects):
        if app_name(template) == name:
            return [Endpoint(name, namespace, template["metadata"]["labels"])]
    service = find(objects, "Service", name)
    if service is None or service["spec"].get("selector"):
        return []
    return [
        Endpoint(name, None, {}, ip=address)
        for o in objects
        if o["kind"] == "EndpointSlice"
        and o["metadata"].get("labels", {}).get("kubernetes.io/service-name") == name
        for e in o.get("endpoints", [])
        for address in e["addresses"]
    ]


def check_network(objects: list[Manifest]) -> list[str]:
    """Deny-all by default, and exactly the intended clients reach each datastore and port."""
    namespace = next((o["metadata"]["name"] for o in objects if o["kind"] == "Namespace"), "")
    try:
        policies = PolicySet(namespace, objects)
    except UnsupportedPolicy as exc:
        return [f"NetworkPolicy: {exc}"]
    problems = [] if policies.denies_by_default() else ["no default deny-all NetworkPolicy"]
    sources = [Endpoint(app_name(t), namespace, t["metadata"]["labels"]) for _, t in pods(objects)]
    sources.append(Endpoint(EXTERNAL, None))
    dns = Endpoint("kube-dns", "kube-system", {"k8s-app": "kube-dns"})
    try:
        for source in sources[:-1]:
            if not policies.allows(source, dns, 53, "UDP"):
                problems.append(f"{source.name}: cannot resolve names (DNS egress blocked)")
        for (name, port), expected in sorted(REACHABILITY.items()):
            destinations = _destinations(objects, namespace, name)
            if not destinations:
                problems.append(f"{name}: no pod or external endpoint to check reachability of")
                continue
            candidates = [s for s in sources if s.name != name]
            if destinations[0].namespace is None:
                candidates = [s for s in candidates if s.namespace is not None]
            allowed = {
                s.name for s in candidates if all(policies.allows(s, d, port) for d in destinations)
            }
            for extra in sorted(allowed - expected):
                problems.append(f"{name}:{port} is reachable from {extra}, which must not reach it")
            for missing in sorted(expected - allowed):
                problems.append(f"{name}:{port} is not reachable from {missing}, which needs it")
    except UnsupportedPolicy as exc:
        problems.append(f"NetworkPolicy: {exc}")
    return problems


# --- all of them ---------------------------------------------------------------------------


def is_production(objects: list[Manifest]) -> bool:
    """Whether the overlay's Namespace is labelled ``kishpa.dev/environment: production``."""
    return any(
        o["kind"] == "Namespace"
        and o["metadata"].get("labels", {}).get("kishpa.dev/environment") == "production"
        for o in objects
    )


def check_objects(objects: list[Manifest], *, release: bool = False) -> list[str]:
    """Every check over one rendered overlay (``release``: also no placeholder digest).

    The later checks read fields the schema guarantees, so a schema failure stops there.
    """
    problems = check_schemas(objects) + check_no_committed_secrets(objects)
    if problems:
        return problems
    checks: list[Callable[[list[Manifest]], list[str]]] = [
        check_namespace,
        check_pod_security,
        check_workloads,
        check_services_and_scaling,
        check_config,
        check_public_route,
        check_network,
        check_checkov_skips,
        check_certificates,
    ]
    problems = [p for check in checks for p in check(objects)]
    return problems + check_images(objects, production=is_production(objects), release=release)


HEALTH_PORT_ENV = "KISHPA_HEALTH_PORT"
CHECKOV_SKIP_PREFIX = "checkov.io/skip"
MIN_SKIP_REASON = 30


def check_checkov_skips(objects: list[Manifest]) -> list[str]:
    """Every checkov skip annotation names its check and says why it does not apply."""
    problems = []
    for obj in objects:
        for key, value in (obj.get("metadata", {}).get("annotations") or {}).items():
            if not key.startswith(CHECKOV_SKIP_PREFIX):
                continue
            check, _, reason = str(value).partition("=")
            if not check.startswith("CKV_") or len(reason.strip()) < MIN_SKIP_REASON:
                problems.append(
                    f"{ref(obj)}: {key} must be 'CKV_<id>=<why it does not apply>', not {value!r}"
                )
    return problems


def main(argv: list[str] | None = None) -> int:
    """Render and check the shipped overlays (or the given directories); print the problems."""
    parser = argparse.ArgumentParser(prog="python -m deploy.checks", description=__doc__)
    parser.add_argument("directories", nargs="*", type=Path, help="kustomize directories")
    parser.add_argument(
        "--release",
        action="store_true",
        help="the release step: production images must carry their real digest",
    )
    args = parser.parse_args(argv)
    directories: list[Path] = args.directories or [overlay_dir(o) for o in OVERLAYS]
    failed = False
    for directory in directories:
        try:
            objects = render(directory)
        except RenderError as exc:
            print(exc, file=sys.stderr)
            failed = True
            continue
        problems = check_objects(objects, release=args.release)
        print(f"{directory}: {len(objects)} objects, {len(problems)} problems")
        for problem in problems:
            print(f"  {problem}")
        failed = failed or bool(problems)
    envoy_text = ENVOY_CONFIG.read_text()
    envoy_config = yaml.safe_load(envoy_text)
    envoy = check_envoy_routes(envoy_config) + check_envoy_tls(envoy_config)
    if envoy_generate.render(envoy_text) != envoy_text:
        envoy.append("envoy: routes are stale; run python -m deploy.envoy.generate")
    print(f"{ENVOY_CONFIG}: {len(envoy)} problems")
    for problem in envoy:
        print(f"  {problem}")
    return 1 if failed or envoy else 0


if __name__ == "__main__":
    sys.exit(main())
