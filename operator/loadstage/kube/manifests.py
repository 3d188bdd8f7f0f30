"""Child objects of a LoadExperiment, as plain dicts built by pure functions.

Container args come from loadstage.launch.argv, the same functions the local engine uses.
Every pod runs as non-root with no privilege escalation, no capabilities, the runtime's
default seccomp profile and a read-only root filesystem (a scratch /tmp is mounted). (It is over 300 lines because
every child object is here, sharing the names, labels, pod security and resources of one experiment.)"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from loadstage.api.names import (
    ANNOTATION_VARIANT,
    ARTIFACT_KEY,
    LABEL_COMPONENT,
    LABEL_EXPERIMENT,
    LABEL_ROLE,
    LABEL_RUN,
)
from loadstage.api.quantities import cpu_cores, memory_bytes
from loadstage.api.types import DEFAULT_POD_RESOURCES, Experiment, KeyRef, PodResources, Probe, Resources, Variant
from loadstage.engine.steps import Step, series_labels
from loadstage.launch import argv

TERMINATION_LOG = "/dev/termination-log"
LOCUSTFILE_DIR = "/etc/loadstage/locustfile"
CUSTOM_LOCUSTFILE = f"{LOCUSTFILE_DIR}/locustfile.py"
APP_UID = 10001
PROXY_CONTAINER = "proxy"
REDIS_UID = 999
REDIS_AUTH_KEY = "password"
STAGE_DEADLINE_GRACE_SECONDS = 300


@dataclass(frozen=True)
class Defaults:
    """Defaults from the operator's installation; an experiment's spec may override them."""
    runner: str      # images
    injector: str
    redis: str
    resources: PodResources = DEFAULT_POD_RESOURCES
    operator_peer: dict[str, Any] | None = None   # the operator's pods, as a NetworkPolicy peer (the chart's)
    monitoring_peer: dict[str, Any] | None = None   # who may scrape the masters' live series (the chart's)
    redis_key: bytes | None = field(default=None, repr=False)   # derives each deployed Redis's password


def pod_resources(experiment: Experiment, variant: Variant, defaults: PodResources) -> PodResources:
    """What each kind of pod gets: the spec's resources over the operator's defaults."""
    spec = experiment.spec
    return PodResources(target=variant.resources.over(defaults.target),
                        redis=spec.redis.resources.over(defaults.redis),
                        locust_master=spec.injectors.master_resources.over(defaults.locust_master),
                        locust_worker=spec.injectors.resources.over(defaults.locust_worker))


def resource_problems(experiment: Experiment, defaults: PodResources) -> list[tuple[str, str]]:
    """A request of the spec above a limit of the operator's defaults (or the reverse), each naming the field:
    a pod spec the API server would refuse."""
    amount = {"cpu": cpu_cores, "memory": memory_bytes}
    fields = {"target": "spec.target.resources", "redis": "spec.redis.resources",
              "locust_master": "spec.injectors.masterResources", "locust_worker": "spec.injectors.resources"}
    problems = []
    for variant in experiment.variants():
        merged = pod_resources(experiment, variant, defaults)
        for kind, where in fields.items():
            resources: Resources = getattr(merged, kind)
            for name, request in resources.requests.items().items():
                limit = resources.limits.items().get(name)
                if limit is not None and amount[name](request) > amount[name](limit):
                    problems.append((f"{where}.requests.{name}",
                                     f"{request} is above the limit {limit} (a limit from the operator's "
                                     f"defaults, the chart's experimentResources); set {where}.limits.{name} too"))
    return list(dict.fromkeys(problems))


def runner_name(experiment: Experiment) -> str:
    return f"{experiment.name}-runner"


def runner_pods_name(experiment: Experiment) -> str:
    """The headless Service: its DNS name resolves to every ready runner pod."""
    return f"{experiment.name}-runner-pods"


def redis_name(experiment: Experiment) -> str:
    return f"{experiment.name}-redis"


def redis_auth_name(experiment: Experiment, owner_uid: str) -> str:
    """Named by the experiment's uid: a same-named earlier experiment's Secret may not be collected yet, and the
    operator may create Secrets but not read them."""
    return f"{experiment.name}-redis-auth-{owner_uid[:8]}"


def master_name(experiment: Experiment, step: Step) -> str:
    return f"{experiment.name}-{step.run_id}-master"


def workers_name(experiment: Experiment, step: Step) -> str:
    return f"{experiment.name}-{step.run_id}-workers"


def redis_url(experiment: Experiment) -> str | None:
    """The Redis the target uses: the deployed one's Service, an external URL, or None (no Redis)."""
    spec = experiment.spec.redis
    return f"redis://{redis_name(experiment)}:{argv.REDIS_PORT}/0" if spec.deployed else spec.url


