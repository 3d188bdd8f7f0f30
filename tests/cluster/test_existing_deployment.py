"""An existing Deployment as the target, on the real control plane: Copy never writes the original, InPlace
holds the Deployment and pins its HPA and restores both exactly, after success, after a failure, after an
operator restart and after deletion; a second InPlace experiment is refused, naming the first."""

import signal

import pytest

from support.kube import a_running_pod_of_job, apply, crash_pod, example, play_stage, running_pods_of_job, wait_phase
from support.waiting import wait_for

pytestmark = pytest.mark.cluster


def shop(cluster, namespace, replicas=2):
    """The team's own Deployment, with its labels, probes, env from a ConfigMap, and an HPA."""
    cluster.core.create_namespaced_config_map(namespace, {"metadata": {"name": "shop-env"},
                                                          "data": {"SHOP_MODE": "live"}})
    cluster.apps.create_namespaced_deployment(namespace, {
        "metadata": {"name": "shop", "labels": {"app": "shop"}},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "shop"}}, "template": {
            "metadata": {"labels": {"app": "shop"}},
            "spec": {"containers": [{
                "name": "web", "image": "example.org/shop:7",
                "args": ["gunicorn", "--workers", "4", "--bind", "0.0.0.0:8080", "shop.wsgi"],
                "envFrom": [{"configMapRef": {"name": "shop-env"}}],
                "ports": [{"containerPort": 8080}],
                "readinessProbe": {"httpGet": {"path": "/health", "port": 8080}},
                "resources": {"requests": {"cpu": "200m", "memory": "256Mi"}}}]}}}})
    cluster.api_autoscaling().create_namespaced_horizontal_pod_autoscaler(namespace, {
        "metadata": {"name": "shop"},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "shop"},
                 "minReplicas": 2, "maxReplicas": 6,
                 "metrics": [{"type": "Resource", "resource": {"name": "cpu",
                                                                "target": {"type": "Utilization",
                                                                           "averageUtilization": 70}}}]}})

    def settled():
        d = cluster.apps.read_namespaced_deployment("shop", namespace)
        return d.status.observed_generation == d.metadata.generation and d.status.ready_replicas == replicas
    wait_for(settled, timeout=30)


def snapshot(cluster, namespace):
    d = cluster.apps.read_namespaced_deployment("shop", namespace)
    h = cluster.api_autoscaling().read_namespaced_horizontal_pod_autoscaler("shop", namespace)
    plain = cluster.api.sanitize_for_serialization
    # the Deployment controller counts each rollout in its revision annotation: not the user's to compare
    annotations = {k: v for k, v in (d.metadata.annotations or {}).items() if k != "deployment.kubernetes.io/revision"}
    return {"generation": d.metadata.generation, "resourceVersion": d.metadata.resource_version,
            "replicas": d.spec.replicas, "template": plain(d.spec.template),
            "annotations": annotations, "hpa": (h.spec.min_replicas, h.spec.max_replicas),
            "hpaAnnotations": h.metadata.annotations or {}}


def running_master(cluster, namespace, name, run):
    """The stage's master pod runs; else the experiment's status says why not."""
    try:
        running_pods_of_job(cluster, namespace, f"{name}-{run}-master")
    except AssertionError:
        raise AssertionError(cluster.status(namespace, name)) from None


def targeting_shop(name="shop-test", mode="Copy", stages=1, **target):
    doc = example("cluster-ladder")
    doc["metadata"]["name"] = name
    doc["spec"]["stages"] = doc["spec"]["stages"][:stages]
    doc["spec"]["target"] = {"deployment": {"name": "shop", "mode": mode}, "server": "gunicorn", "pods": 3, **target}
    doc["spec"]["redis"] = {"deploy": False}
    return doc


def test_copy_runs_each_variant_in_a_copy_and_never_writes_the_original(cluster, namespace, operator, real_stage):
    operator()
    shop(cluster, namespace)
    before = snapshot(cluster, namespace)
    doc = targeting_shop(threads=3)
    doc["spec"]["matrix"] = {"workers": [2, 5], "cpu": ["500m"]}
    assert apply(cluster, namespace, doc).returncode == 0
    for variant, workers in enumerate([2, 5], 1):
        running_master(cluster, namespace, "shop-test", f"v{variant}-s1")
        copy = cluster.apps.read_namespaced_deployment("shop-test-runner", namespace)
        template = copy.spec.template
        assert "app" not in template.metadata.labels and copy.spec.replicas == 3
        (web,) = template.spec.containers
        assert web.args == ["gunicorn", "--workers", str(workers), "--bind", "0.0.0.0:8080", "shop.wsgi"]
        assert [(e.name, e.value) for e in web.env] == [("GUNICORN_CMD_ARGS", "--threads 3")]
        assert web.env_from[0].config_map_ref.name == "shop-env" and web.readiness_probe.http_get.path == "/health"
        assert (web.resources.requests, web.resources.limits) == ({"cpu": "500m", "memory": "256Mi"},
                                                                  {"cpu": "500m"})
        service = cluster.core.read_namespaced_service("shop-test-runner", namespace)
        assert service.spec.ports[0].target_port == 8080
        master = cluster.batch.read_namespaced_job(f"shop-test-v{variant}-s1-master", namespace)
        args = master.spec.template.spec.containers[0].args
        assert all(url.endswith(":8080/metrics") for url in args[args.index("--target-metrics") + 1].split(","))
        play_stage(cluster, namespace, "shop-test", f"v{variant}-s1", 2, real_stage)
    wait_phase(cluster, namespace, "shop-test", "Succeeded")
    wait_for(lambda: not cluster.apps.list_namespaced_deployment(
        namespace, label_selector="loadstage.io/experiment=shop-test").items, timeout=30)
    assert snapshot(cluster, namespace) == before     # same generation and resourceVersion: never written


