"""The Helm chart, installed with a real helm into the real control plane; RBAC checked by
running the operator as the chart's ServiceAccount; Pod Security checked by real admission."""

import copy
import json
import signal

import pytest
import yaml

from loadstage.api.load import parse_experiment
from loadstage.cli.parser import DEFAULT_IMAGES
from loadstage.engine.steps import stage_step
from loadstage.kube import manifests
from support.kube import apply, example, play_stage, pods, wait_phase
from support.waiting import ROOT, wait_for

pytestmark = pytest.mark.cluster
CHART = ROOT / "charts" / "loadstage"
DASHBOARD = CHART / "dashboards" / "loadstage.json"


@pytest.fixture
def namespaces(cluster, namespace):
    """More namespaces for one test, deleted afterwards."""
    made = []

    def make(suffix, labels=None):
        name = f"{namespace[:30]}-{namespace[-6:]}-{suffix}"   # the whole of its unique tail
        cluster.core.create_namespace({"metadata": {"name": name, "labels": labels or {}}})
        made.append(name)
        return name
    yield make
    for name in made:
        cluster.drop_namespace(name)


def release_objects(cluster, release, namespace):
    selector = f"app.kubernetes.io/instance={release}"
    rbac = cluster.api_rbac()
    return ([f"Deployment/{d.metadata.name}" for d in cluster.apps.list_namespaced_deployment(
                namespace, label_selector=selector).items]
            + [f"Service/{s.metadata.name}" for s in cluster.core.list_namespaced_service(
                namespace, label_selector=selector).items]
            + [f"ServiceAccount/{s.metadata.name}" for s in cluster.core.list_namespaced_service_account(
                namespace, label_selector=selector).items]
            + [f"ClusterRole/{r.metadata.name}" for r in rbac.list_cluster_role(label_selector=selector).items]
            + [f"ClusterRoleBinding/{r.metadata.name}"
               for r in rbac.list_cluster_role_binding(label_selector=selector).items]
            + [f"Role/{r.metadata.namespace}/{r.metadata.name}"
               for r in rbac.list_role_for_all_namespaces(label_selector=selector).items]
            + [f"RoleBinding/{r.metadata.namespace}/{r.metadata.name}"
               for r in rbac.list_role_binding_for_all_namespaces(label_selector=selector).items])


def test_lint_is_clean_and_the_chart_crd_is_the_generated_one(cluster):
    lint = cluster.helm("lint", "--strict", CHART)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    assert "0 chart(s) failed" in lint.stdout
    assert (CHART / "crds" / "loadexperiments.loadstage.io.yaml").read_text() == \
        (ROOT / "crds" / "loadexperiments.loadstage.io.yaml").read_text()


VALUE_SETS = {
    "defaults": [],
    "namespaced": ["--set", "watch.mode=namespaces", "--set", "watch.namespaces={NS_A,NS_B}"],
    "no-metrics-existing-account": ["--set", "metrics.enabled=false", "--set", "serviceAccount.create=false",
                                    "--set", "serviceAccount.name=default"],
    "monitoring": ["--set", "metrics.serviceMonitor.enabled=true", "--set", "metrics.serviceMonitor.namespace=mon"],
    "custom-images": ["--set", "image.repository=registry.example/ls/operator", "--set", "image.tag=1.2.3",
                      "--set-string", "runnerImage.tag=9", "--set", "resources.limits.memory=1Gi",
                      "--set", "experimentResources.target.limits.cpu=2", "--set", "rbac.nodeMetrics=true",
                      "--set", "history.url=postgresql://ci@db.internal:5432/loadstage?sslmode=require",
                      "--set", "history.passwordSecret.name=history-db"],
}