def probe(spec: Probe, port: int | str = "http") -> dict[str, Any]:
    """A probe of the spec as a container takes it; a handler without a port probes `port`: the server's
    named port, or its number from a container that does not declare it (the server behind a proxy)."""
    handler: dict[str, Any]
    if spec.http_get is not None:
        handler = {"httpGet": {"path": spec.http_get.path, "port": spec.http_get.port or port}}
    elif spec.tcp_socket is not None:
        handler = {"tcpSocket": {"port": spec.tcp_socket.port or port}}
    else:
        assert spec.exec is not None, "a probe has one of httpGet, tcpSocket or exec"
        handler = {"exec": {"command": list(spec.exec.command)}}
    timing = {"initialDelaySeconds": spec.initial_delay_seconds, "periodSeconds": spec.period_seconds,
              "timeoutSeconds": spec.timeout_seconds, "successThreshold": spec.success_threshold,
              "failureThreshold": spec.failure_threshold}
    return {**handler, **{k: v for k, v in timing.items() if v is not None}}


def labels(experiment: Experiment, component: str, **extra: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": "loadstage", "app.kubernetes.io/instance": experiment.name,
            "app.kubernetes.io/managed-by": "loadstage", LABEL_COMPONENT: component, LABEL_ROLE: component,
            LABEL_EXPERIMENT: experiment.name, **extra}


def _selector(experiment: Experiment, component: str, **extra: str) -> dict[str, str]:
    """Only loadstage's own keys: an InPlace target's pods carry these beside the app's labels."""
    return {LABEL_EXPERIMENT: experiment.name, LABEL_ROLE: component, **extra}


def runner_selector(experiment: Experiment) -> dict[str, str]:
    return _selector(experiment, "runner")


def _meta(name: str, lbls: dict[str, str]) -> dict[str, Any]:
    return {"name": name, "labels": lbls}


def _pod_spec(containers: list[dict], uid: int, *, restart_policy: str | None = None,
              volumes: list[dict] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "securityContext": {"runAsNonRoot": True, "runAsUser": uid, "runAsGroup": uid, "fsGroup": uid,
                            "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": containers,
        "volumes": [{"name": "tmp", "emptyDir": {}}, *(volumes or [])],
    }
    if restart_policy:
        spec["restartPolicy"] = restart_policy
    return spec


def redis_password_ref(experiment: Experiment, defaults: Defaults, owner_uid: str | None) -> KeyRef | None:
    """Where the Redis password is: the spec's Secret, else, for a deployed Redis, the one the operator
    generates (where it has a key to derive it from)."""
    redis = experiment.spec.redis
    if redis.password_secret is not None:
        return redis.password_secret
    if redis.deployed and defaults.redis_key and owner_uid:
        return KeyRef(redis_auth_name(experiment, owner_uid), REDIS_AUTH_KEY)
    return None


def redis_auth_secret(experiment: Experiment, owner_uid: str, password: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret",
            "metadata": _meta(redis_auth_name(experiment, owner_uid), labels(experiment, "redis-auth")),
            "type": "Opaque", "stringData": {REDIS_AUTH_KEY: password}}


def _password_env(secret: KeyRef | None) -> list[dict]:
    if secret is None:
        return []
    return [{"name": argv.REDIS_PASSWORD_ENV,
             "valueFrom": {"secretKeyRef": {"name": secret.name, "key": secret.key}}}]


def _container(name: str, image: str, args: list[str], *, env: dict[str, str] | None = None,
               secret_env: list[dict] | None = None, ports: list[dict] | None = None,
               mounts: list[dict] | None = None, resources: Resources, **extra) -> dict[str, Any]:
    container = {
        "name": name, "image": image, "args": args, "resources": resources.manifest(),
        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                            "capabilities": {"drop": ["ALL"]}},
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}, *(mounts or [])],
        **extra,
    }
    if env or secret_env:
        container["env"] = [{"name": k, "value": v} for k, v in (env or {}).items()] + (secret_env or [])
    if ports:
        container["ports"] = ports
    return container


def _service(name: str, lbls: dict[str, str], selector: dict[str, str], port: int, port_name: str,
             target_port: int | str | None = None) -> dict:
    return {"apiVersion": "v1", "kind": "Service", "metadata": _meta(name, lbls),
            "spec": {"type": "ClusterIP", "selector": selector,
                     "ports": [{"name": port_name, "port": port, "targetPort": target_port or port_name,
                                "protocol": "TCP"}]}}