def test_in_place_holds_the_deployment_and_its_hpa_and_restores_both_after_an_operator_restart(
        cluster, namespace, operator, real_stage):
    first = operator()
    shop(cluster, namespace)
    before = snapshot(cluster, namespace)
    doc = targeting_shop(mode="InPlace", stages=2, workers=3, resources={"limits": {"memory": "512Mi"}})
    assert apply(cluster, namespace, doc).returncode == 0
    running_master(cluster, namespace, "shop-test", "v1-s1")
    held = snapshot(cluster, namespace)
    assert held["replicas"] == 3 and held["hpa"] == (3, 3)
    assert held["template"]["metadata"]["labels"]["app"] == "shop"
    assert held["template"]["spec"]["containers"][0]["args"][2] == "3"
    assert "loadstage.io/in-place" in held["annotations"] and "loadstage.io/in-place" in held["hpaAnnotations"]

    # a second experiment may not hold the same Deployment
    assert apply(cluster, namespace, targeting_shop(name="rival", mode="InPlace")).returncode == 0
    wait_phase(cluster, namespace, "rival", "Failed")
    rival = cluster.status(namespace, "rival")
    assert rival["reason"] == "TargetHeld"
    assert f"held InPlace by LoadExperiment {namespace}/shop-test" in rival["message"]

    play_stage(cluster, namespace, "shop-test", "v1-s1", 2, real_stage)
    running_master(cluster, namespace, "shop-test", "v1-s2")
    first.kill(signal.SIGKILL)
    operator()
    play_stage(cluster, namespace, "shop-test", "v1-s2", 4, real_stage)
    wait_phase(cluster, namespace, "shop-test", "Succeeded")
    wait_for(lambda: (cluster.status(namespace, "shop-test").get("inPlace") or {}).get("restored"), timeout=30)
    after = snapshot(cluster, namespace)
    assert (after["replicas"], after["template"], after["hpa"]) == (before["replicas"], before["template"],
                                                                    before["hpa"])
    assert after["annotations"] == before["annotations"] and after["hpaAnnotations"] == before["hpaAnnotations"]


def test_in_place_restores_after_a_failure_and_after_deletion(cluster, namespace, operator, real_stage):
    operator()
    shop(cluster, namespace)
    before = snapshot(cluster, namespace)
    assert apply(cluster, namespace, targeting_shop(mode="InPlace", workers=3)).returncode == 0
    running_master(cluster, namespace, "shop-test", "v1-s1")
    assert snapshot(cluster, namespace)["replicas"] == 3
    crash_pod(cluster, namespace, a_running_pod_of_job(cluster, namespace, "shop-test-v1-s1-master"), 1, "boom")
    wait_phase(cluster, namespace, "shop-test", "Failed")
    wait_for(lambda: (cluster.status(namespace, "shop-test").get("inPlace") or {}).get("restored"), timeout=30)
    assert snapshot(cluster, namespace)["template"] == before["template"]
    assert cluster.kubectl("delete", "-n", namespace, "lx/shop-test").returncode == 0

    assert apply(cluster, namespace, targeting_shop(name="doomed", mode="InPlace", workers=5)).returncode == 0
    running_master(cluster, namespace, "doomed", "v1-s1")
    assert snapshot(cluster, namespace)["replicas"] == 3
    assert cluster.kubectl("delete", "-n", namespace, "lx/doomed", "--timeout=60s").returncode == 0
    after = snapshot(cluster, namespace)
    assert (after["replicas"], after["template"], after["hpa"]) == (before["replicas"], before["template"],
                                                                    before["hpa"])
    assert after["annotations"] == before["annotations"] and after["hpaAnnotations"] == before["hpaAnnotations"]


def test_a_target_deployment_that_is_missing_or_elsewhere_fails_naming_it(cluster, namespace, operator):
    operator()
    shop(cluster, namespace, replicas=1)
    cases = {"missing": ({"deployment": {"name": "cart"}},
                         f"spec.target.deployment.name: Deployment 'cart' not found in namespace {namespace}"),
             "container": ({"deployment": {"name": "shop", "container": "api"}},
                           "spec.target.deployment.container: Deployment shop has no container 'api' (it has web)"),
             "elsewhere": ({"deployment": {"name": "shop", "namespace": "prod"}},
                           "spec.target.deployment.namespace: Deployment shop is in namespace prod")}
    for name, (target, _) in cases.items():
        doc = targeting_shop(name=name)
        doc["spec"]["target"] = target
        assert apply(cluster, namespace, doc).returncode == 0
    for name, (_, message) in cases.items():
        wait_phase(cluster, namespace, name, "Failed")
        status = cluster.status(namespace, name)
        assert status["reason"] == "TargetDeploymentInvalid" and status["message"].startswith(message), status
    refused = apply(cluster, namespace, {**targeting_shop(name="own-image"), "spec": {
        **targeting_shop()["spec"], "target": {"deployment": {"name": "shop"}, "image": "x:1"}}})
    assert refused.returncode != 0 and "spec.target.deployment runs the Deployment's own container" in refused.stderr
    with_redis = targeting_shop(name="with-redis")
    del with_redis["spec"]["redis"]
    refused = apply(cluster, namespace, with_redis)
    assert refused.returncode != 0 and "spec.target.deployment brings its own Redis settings" in refused.stderr