@pytest.mark.parametrize("values", VALUE_SETS, ids=list(VALUE_SETS))
def test_rendered_manifests_are_accepted_by_the_api_server(cluster, namespaces, values):
    release_ns = namespaces("rel")
    args = [a.replace("NS_A", namespaces("a")).replace("NS_B", namespaces("b")) if "NS_A" in a else a
            for a in VALUE_SETS[values]]
    rendered = cluster.helm("template", f"t-{values}", CHART, "-n", release_ns, *args)
    assert rendered.returncode == 0, rendered.stderr
    docs = [d for d in yaml.safe_load_all(rendered.stdout) if d]
    kinds = sorted(d["kind"] for d in docs)
    # the Prometheus Operator's kinds are checked below: this API server has no such CRDs
    applied = [d for d in docs if d["apiVersion"] != "monitoring.coreos.com/v1"]
    dry = cluster.kubectl("apply", "--dry-run=server", "-f", "-", input=yaml.safe_dump_all(applied))
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.count("(server dry run)") == len(applied)
    dashboard = next(d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"].endswith("-dashboard"))
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    for board in ("loadstage.json", "history.json"):
        assert json.loads(dashboard["data"][board]) == json.loads((DASHBOARD.parent / board).read_text())
    if values == "monitoring":
        assert kinds.count("ServiceMonitor") == 1 and kinds.count("PodMonitor") == 1
        monitor = next(d for d in docs if d["kind"] == "PodMonitor")
        assert monitor["spec"]["namespaceSelector"] == {"any": True}
        assert monitor["spec"]["podMetricsEndpoints"][0]["port"] == "metrics"
        # it selects what a stage's master pod carries, on the port the master serves
        e = parse_experiment(example("cluster-ladder"))
        master = manifests.master_job(e, stage_step(e, e.variants()[0], 1, 1), DEFAULT_IMAGES, ["10.0.0.1"])
        pod = master["spec"]["template"]
        assert monitor["spec"]["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
        assert "metrics" in [p["name"] for p in pod["spec"]["containers"][0]["ports"]]
        env = {e["name"]: e.get("value") for e in next(d for d in docs if d["kind"] == "Deployment")[
            "spec"]["template"]["spec"]["containers"][0]["env"]}
        assert json.loads(env["LOADSTAGE_MONITORING_PEER"]) == {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "mon"}}}
    else:
        assert "PodMonitor" not in kinds
    if values == "namespaced":
        # a framework Role and an experiments Role in each of the two namespaces, nothing cluster-wide
        assert kinds.count("Role") == 4 and kinds.count("RoleBinding") == 4 and "ClusterRole" not in kinds
    if values == "no-metrics-existing-account":
        assert "Service" not in kinds and "ServiceAccount" not in kinds
    if values == "custom-images":
        deploy = next(d for d in docs if d["kind"] == "Deployment")
        container = deploy["spec"]["template"]["spec"]["containers"][0]
        assert container["image"] == "registry.example/ls/operator:1.2.3"
        assert {"name": "LOADSTAGE_RUNNER_IMAGE", "value": "loadstage/runner-app:9"} in container["env"]
        env = {e["name"]: e.get("value") for e in container["env"]}
        assert json.loads(env["LOADSTAGE_EXPERIMENT_RESOURCES"])["target"] == {
            "requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"cpu": 2}}
        assert env["LOADSTAGE_HISTORY_URL"] == "postgresql://ci@db.internal:5432/loadstage?sslmode=require"
        assert {"name": "PGPASSWORD", "valueFrom": {"secretKeyRef": {"name": "history-db", "key": "password"}}} in \
            container["env"]   # the password from a Secret, never in the values
        node_metrics = next(d for d in docs if d["metadata"]["name"] == f"t-{values}-loadstage-node-metrics")
        assert node_metrics["rules"] == [{"apiGroups": [""], "resources": ["nodes/proxy"], "verbs": ["get"]}]


@pytest.mark.parametrize("bad,message", [
    (["--set", "watch.mode=everything"], "watch.mode: watch.mode must be one of the following"),
    (["--set", "watch.mode=namespaces"], "watch.namespaces: Array must have at least 1 items"),
    (["--set", "metrics.port=80"], "metrics.port: Must be greater than or equal to 1024"),
    (["--set", "watch.namespaces={Bad_NS}"], "watch.namespaces.0: Does not match pattern"),
    (["--set", "replicas=0"], "replicas: Must be greater than or equal to 1"),
    (["--set", "replicas=6"], "replicas: Must be less than or equal to 5"),
    (["--set", "experimentResources.target.requests.cpu=lots"],
     "experimentResources.target.requests.cpu: Does not match pattern"),
    (["--set", "experimentResources.locustWorker.limit.memory=1Gi"],
     "experimentResources.locustWorker: Additional property limit is not allowed"),
    (["--set", "generatedRedisPasswords=true"], "generatedRedisPasswords: Invalid type. Expected: object"),
    (["--set", "metrics.serviceMonitor.namespace=Mon_1"], "metrics.serviceMonitor.namespace: Does not match pattern"),
    (["--set", "history.url=postgresql://ci:secret@db/h"], "history.url: Does not match pattern"),   # a password
    (["--set", "history.url=mysql://db/h"], "history.url: Does not match pattern"),
])
def test_wrong_values_fail_at_install_naming_the_value(cluster, namespace, bad, message):
    result = cluster.helm("install", "bad", CHART, "-n", namespace, *bad)
    assert result.returncode != 0
    assert message in result.stderr, result.stderr
    assert cluster.helm("status", "bad", "-n", namespace).returncode != 0


def test_install_wait_upgrade_and_uninstall(cluster, namespace):
    installed = cluster.helm("install", "ls", CHART, "-n", namespace, "--wait", "--timeout", "60s")
    assert installed.returncode == 0, installed.stderr
    assert "kubectl get lx -w" in installed.stdout
    deploy = cluster.apps.read_namespaced_deployment("ls-loadstage", namespace)
    assert deploy.spec.strategy.type == "Recreate" and deploy.spec.replicas == 1
    container = deploy.spec.template.spec.containers[0]
    assert container.args[:3] == ["loadstage", "operator", "--all-namespaces"]
    assert container.liveness_probe.http_get.path == "/healthz"
    assert container.resources.limits["memory"] == "512Mi"
    assert deploy.status.ready_replicas == 1
    assert "Service/ls-loadstage-metrics" in release_objects(cluster, "ls", namespace)

    upgraded = cluster.helm("upgrade", "ls", CHART, "-n", namespace, "--wait", "--timeout", "60s",
                            "--set", "metrics.enabled=false", "--set", "resources.limits.memory=1Gi")
    assert upgraded.returncode == 0, upgraded.stderr
    deploy = cluster.apps.read_namespaced_deployment("ls-loadstage", namespace)
    container = deploy.spec.template.spec.containers[0]
    assert container.resources.limits["memory"] == "1Gi"
    assert not any(a.startswith("--metrics-port") for a in container.args)
    assert "Service/ls-loadstage-metrics" not in release_objects(cluster, "ls", namespace)

    assert cluster.helm("uninstall", "ls", "-n", namespace, "--wait").returncode == 0
    wait_for(lambda: not release_objects(cluster, "ls", namespace), timeout=30)
    # the CRD strategy: installed from crds/, never deleted by Helm
    assert cluster.kubectl("get", "crd", "loadexperiments.loadstage.io").returncode == 0


def test_cluster_mode_rbac_is_enough_to_run_a_whole_experiment(cluster, namespace, namespaces, operator,
                                                                tmp_path, real_stage):
    release_ns = namespaces("system")
    assert cluster.helm("install", "lsc", CHART, "-n", release_ns, "--wait").returncode == 0
    kubeconfig = cluster.service_account_kubeconfig(release_ns, "lsc-loadstage", tmp_path / "sa.kubeconfig")
    op = operator(kubeconfig=kubeconfig, scope=["--all-namespaces"])
    doc = example("cluster-ladder")
    doc["spec"]["stages"] = doc["spec"]["stages"][:2]
    doc["spec"]["warmup"] = {"injectors": 1, "duration": "1m"}
    assert apply(cluster, namespace, doc).returncode == 0
    play_stage(cluster, namespace, "cluster-ladder", "v1-warmup", 1, real_stage)
    play_stage(cluster, namespace, "cluster-ladder", "v1-s1", 2, real_stage)
    play_stage(cluster, namespace, "cluster-ladder", "v1-s2", 4, real_stage)
    wait_phase(cluster, namespace, "cluster-ladder", "Succeeded")
    stages = cluster.status(namespace, "cluster-ladder")["variants"][0]["stages"]
    assert [s["stage"] for s in stages] == [1, 2]
    assert "Forbidden" not in op.output() and " ERROR " not in op.output(), op.output()[-3000:]
    cluster.helm("uninstall", "lsc", "-n", release_ns)


def test_namespaced_mode_runs_watched_namespaces_and_ignores_others(cluster, namespace, namespaces, operator,
                                                                    tmp_path, real_stage):
    release_ns, watched, unwatched = namespaces("system"), namespaces("watched"), namespaces("other")
    installed = cluster.helm("install", "lsn", CHART, "-n", release_ns, "--wait",
                             "--set", "watch.mode=namespaces", "--set", f"watch.namespaces={{{watched}}}")
    assert installed.returncode == 0, installed.stderr
    kubeconfig = cluster.service_account_kubeconfig(release_ns, "lsn-loadstage", tmp_path / "sa.kubeconfig")
    op = operator(kubeconfig=kubeconfig, scope=["--namespace", watched])
    doc = example("cluster-ladder")
    doc["spec"]["stages"] = doc["spec"]["stages"][:1]
    assert apply(cluster, watched, doc).returncode == 0
    assert apply(cluster, unwatched, doc).returncode == 0
    play_stage(cluster, watched, "cluster-ladder", "v1-s1", 2, real_stage)
    wait_phase(cluster, watched, "cluster-ladder", "Succeeded")
    assert cluster.status(unwatched, "cluster-ladder") == {}
    assert not cluster.batch.list_namespaced_job(unwatched).items
    assert "Forbidden" not in op.output() and " ERROR " not in op.output(), op.output()[-3000:]

    account = f"system:serviceaccount:{release_ns}:lsn-loadstage"

    def can(*args):
        return cluster.kubectl("auth", "can-i", f"--as={account}", *args).returncode == 0
    assert can("create", "jobs.batch", "-n", watched)
    assert can("patch", "loadexperiments.loadstage.io/status", "-n", watched)
    assert not can("create", "jobs.batch", "-n", unwatched)
    assert not can("list", "pods", "--all-namespaces")
    assert not can("get", "loadexperiments.loadstage.io", "-n", unwatched)
    cluster.helm("uninstall", "lsn", "-n", release_ns)


def test_rbac_grants_nothing_it_does_not_need(cluster, namespace):
    assert cluster.helm("install", "lsr", CHART, "-n", namespace, "--wait").returncode == 0
    account = f"system:serviceaccount:{namespace}:lsr-loadstage"

    def can(*args):
        return cluster.kubectl("auth", "can-i", f"--as={account}", *args).returncode == 0
    granted = cluster.kubectl("auth", "can-i", "--list", f"--as={account}", "-n", "default").stdout
    assert can("create", "deployments.apps", "-n", "default") and can("delete", "jobs.batch", "-n", "default")
    assert can("patch", "jobs.batch", "-n", "default")   # the injectors lost in a stage, on its worker Job
    # an InPlace target's HPAs are pinned and restored (patch, never update); a verification's own HPA is created
    # and deleted (spec.verify)
    assert can("patch", "horizontalpodautoscalers.autoscaling", "-n", "default")
    assert not can("update", "horizontalpodautoscalers.autoscaling", "-n", "default")
    assert can("create", "horizontalpodautoscalers.autoscaling", "-n", "default")
    assert can("list", "pods", "-n", "default") and can("get", "configmaps", "-n", "default")
    assert can("create", "configmaps", "-n", "default") and can("get", "pods/log", "-n", "default")
    assert can("update", "loadexperiments.loadstage.io", "--subresource=finalizers", "-n", "default")
    assert can("create", "secrets", "-n", "default")   # generated Redis passwords, never read back
    for verb, resource in [("get", "secrets"), ("list", "secrets"), ("create", "pods"), ("delete", "pods"),
                           ("update", "configmaps"), ("delete", "configmaps"), ("list", "configmaps"),
                           ("update", "deployments.apps"),
                           ("create", "roles.rbac.authorization.k8s.io"),
                           ("create", "rolebindings.rbac.authorization.k8s.io"),
                           ("escalate", "clusterroles.rbac.authorization.k8s.io"),
                           ("bind", "clusterroles.rbac.authorization.k8s.io"),
                           ("impersonate", "serviceaccounts"), ("create", "serviceaccounts/token"),
                           ("delete", "namespaces"), ("create", "customresourcedefinitions.apiextensions.k8s.io"),
                           ("delete", "loadexperiments.loadstage.io"), ("update", "loadexperiments.loadstage.io"),
                           ("create", "pods/exec")]:
        assert not can(verb, resource, "-n", "default"), f"{verb} {resource} is granted:\n{granted}"
    framework = cluster.api_rbac().read_cluster_role("lsr-loadstage-framework").to_dict()["rules"]
    experiments = cluster.api_rbac().read_cluster_role("lsr-loadstage-experiments").to_dict()["rules"]
    assert {r["resources"][0] for r in framework} == {"loadexperiments", "events"}
    assert "*" not in json.dumps(framework + experiments)
    # the kubelets' cAdvisor metrics (a target's CPU throttling) only where rbac.nodeMetrics grants them
    assert not can("get", "nodes", "--subresource=proxy")
    assert cluster.helm("upgrade", "lsr", CHART, "-n", namespace, "--reuse-values", "--set",
                        "rbac.nodeMetrics=true").returncode == 0
    wait_for(lambda: can("get", "nodes", "--subresource=proxy"), timeout=10)   # a new binding: seen a moment later
    assert not can("create", "nodes", "--subresource=proxy") and not can("get", "nodes")
    cluster.helm("uninstall", "lsr", "-n", namespace)


def test_pods_of_an_experiment_pass_restricted_pod_security(cluster, namespaces, operator, real_stage):
    restricted = namespaces("restricted", labels={"pod-security.kubernetes.io/enforce": "restricted",
                                                  "pod-security.kubernetes.io/enforce-version": "latest"})
    # the namespace rejects a pod that is not restricted, so admission is really enforcing
    privileged = cluster.kubectl("run", "probe", "-n", restricted, "--image=busybox", "--restart=Never")
    assert privileged.returncode != 0 and "violates PodSecurity" in privileged.stderr
    # the operator's own pod is admitted too
    installed = cluster.helm("install", "lspsa", CHART, "-n", restricted, "--wait", "--timeout", "60s",
                             "--set", "watch.mode=namespaces", "--set", f"watch.namespaces={{{restricted}}}")
    assert installed.returncode == 0, installed.stderr
    assert cluster.apps.read_namespaced_deployment("lspsa-loadstage", restricted).status.ready_replicas == 1
    operator(scope=["--namespace", restricted])
    doc = example("cluster-ladder")
    doc["spec"]["stages"] = doc["spec"]["stages"][:1]
    doc["spec"]["cleanup"] = "Keep"
    assert apply(cluster, restricted, doc).returncode == 0
    play_stage(cluster, restricted, "cluster-ladder", "v1-s1", 2, real_stage)
    wait_phase(cluster, restricted, "cluster-ladder", "Succeeded")
    components = {p.metadata.labels["app.kubernetes.io/component"] for p in pods(
        cluster, restricted, "loadstage.io/experiment=cluster-ladder")}
    assert components == {"redis", "runner", "locust-master", "locust-worker"}
    warnings = cluster.core.list_namespaced_event(restricted, field_selector="reason=FailedCreate").items
    assert not warnings, [w.message for w in warnings]


def peak_while_holding(cluster, namespace, port, password, count, real_stage):
    """Holds `count` authenticated connections to the sampler's Redis while cluster-ladder's one stage is played
    to the end; returns the Redis peak the stage recorded."""
    import redis as redis_client
    held = [redis_client.Redis(port=port, password=password) for _ in range(count)]
    for r in held:
        r.ping()
    play_stage(cluster, namespace, "cluster-ladder", "v1-s1", 2, real_stage)
    wait_phase(cluster, namespace, "cluster-ladder", "Succeeded")
    for r in held:
        r.close()
    return cluster.status(namespace, "cluster-ladder")["variants"][0]["stages"][0]["redisPeakConnections"]


def test_redis_password_secret_is_used_by_the_sampler_and_is_the_only_secret_readable(
        cluster, namespace, namespaces, supervisor, tmp_path, real_stage):

    from loadstage.local.ports import free_port
    from support.kube import OperatorProcess
    from support.processes import start_redis
    release_ns = namespaces("system")
    installed = cluster.helm("install", "lsp", CHART, "-n", release_ns, "--wait",
                             "--set", "rbac.redisPasswordSecrets={redis-auth}")
    assert installed.returncode == 0, installed.stderr
    for name in ("redis-auth", "other"):
        cluster.core.create_namespaced_secret(namespace, {"metadata": {"name": name},
                                                          "stringData": {"password": "s3cret-pass"}})
    account = f"system:serviceaccount:{release_ns}:lsp-loadstage"

    def can(*args):
        return cluster.kubectl("auth", "can-i", f"--as={account}", *args).returncode == 0
    assert can("get", "secret/redis-auth", "-n", namespace)
    assert not can("get", "secret/other", "-n", namespace) and not can("list", "secrets", "-n", namespace)

    port = free_port()
    start_redis(supervisor, tmp_path, port, "--requirepass", "s3cret-pass")
    kubeconfig = cluster.service_account_kubeconfig(release_ns, "lsp-loadstage", tmp_path / "sa.kubeconfig")
    op = OperatorProcess(kubeconfig, ["--all-namespaces"], f"redis://127.0.0.1:{port}/0",
                         tmp_path / "operator.log", free_port())
    try:
        doc = example("cluster-ladder")
        doc["spec"]["stages"] = doc["spec"]["stages"][:1]
        doc["spec"]["redis"]["passwordSecret"] = {"name": "redis-auth"}
        assert apply(cluster, namespace, doc).returncode == 0
        redis_pod = wait_for(lambda: pods(cluster, namespace, "app.kubernetes.io/component=redis"))[0]
        assert redis_pod.spec.containers[0].args[-2:] == ["--requirepass", "$(REDIS_PASSWORD)"]
        assert peak_while_holding(cluster, namespace, port, "s3cret-pass", 4, real_stage) == 4
    finally:
        op.kill()
    cluster.helm("uninstall", "lsp", "-n", release_ns)


def test_a_deployed_redis_gets_a_generated_password_the_sampler_derives_without_reading_a_secret(
        cluster, namespace, namespaces, supervisor, tmp_path, real_stage):
    import base64

    import redis as redis_client

    from loadstage.kube.redis_auth import derived_password
    from loadstage.local.ports import free_port
    from support.kube import OperatorProcess
    from support.processes import start_redis
    release_ns = namespaces("system")
    assert cluster.helm("install", "lsg", CHART, "-n", release_ns, "--wait").returncode == 0

    def chart_key():
        return base64.b64decode(cluster.core.read_namespaced_secret("lsg-loadstage-redis-key", release_ns).data["key"])
    key = chart_key()
    assert len(key) == 48
    upgraded = cluster.helm("upgrade", "lsg", CHART, "-n", release_ns, "--wait", "--set", "metrics.enabled=false")
    assert upgraded.returncode == 0 and chart_key() == key, upgraded.stderr   # kept: running experiments go on
    mine = cluster.helm("template", "lsg", CHART, "-n", release_ns,
                        "--set", "generatedRedisPasswords.existingSecret=team-redis-key").stdout
    assert "lsg-loadstage-redis-key" not in mine and "{name: team-redis-key, key: key}" in mine
    env = cluster.apps.read_namespaced_deployment("lsg-loadstage", release_ns).spec.template.spec.containers[0].env
    (ref,) = [e.value_from.secret_key_ref for e in env if e.name == "LOADSTAGE_REDIS_KEY"]
    assert (ref.name, ref.key) == ("lsg-loadstage-redis-key", "key")
    account = f"system:serviceaccount:{release_ns}:lsg-loadstage"
    assert cluster.kubectl("auth", "can-i", f"--as={account}", "create", "secrets", "-n", namespace).returncode == 0
    assert cluster.kubectl("auth", "can-i", f"--as={account}", "get", "secrets", "-n", namespace).returncode != 0

    # the sampler's stand-in Redis requires the password the operator must derive, from the key and the uid
    port = free_port()
    start_redis(supervisor, tmp_path, port)
    kubeconfig = cluster.service_account_kubeconfig(release_ns, "lsg-loadstage", tmp_path / "sa.kubeconfig")
    op = OperatorProcess(kubeconfig, ["--all-namespaces"], f"redis://127.0.0.1:{port}/0",
                         tmp_path / "operator.log", free_port(), env={"LOADSTAGE_REDIS_KEY": key.decode()})
    try:
        doc = example("cluster-ladder")
        doc["spec"]["stages"] = doc["spec"]["stages"][:1]
        assert apply(cluster, namespace, doc).returncode == 0
        uid = cluster.lx(namespace, "cluster-ladder")["metadata"]["uid"]
        password = derived_password(key, uid)
        redis_client.Redis(port=port).config_set("requirepass", password)
        name = f"cluster-ladder-redis-auth-{uid[:8]}"
        secret = wait_for(lambda: cluster.core.list_namespaced_secret(
            namespace, field_selector=f"metadata.name={name}").items)[0]
        assert base64.b64decode(secret.data["password"]).decode() == password
        assert [(o.kind, o.uid) for o in secret.metadata.owner_references] == [("LoadExperiment", uid)]
        wanted = {"name": name, "key": "password"}
        for component in ("redis", "runner"):
            pod = wait_for(lambda c=component: pods(cluster, namespace, f"app.kubernetes.io/component={c}"))[0]
            (env,) = [e for e in pod.spec.containers[0].env if e.name == "REDIS_PASSWORD"]
            assert env.value_from.secret_key_ref.to_dict() == {**wanted, "optional": None}, component
        redis_pod = pods(cluster, namespace, "app.kubernetes.io/component=redis")[0]
        assert redis_pod.spec.containers[0].args[-2:] == ["--requirepass", "$(REDIS_PASSWORD)"]
        assert peak_while_holding(cluster, namespace, port, password, 3, real_stage) == 3
        assert "Forbidden" not in op.output() and " ERROR " not in op.output(), op.output()[-3000:]
    finally:
        op.kill()
    assert cluster.helm("uninstall", "lsg", "-n", release_ns).returncode == 0
    assert chart_key() == key   # kept (helm.sh/resource-policy: keep): a reinstall finds the same key


def test_missing_permission_is_reported_in_status_and_recovers_when_restored(
        cluster, namespace, namespaces, operator, tmp_path, real_stage):
    release_ns = namespaces("system")
    values = ["--set", "watch.mode=namespaces", "--set", f"watch.namespaces={{{namespace}}}"]
    assert cluster.helm("install", "lsm", CHART, "-n", release_ns, "--wait", *values).returncode == 0
    role = cluster.api_rbac().read_namespaced_role("lsm-loadstage-experiments", namespace)
    role.rules = [r for r in role.rules if "deployments" not in r.resources]
    cluster.api_rbac().replace_namespaced_role("lsm-loadstage-experiments", namespace, role)
    kubeconfig = cluster.service_account_kubeconfig(release_ns, "lsm-loadstage", tmp_path / "sa.kubeconfig")
    operator(kubeconfig=kubeconfig, scope=["--namespace", namespace])
    doc = example("cluster-ladder")
    doc["spec"]["stages"] = doc["spec"]["stages"][:1]
    assert apply(cluster, namespace, doc).returncode == 0
    wait_for(lambda: "Kubernetes API error 403 Forbidden: " in
             cluster.status(namespace, "cluster-ladder").get("message", ""), timeout=30)
    message = cluster.status(namespace, "cluster-ladder")["message"]
    assert 'cannot create resource "deployments"' in message and message.endswith("retrying in 10s"), message
    assert cluster.status(namespace, "cluster-ladder")["phase"] == "Deploying"
    restored = cluster.helm("upgrade", "lsm", CHART, "-n", release_ns, "--wait", *values)
    assert restored.returncode == 0, restored.stderr
    play_stage(cluster, namespace, "cluster-ladder", "v1-s1", 2, real_stage)
    wait_phase(cluster, namespace, "cluster-ladder", "Succeeded", timeout=90)
    cluster.helm("uninstall", "lsm", "-n", release_ns)


def test_cleanup_survives_a_refused_delete_and_an_operator_killed_in_that_window(cluster, namespace, namespaces,
                                                                                 operator, tmp_path, real_stage):
    from support.kube import children, event_reasons
    release_ns = namespaces("system")
    installed = cluster.helm("install", "lsd", CHART, "-n", release_ns, "--wait", "--set", "watch.mode=namespaces",
                             "--set", f"watch.namespaces={{{namespace}}}")
    assert installed.returncode == 0, installed.stderr
    rbac = cluster.api_rbac()
    granted = rbac.read_namespaced_role("lsd-loadstage-experiments", namespace)
    refused = copy.deepcopy(granted)
    for rule in refused.rules:
        rule.verbs = [v for v in rule.verbs if not ("jobs" in rule.resources and v == "delete")]
    rbac.replace_namespaced_role("lsd-loadstage-experiments", namespace, refused)
    kubeconfig = cluster.service_account_kubeconfig(release_ns, "lsd-loadstage", tmp_path / "sa.kubeconfig")
    first = operator(kubeconfig=kubeconfig, scope=["--namespace", namespace])
    doc = example("cluster-ladder")
    doc["spec"]["stages"] = doc["spec"]["stages"][:1]
    assert apply(cluster, namespace, doc).returncode == 0
    play_stage(cluster, namespace, "cluster-ladder", "v1-s1", 2, real_stage)
    wait_phase(cluster, namespace, "cluster-ladder", "Succeeded")
    # the API server refuses the cleanup; the operator dies while it is pending
    wait_for(lambda: "CleanupFailed" in event_reasons(cluster, namespace, "cluster-ladder"), timeout=30)
    # the Event is posted before the status records the refusal
    cleanup = wait_for(lambda: cluster.status(namespace, "cluster-ladder").get("cleanup"), timeout=30)
    assert cleanup["done"] is False and "403" in cleanup["message"], cleanup
    first.kill(signal.SIGKILL)
    assert cluster.batch.list_namespaced_job(namespace).items
    rbac.replace_namespaced_role("lsd-loadstage-experiments", namespace,
                                 rbac.read_namespaced_role("lsd-loadstage-experiments", namespace).__class__(
                                     metadata={"name": "lsd-loadstage-experiments"}, rules=granted.rules))
    operator(kubeconfig=kubeconfig, scope=["--namespace", namespace])
    wait_for(lambda: not [c for c in children(cluster, namespace, "cluster-ladder")
                          if c.metadata.deletion_timestamp is None], timeout=60)
    wait_for(lambda: cluster.status(namespace, "cluster-ladder")["cleanup"]["done"] is True, timeout=30)
    status = cluster.status(namespace, "cluster-ladder")
    assert status["phase"] == "Succeeded"
    assert len(status["variants"][0]["stages"]) == 1
    cluster.helm("uninstall", "lsd", "-n", release_ns)


def test_two_replicas_elect_a_leader_through_a_lease_the_chart_alone_permits(cluster, namespace, namespaces,
                                                                            operator, tmp_path):
    release_ns = namespaces("system")
    installed = cluster.helm("install", "lsh", CHART, "-n", release_ns, "--set", "replicas=2", "--set",
                             "watch.mode=namespaces", "--set", f"watch.namespaces={{{namespace}}}")
    assert installed.returncode == 0, installed.stderr
    deployment = cluster.apps.read_namespaced_deployment("lsh-loadstage", release_ns)
    assert deployment.spec.replicas == 2
    args = deployment.spec.template.spec.containers[0].args
    assert "--leader-elect" in args and "--leader-elect-lease=lsh-loadstage" in args
    account = f"system:serviceaccount:{release_ns}:lsh-loadstage"

    def can(*args):
        return cluster.kubectl("auth", "can-i", f"--as={account}", *args).returncode == 0
    assert can("update", "leases.coordination.k8s.io/lsh-loadstage", "-n", release_ns)
    assert not can("update", "leases.coordination.k8s.io/kube-scheduler", "-n", release_ns)
    assert not can("get", "leases.coordination.k8s.io/lsh-loadstage", "-n", namespace)
    kubeconfig = cluster.service_account_kubeconfig(release_ns, "lsh-loadstage", tmp_path / "sa.kubeconfig")
    lease = ("--leader-elect", "--leader-elect-namespace", release_ns, "--leader-elect-lease", "lsh-loadstage")
    first = operator(kubeconfig=kubeconfig, scope=["--namespace", namespace], extra=lease)
    wait_for(lambda: "leading as" in first.output())
    second = operator(kubeconfig=kubeconfig, scope=["--namespace", namespace], extra=lease)
    wait_for(lambda: "standby: Lease" in second.output())
    first.kill(signal.SIGTERM)   # a clean shutdown gives the Lease up, so the standby leads at once
    wait_for(lambda: "leading as" in second.output(), timeout=10)
    assert "Forbidden" not in first.output() + second.output()
    cluster.helm("uninstall", "lsh", "-n", release_ns)