def _deployment(name: str, lbls: dict[str, str], selector: dict[str, str], replicas: int,
                pod_spec: dict, annotations: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": _meta(name, lbls),
            "spec": {"replicas": replicas, "selector": {"matchLabels": selector},
                     "template": {"metadata": {"labels": lbls, "annotations": annotations}, "spec": pod_spec}}}


def redis_deployment(experiment: Experiment, variant: Variant, defaults: Defaults,
                     owner_uid: str | None = None) -> dict[str, Any]:
    """`owner_uid`: the experiment's, which names its generated password's Secret."""
    image = experiment.spec.redis.image or defaults.redis
    port = {"name": "redis", "containerPort": argv.REDIS_PORT, "protocol": "TCP"}
    password = redis_password_ref(experiment, defaults, owner_uid)
    # No probe: each probe would be a Redis client and count as load. The runners' readiness
    # (/readyz pings Redis) is what tells that Redis serves.
    container = _container("redis", image, argv.redis_command(require_password=password is not None),
                           secret_env=_password_env(password), ports=[port],
                           mounts=[{"name": "data", "mountPath": "/data"}],
                           resources=pod_resources(experiment, variant, defaults.resources).redis)
    pod = _pod_spec([container], REDIS_UID, volumes=[{"name": "data", "emptyDir": {}}])
    return _deployment(redis_name(experiment), labels(experiment, "redis"), _selector(experiment, "redis"), 1,
                       pod, {ANNOTATION_VARIANT: str(variant.index + 1)})


def redis_service(experiment: Experiment) -> dict[str, Any]:
    return _service(redis_name(experiment), labels(experiment, "redis"), _selector(experiment, "redis"),
                    argv.REDIS_PORT, "redis")


SOCKET_DIR = "/run/loadstage"   # the Unix socket between the proxy and the server, in a volume they share


def runner_deployment(experiment: Experiment, variant: Variant, defaults: Defaults,
                      owner_uid: str | None = None) -> dict[str, Any]:
    """The target: the server, and beside it the variant's front proxy, if any, which then takes the Service's
    port and the readiness probe (through it, to the server); the liveness probe stays on the server."""
    target = experiment.spec.target
    proxy = target.proxy_of(variant)
    env = argv.runner_env(experiment, variant, redis_url=redis_url(experiment), metrics_dir="/tmp/metrics")
    bind = argv.app_bind(variant, socket_dir=SOCKET_DIR) if proxy else f"0.0.0.0:{argv.RUNNER_PORT}"
    port = {"name": "http", "containerPort": argv.RUNNER_PORT, "protocol": "TCP"}
    sockets = [{"name": "sockets", "mountPath": SOCKET_DIR}] if variant.socket == "unix" else []
    readiness: dict[str, Any] = {"readinessProbe": probe(target.readiness())}
    liveness = target.liveness()
    container = _container(
        "runner", target.image or defaults.runner, argv.runner_command(experiment, variant, binds=[bind]), env=env,
        secret_env=_password_env(redis_password_ref(experiment, defaults, owner_uid)),
        ports=None if proxy else [port], mounts=sockets,
        resources=pod_resources(experiment, variant, defaults.resources).target,
        **({} if proxy else readiness),
        **({"livenessProbe": probe(liveness, argv.RUNNER_PORT if proxy else "http")} if liveness else {}))
    containers = [container]
    if proxy is not None:
        containers.append(_container(
            PROXY_CONTAINER, defaults.runner,
            argv.proxy_command(variant, proxy, listen=[f"0.0.0.0:{argv.RUNNER_PORT}"], upstream=bind),
            ports=[port], mounts=sockets, resources=proxy.resources.over(defaults.resources.target), **readiness))
    pod = _pod_spec(containers, APP_UID, volumes=[{"name": "sockets", "emptyDir": {}}] if sockets else None)
    # the pause container is PID 1, so a server without a SIGTERM handler (waitress, cheroot) still stops on it
    pod["shareProcessNamespace"] = True
    return _deployment(runner_name(experiment), labels(experiment, "runner"), runner_selector(experiment),
                       variant.pods, pod,
                       {ANNOTATION_VARIANT: str(variant.index + 1)})


def runner_service(experiment: Experiment, server_port: int | None = None) -> dict[str, Any]:
    """`server_port`: where an existing Deployment's server listens (loadstage's own runner: its named port)."""
    return _service(runner_name(experiment), labels(experiment, "runner"), _selector(experiment, "runner"),
                    argv.RUNNER_PORT, "http", server_port)


def runner_pods_service(experiment: Experiment, server_port: int | None = None) -> dict[str, Any]:
    """Headless: the Locust master reads every runner pod's /metrics through it."""
    service = _service(runner_pods_name(experiment), labels(experiment, "runner"), _selector(experiment, "runner"),
                       argv.RUNNER_PORT, "http", server_port)
    service["spec"]["clusterIP"] = "None"
    return service


def runner_metrics_urls(experiment: Experiment, pod_ips: list[str], server_port: int = argv.RUNNER_PORT) -> list[str]:
    """By pod IP, not by the headless Service: DNS caches (CoreDNS: 30 s) still name the previous
    variant's pods for a while."""
    path = experiment.spec.target.metrics.path
    return [f"http://{f'[{ip}]' if ':' in ip else ip}:{server_port}{path}" for ip in pod_ips]


def _locustfile_volume(experiment: Experiment) -> tuple[list[dict], list[dict], str | None]:
    lf = experiment.spec.injectors.locustfile
    if lf is None or lf.config_map is None:
        return [], [], None
    volume = {"name": "locustfile", "configMap": {
        "name": lf.config_map.name, "items": [{"key": lf.config_map.key, "path": "locustfile.py"}]}}
    return [volume], [{"name": "locustfile", "mountPath": LOCUSTFILE_DIR, "readOnly": True}], CUSTOM_LOCUSTFILE


def _job(name: str, lbls: dict[str, str], pod: dict, *, count: int, deadline: int,
         tolerated_failures: int = 0) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": _meta(name, lbls),
            "spec": {"parallelism": count, "completions": count, "backoffLimit": tolerated_failures,
                     "activeDeadlineSeconds": deadline,
                     "template": {"metadata": {"labels": lbls}, "spec": pod}}}


def _ingress_policy(experiment: Experiment, component: str, peers: list[dict[str, Any]], port: int | str,
                    *also: tuple[list[dict[str, Any]], int]) -> dict[str, Any]:
    """Ingress to the component's pods from `peers` on `port`, and from each of `also`'s peers on its port."""
    rules = [{"from": who, "ports": [{"protocol": "TCP", "port": at}]} for who, at in ((peers, port), *also)]
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": _meta(f"{experiment.name}-{component}", labels(experiment, "network-policy")),
            "spec": {"podSelector": {"matchLabels": _selector(experiment, component)}, "policyTypes": ["Ingress"],
                     "ingress": rules}}


def network_policies(experiment: Experiment, defaults: Defaults, server_port: int) -> list[dict[str, Any]]:
    """Who may reach each pod the experiment deploys: its Redis only from the target and the operator; its
    Locust masters only from its injectors (and their live series only from the monitoring peer); the target
    only from its injectors, the operator and spec.target.allowFrom. An existing Deployment held InPlace
    serves more than the experiment: none for it."""
    if not experiment.spec.network_policies:
        return []

    def pods(component: str) -> dict[str, Any]:
        return {"podSelector": {"matchLabels": _selector(experiment, component)}}
    operator = [defaults.operator_peer] if defaults.operator_peer else []
    scrapers = [([defaults.monitoring_peer], argv.MASTER_METRICS_PORT)] if defaults.monitoring_peer else []
    policies = [_ingress_policy(experiment, "locust-master", [pods("locust-worker")], argv.LOCUST_MASTER_PORT,
                                *scrapers)]
    if experiment.spec.redis.deployed:
        policies.append(_ingress_policy(experiment, "redis", [pods("runner"), *operator], argv.REDIS_PORT))
    target = experiment.spec.target
    if target.deployment is None or target.deployment.mode == "Copy":
        policies.append(_ingress_policy(
            experiment, "runner", [pods("locust-master"), pods("locust-worker"), *operator,
                                   *(peer.manifest() for peer in target.allow_from)], server_port))
    return policies


def stage_budget(experiment: Experiment, step: Step) -> dict[str, Any]:
    """A PodDisruptionBudget that lets no pod of the running stage be evicted: `kubectl drain` waits for the
    stage to end instead of cutting it short (preemption and a lost node still can; the stage then runs again)."""
    name = f"{experiment.name}-{step.run_id}"
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": _meta(name, labels(experiment, "stage", **{LABEL_RUN: step.run_id})),
            "spec": {"maxUnavailable": 0,
                     "selector": {"matchLabels": {LABEL_EXPERIMENT: experiment.name, LABEL_RUN: step.run_id}}}}


def workers_wait(experiment: Experiment) -> int:
    """How long a master waits for its workers: they may wait for a node, then pull their image."""
    return int(experiment.spec.scheduling_timeout) + argv.EXPECT_WORKERS_MAX_WAIT_SECONDS


def _stage_deadline(experiment: Experiment, step: Step) -> int:
    return int(step.stage.duration) + workers_wait(experiment) + STAGE_DEADLINE_GRACE_SECONDS


def master_job(experiment: Experiment, step: Step, defaults: Defaults, runner_ips: list[str],
               server_port: int = argv.RUNNER_PORT) -> dict[str, Any]:
    volumes, mounts, custom = _locustfile_volume(experiment)
    args = argv.locust_master_command(
        experiment, step.stage, host=f"http://{runner_name(experiment)}:{argv.RUNNER_PORT}",
        summary_file=TERMINATION_LOG, artifact_file="-",
        target_metrics=runner_metrics_urls(experiment, runner_ips, server_port),
        custom_locustfile=custom, workers_wait=workers_wait(experiment),
        metrics_labels=series_labels(experiment, step), metrics_address="0.0.0.0", decide=not step.warmup)
    container = _container(
        "locust-master", experiment.spec.injectors.image or defaults.injector, args, mounts=mounts,
        ports=[{"name": "master", "containerPort": argv.LOCUST_MASTER_PORT, "protocol": "TCP"},
               {"name": "metrics", "containerPort": argv.MASTER_METRICS_PORT, "protocol": "TCP"}],
        resources=pod_resources(experiment, step.variant, defaults.resources).locust_master,
        terminationMessagePath=TERMINATION_LOG, terminationMessagePolicy="FallbackToLogsOnError")
    lbls = labels(experiment, "locust-master", **{LABEL_RUN: step.run_id})
    return _job(master_name(experiment, step), lbls,
                _pod_spec([container], APP_UID, restart_policy="Never", volumes=volumes),
                count=1, deadline=_stage_deadline(experiment, step))


def results_name(experiment: Experiment, step: Step) -> str:
    """Of the stage, whichever attempt of it ran: <experiment>-v1-s2-results, -v1-r2-s2-results in repeat 2."""
    return results_name_of(experiment.name, replace(step, attempt=1).run_id)


def results_name_of(experiment: str, run_id: str) -> str:
    return f"{experiment}-{run_id}-results"


def results_configmap(experiment: Experiment, step: Step, artifact_json: str) -> dict[str, Any]:
    """A stage's artifact (histograms, endpoint and error rows, time series), kept after its pods are gone."""
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": _meta(results_name(experiment, step),
                              labels(experiment, "results", **{LABEL_RUN: step.run_id})),
            "data": {ARTIFACT_KEY: artifact_json}}


def recommendation_name(experiment: Experiment) -> str:
    return f"{experiment.name}-recommendation"


def recommendation_configmap(experiment: Experiment, files: dict[str, str]) -> dict[str, Any]:
    """The export of spec.goal's pick (docs/export.md): one key a file."""
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": _meta(recommendation_name(experiment), labels(experiment, "recommendation")),
            "data": dict(files)}


def master_service(experiment: Experiment, step: Step) -> dict[str, Any]:
    lbls = labels(experiment, "locust-master", **{LABEL_RUN: step.run_id})
    return _service(master_name(experiment, step), lbls,
                    _selector(experiment, "locust-master", **{LABEL_RUN: step.run_id}),
                    argv.LOCUST_MASTER_PORT, "master")


def workers_job(experiment: Experiment, step: Step, defaults: Defaults) -> dict[str, Any]:
    volumes, mounts, custom = _locustfile_volume(experiment)
    args = argv.locust_worker_command(experiment, master_host=master_name(experiment, step),
                                          custom_locustfile=custom)
    container = _container("locust-worker", experiment.spec.injectors.image or defaults.injector, args,
                           mounts=mounts, terminationMessagePolicy="FallbackToLogsOnError",
                           resources=pod_resources(experiment, step.variant, defaults.resources).locust_worker)
    lbls = labels(experiment, "locust-worker", **{LABEL_RUN: step.run_id})
    count = step.stage.count
    # onLost Continue: lost workers must not fail the Job (which would stop the others)
    return _job(workers_name(experiment, step), lbls,
                _pod_spec([container], APP_UID, restart_policy="Never", volumes=volumes),
                count=count, deadline=_stage_deadline(experiment, step),
                tolerated_failures=count if experiment.spec.injectors.on_lost == "Continue" else 0)
