"""Child manifests, the CRD and conditions: pure functions, no cluster."""

import copy
import dataclasses
import itertools
import json
from dataclasses import replace

import pytest
import yaml

from loadstage.api.crd import build_crd, experiment_resources_values_schema, render_crd
from loadstage.api.load import parse_experiment, parse_pod_resources
from loadstage.api.schema import Obj, ValidationError
from loadstage.api.spec import SPEC
from loadstage.api.status import RunStatus
from loadstage.api.types import DEFAULT_POD_RESOURCES, ResourceList, Resources
from loadstage.engine.steps import Step
from loadstage.kube import manifests
from loadstage.kube.redis_auth import derived_password, operator_key
from loadstage.kube.status import conditions_for
from loadstage.launch import argv as commands
from support.documents import BASE
from support.waiting import ROOT

DEFAULTS = manifests.Defaults(runner="r:1", injector="i:1", redis="redis:7")



def runner_containers(exp):
    return manifests.runner_deployment(exp, exp.variants()[0], DEFAULTS)["spec"]["template"]["spec"]["containers"]

def experiment(**spec):
    doc = copy.deepcopy(BASE)
    doc["spec"].update(spec)
    return parse_experiment(doc)


def test_committed_crd_is_the_one_generated_from_the_model():
    assert (ROOT / "crds" / "loadexperiments.loadstage.io.yaml").read_text() == render_crd()


def _walk(schema, path="spec"):
    yield path, schema
    for name, sub in schema.get("properties", {}).items():
        yield from _walk(sub, f"{path}.{name}")
    if "items" in schema:
        yield from _walk(schema["items"], f"{path}[]")


def test_every_spec_field_of_the_model_is_in_the_crd_with_a_description():
    crd_spec = build_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]

    def model_paths(node, path="spec"):
        if isinstance(node, Obj):
            for name, sub in node.fields.items():
                yield f"{path}.{name}"
                yield from model_paths(sub, f"{path}.{name}")
        elif hasattr(node, "item"):
            yield from model_paths(node.item, f"{path}[]")

    crd_paths = dict(_walk(crd_spec))
    for path in model_paths(SPEC):
        assert path in crd_paths, path
        assert crd_paths[path].get("description"), f"{path} has no description"


def test_cross_field_rules_become_cel_rules():
    crd_spec = build_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    wait = crd_spec["properties"]["injectors"]["properties"]["waitTime"]
    assert wait["x-kubernetes-validations"][0]["message"] == "min must be <= max"
    assert {"rule": "self == oldSelf",
            "message": "spec is immutable once created; delete the experiment and create it again"} \
        in crd_spec["x-kubernetes-validations"]
    stage_duration = crd_spec["properties"]["stages"]["items"]["properties"]["duration"]
    assert [r["rule"] for r in stage_duration["x-kubernetes-validations"]] == [
        "duration(self) >= duration('1s')", "duration(self) <= duration('24h')"]


SERVER_ARGS = {
    "uwsgi": ["uwsgi", "--master", "--http-socket", "0.0.0.0:8000", "--module", "runner_app.app:app",
              "--processes", "3", "--threads", "4", "--enable-threads", "--lazy-apps", "--die-on-term", "--need-app",
              "--disable-logging", "--listen", "2048", "--add-header", "Connection: close"],
    "waitress": ["waitress-serve", "--listen=0.0.0.0:8000", "--threads=4", "--backlog=2048",
                 "--connection-limit=10000", "runner_app.app:app"],
    "cheroot": ["cheroot", "--bind", "0.0.0.0:8000", "--threads", "4", "--max-threads", "4",
                "--request-queue-size", "2048", "runner_app.app:app"],
    "granian": ["granian", "--interface", "wsgi", "--host", "0.0.0.0", "--port", "8000", "--workers", "3",
                "--blocking-threads", "4", "--backlog", "2048", "runner_app.app:app"],
    "bjoern": ["loadstage-prefork", "bjoern", "runner_app.app:app", "--bind", "0.0.0.0:8000", "--workers", "3",
               "--backlog", "2048"],
    "meinheld": ["loadstage-prefork", "meinheld", "runner_app.app:app", "--bind", "0.0.0.0:8000", "--workers", "3",
                 "--backlog", "2048"],
    "mod_wsgi": ["mod_wsgi-express", "start-server", "--application-type", "module", "runner_app.app",
                 "--callable-object", "app", "--host", "0.0.0.0", "--port", "8000", "--processes", "3",
                 "--threads", "4", "--server-backlog", "2048", "--max-clients", "200", "--log-to-terminal",
                 "--locale", "C.UTF-8", "--user", "nobody", "--group", "nogroup"],
}


@pytest.mark.parametrize("server", SERVER_ARGS)
def test_each_server_maps_workers_and_threads_onto_its_own_settings(server):
    workers = 1 if server in ("waitress", "cheroot") else 3
    threads = 1 if server in ("bjoern", "meinheld") else 4
    e = experiment(target={"server": server, "workers": workers, "threads": threads})
    (c,) = manifests.runner_deployment(e, e.variants()[0], DEFAULTS)["spec"]["template"]["spec"]["containers"]
    assert c["args"] == SERVER_ARGS[server]
    assert {x["name"]: x["value"] for x in c["env"]}["PROMETHEUS_MULTIPROC_DIR"] == "/tmp/metrics"


def test_a_command_target_gets_its_placeholders_filled():
    e = experiment(target={"command": ["hypercorn", "--bind", "{bind}", "--workers", "{workers}", "{app}",
                                       "--x={{literal}}", "{host}", "{port}", "{threads}"], "workers": 3})
    (c,) = manifests.runner_deployment(e, e.variants()[0], DEFAULTS)["spec"]["template"]["spec"]["containers"]
    assert c["args"] == ["hypercorn", "--bind", "0.0.0.0:8000", "--workers", "3", "runner_app.app:app",
                         "--x={literal}", "0.0.0.0", "8000", "2"]


def test_local_instances_that_share_a_port_also_listen_on_their_own():
    e = experiment(target={"server": "uwsgi", "pods": 2})
    argv = commands.runner_command(e, e.variants()[0], binds=["127.0.0.1:5000", "127.0.0.1:5001"], reuse_port=True)
    assert argv[argv.index("--http-socket"):][:4] == ["--http-socket", "127.0.0.1:5000", "--http-socket",
                                                      "127.0.0.1:5001"]
    assert argv[-1] == "--reuse-port"


def test_runner_deployment():
    e = experiment(target={"pods": 50, "workers": 7, "threads": 3, "env": {"X": "1"}},
                   matrix={"threads": [2, 3]})
    d = manifests.runner_deployment(e, e.variants()[1], DEFAULTS)
    assert d["metadata"]["name"] == "demo-runner" and d["spec"]["replicas"] == 50
    pod = d["spec"]["template"]
    assert pod["metadata"]["annotations"] == {"loadstage.io/variant": "2"}
    assert d["spec"]["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    (c,) = pod["spec"]["containers"]
    assert c["image"] == "r:1"
    assert c["args"] == ["gunicorn", "--config", "python:runner_app.gunicorn_conf", "--bind", "0.0.0.0:8000",
                         "--workers", "7", "--threads", "3", "--worker-class", "gthread", "--backlog", "2048",
                         "--no-control-socket",
                         "runner_app.app:app"]
    env = {x["name"]: x["value"] for x in c["env"]}
    assert env["REDIS_URL"] == "redis://demo-redis:6379/0" and env["X"] == "1"
    assert c["readinessProbe"] == {"httpGet": {"path": "/readyz", "port": "http"}, "periodSeconds": 2,
                                   "timeoutSeconds": 2}
    # a saturated server answers late, not never: only one stuck for a minute is restarted
    assert c["livenessProbe"] == {"httpGet": {"path": "/healthz", "port": "http"}, "periodSeconds": 10,
                                  "timeoutSeconds": 5, "failureThreshold": 6}
    assert c["securityContext"] == {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                    "capabilities": {"drop": ["ALL"]}}
    assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
    assert pod["spec"]["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["spec"]["automountServiceAccountToken"] is False


def test_an_app_of_your_own_gets_its_probes_its_metrics_and_no_redis():
    exp = experiment(target={"app": "httpbin:app", "readinessProbe": {
                         "httpGet": {"path": "/status/200", "port": 9000}, "timeoutSeconds": 3, "failureThreshold": 5},
                         "metrics": {"path": "/prometheus", "counter": "flask_http_request_total"}},
                     redis={"deploy": False})
    (container,) = runner_containers(exp)
    assert container["readinessProbe"] == {"httpGet": {"path": "/status/200", "port": 9000}, "timeoutSeconds": 3,
                                           "failureThreshold": 5}
    assert "livenessProbe" not in container
    assert not {"REDIS_URL", "PROMETHEUS_MULTIPROC_DIR"} & {e["name"] for e in container.get("env", [])}
    assert container["args"][:3] == ["gunicorn", "--bind", "0.0.0.0:8000"]   # no runner-app config
    step = Step(exp.variants()[0], 1, exp.spec.stages[0], 1, 1)
    args = manifests.master_job(exp, step, DEFAULTS, ["10.0.0.7"])["spec"]["template"]["spec"]["containers"][0]["args"]
    opts = dict(itertools.pairwise(args))
    assert opts["--target-metrics"] == "http://10.0.0.7:8000/prometheus"
    assert opts["--target-counter"] == "flask_http_request_total"
    plain = experiment(target={"app": "httpbin:app"}, redis={"deploy": False})
    (container,) = runner_containers(plain)
    assert container["readinessProbe"] == {"tcpSocket": {"port": "http"}, "periodSeconds": 2}


def test_an_exec_probe_is_a_cluster_probe_and_refused_locally():
    from loadstage.local.target import local_problems
    exp = experiment(target={"livenessProbe": {"exec": {"command": ["cat", "/tmp/alive"]}, "periodSeconds": 5}})
    (container,) = runner_containers(exp)
    assert container["livenessProbe"] == {"exec": {"command": ["cat", "/tmp/alive"]}, "periodSeconds": 5}
    assert local_problems(exp) == [("spec.target.livenessProbe.exec", "the local engine runs no command in a "
                                    "target; use httpGet or tcpSocket, which it checks on the instance's own port")]


def test_every_pod_gets_requests_and_the_spec_overrides_the_operators_defaults():
    plain = experiment()
    v = plain.variants()[0]

    def resources(e, variant, defaults=DEFAULTS):
        step = Step(variant, 1, e.spec.stages[0], 1, 1)
        pods = {"runner": manifests.runner_deployment(e, variant, defaults),
                "redis": manifests.redis_deployment(e, variant, defaults),
                "master": manifests.master_job(e, step, defaults, ["10.0.0.7"]),
                "worker": manifests.workers_job(e, step, defaults)}
        return {k: d["spec"]["template"]["spec"]["containers"][0]["resources"] for k, d in pods.items()}

    assert resources(plain, v) == {
        "runner": {"requests": {"cpu": "100m", "memory": "128Mi"}},
        "redis": {"requests": {"cpu": "50m", "memory": "32Mi"}},
        "master": {"requests": {"cpu": "100m", "memory": "128Mi"}},
        "worker": {"requests": {"cpu": "100m", "memory": "128Mi"}}}
    sized = experiment(target={"resources": {"limits": {"memory": "1Gi"}}}, matrix={"cpu": ["250m", "500m"]},
                       redis={"resources": {"requests": {"memory": "64Mi"}}},
                       injectors={"resources": {"requests": {"cpu": "1"}, "limits": {"cpu": "1", "memory": "1Gi"}},
                                  "masterResources": {"requests": {"cpu": "200m"}}})
    got = resources(sized, sized.variants()[1])
    assert got["runner"] == {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": "500m", "memory": "1Gi"}}
    assert got["redis"] == {"requests": {"cpu": "50m", "memory": "64Mi"}}
    assert got["worker"] == {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}
    assert got["master"] == {"requests": {"cpu": "200m", "memory": "128Mi"}}
    assert manifests.resource_problems(sized, DEFAULTS.resources) == []
    # the chart may give limits; a spec request above one is refused, naming the field to set
    limited = replace(DEFAULTS.resources, locust_worker=Resources(ResourceList("100m"), ResourceList("1", "256Mi")))
    assert resources(plain, v, replace(DEFAULTS, resources=limited))["worker"] == {
        "requests": {"cpu": "100m"}, "limits": {"cpu": "1", "memory": "256Mi"}}
    big = experiment(injectors={"resources": {"requests": {"memory": "512Mi"}}})
    assert manifests.resource_problems(big, limited) == [(
        "spec.injectors.resources.requests.memory", "512Mi is above the limit 256Mi (a limit from the operator's "
        "defaults, the chart's experimentResources); set spec.injectors.resources.limits.memory too")]


def test_the_charts_experiment_resources_are_the_operators_defaults_and_checked_by_the_same_schema():
    values = yaml.safe_load((ROOT / "charts" / "loadstage" / "values.yaml").read_text())
    assert parse_pod_resources(json.dumps(values["experimentResources"])) == DEFAULT_POD_RESOURCES
    schema = json.loads((ROOT / "charts" / "loadstage" / "values.schema.json").read_text())
    assert schema["properties"]["experimentResources"] == experiment_resources_values_schema()
    with pytest.raises(ValidationError) as refused:
        parse_pod_resources('{"target": {"requests": {"cpu": "lots"}}, "redis": {}, "locustMaster": {}, '
                            '"locustWorker": {"limits": {"cpu": "100m"}}}')
    assert refused.value.problems == [
        ("experimentResources.target.requests.cpu", "must be a CPU quantity such as 500m or 2, got 'lots'"),
        ("experimentResources.locustWorker.limits.cpu", "must be at least 1, got 100m")]


def test_the_runner_pods_service_is_headless_over_the_runner_pods():
    e = experiment()
    deployment = manifests.runner_deployment(e, e.variants()[0], DEFAULTS)
    balanced, headless = manifests.runner_service(e), manifests.runner_pods_service(e)
    assert balanced["spec"].get("clusterIP") is None and headless["spec"]["clusterIP"] == "None"
    assert headless["metadata"]["name"] == "demo-runner-pods"
    assert headless["spec"]["selector"] == balanced["spec"]["selector"]
    assert headless["spec"]["selector"].items() <= deployment["spec"]["template"]["metadata"]["labels"].items()
    assert manifests.runner_metrics_urls(experiment(), ["10.244.0.7", "fd00::7"]) == ["http://10.244.0.7:8000/metrics",
                                                                       "http://[fd00::7]:8000/metrics"]


def test_external_redis_is_used_as_given_and_not_deployed():
    e = experiment(redis={"url": "redis://cache:6379/3"}, target={"image": "mine:2"})
    d = manifests.runner_deployment(e, e.variants()[0], DEFAULTS)
    env = {x["name"]: x["value"] for x in d["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["REDIS_URL"] == "redis://cache:6379/3"
    assert d["spec"]["template"]["spec"]["containers"][0]["image"] == "mine:2"


def test_stage_jobs_and_master_service():
    e = experiment(stages=[{"injectors": 10, "duration": "20m"}], warmup={"injectors": 2, "duration": "1m"})
    v = e.variants()[0]
    step = Step(v, 1, e.spec.stages[0], 1, 1)
    master = manifests.master_job(e, step, DEFAULTS, ["10.244.0.7", "10.244.0.8"])
    workers = manifests.workers_job(e, step, DEFAULTS)
    service = manifests.master_service(e, step)
    assert master["metadata"]["name"] == service["metadata"]["name"] == "demo-v1-s1-master"
    assert workers["metadata"]["name"] == "demo-v1-s1-workers"
    assert workers["spec"]["parallelism"] == workers["spec"]["completions"] == 10
    assert master["spec"]["parallelism"] == 1 and master["spec"]["backoffLimit"] == 0
    # the master waits for its workers as long as they may wait for a node (5m) and pull an image (2m)
    assert master["spec"]["activeDeadlineSeconds"] == 1200 + 300 + 120 + manifests.STAGE_DEADLINE_GRACE_SECONDS
    mc = master["spec"]["template"]["spec"]["containers"][0]
    assert mc["args"] == commands.locust_master_command(
        e, e.spec.stages[0], host="http://demo-runner:8000", summary_file="/dev/termination-log",
        artifact_file="-", target_metrics=["http://10.244.0.7:8000/metrics", "http://10.244.0.8:8000/metrics"],
        workers_wait=420, metrics_address="0.0.0.0", metrics_labels={
            "experiment": "demo", "namespace": "", "variant": "1", "settings": v.label(), "repeat": "1",
            "stage": "1"})
    assert mc["args"][mc["args"].index("--expect-workers-max-wait") + 1] == "420"
    # the live series, on a named port that a PodMonitor scrapes
    assert mc["args"][mc["args"].index("--metrics-port") + 1] == "9646"
    assert {"name": "metrics", "containerPort": 9646, "protocol": "TCP"} in mc["ports"]
    assert mc["terminationMessagePolicy"] == "FallbackToLogsOnError"
    assert service["spec"]["selector"].items() <= master["spec"]["template"]["metadata"]["labels"].items()
    assert service["spec"]["ports"][0]["port"] == 5557
    wc = workers["spec"]["template"]["spec"]["containers"][0]
    assert wc["args"] == commands.locust_worker_command(e, master_host="demo-v1-s1-master")
    assert wc["terminationMessagePolicy"] == "FallbackToLogsOnError"   # a crash's cause reaches the status
    assert workers["spec"]["backoffLimit"] == 0    # onLost: Fail
    tolerant = experiment(stages=[{"injectors": 10, "duration": "20m"}], injectors={"onLost": "Continue"})
    step = Step(tolerant.variants()[0], 1, tolerant.spec.stages[0], 1, 1)
    assert manifests.workers_job(tolerant, step, DEFAULTS)["spec"]["backoffLimit"] == 10
    warm = Step(v, 1, e.spec.warmup, None, 1)
    assert manifests.workers_job(e, warm, DEFAULTS)["metadata"]["name"] == "demo-v1-warmup-workers"


def test_custom_locustfile_comes_from_a_configmap_on_master_and_workers():
    e = experiment(injectors={"locustfile": {"configMap": {"name": "my-test", "key": "scenario.py"}}})
    step = Step(e.variants()[0], 1, e.spec.stages[0], 1, 1)
    for job in (manifests.master_job(e, step, DEFAULTS, ["10.244.0.7"]), manifests.workers_job(e, step, DEFAULTS)):
        pod = job["spec"]["template"]["spec"]
        assert {"name": "locustfile", "configMap": {
            "name": "my-test", "items": [{"key": "scenario.py", "path": "locustfile.py"}]}} in pod["volumes"]
        args = pod["containers"][0]["args"]
        assert args[args.index("-f") + 1] == "injectors/loadstage_results.py,/etc/loadstage/locustfile/locustfile.py"


def test_conditions_follow_the_phase_and_keep_transition_times():
    deploying = conditions_for(RunStatus(phase="Deploying", message="m"), [], 1, "t1")
    assert {c["type"]: c["status"] for c in deploying} == {
        "TargetReady": "False", "Running": "False", "Succeeded": "False", "Failed": "False"}
    running = conditions_for(RunStatus(phase="Running", message="stage 1"), deploying, 1, "t2")
    by_type = {c["type"]: c for c in running}
    assert by_type["Running"]["status"] == "True" and by_type["Running"]["lastTransitionTime"] == "t2"
    assert by_type["Failed"]["lastTransitionTime"] == "t1"
    failed = conditions_for(RunStatus(phase="Failed", reason="TargetNotReady", message="no"), running, 1, "t3")
    by_type = {c["type"]: c for c in failed}
    assert by_type["Failed"] == {"type": "Failed", "status": "True", "reason": "TargetNotReady", "message": "no",
                                 "lastTransitionTime": "t3", "observedGeneration": 1}
    assert by_type["TargetReady"]["status"] == "True" and by_type["Running"]["status"] == "False"


def test_metrics_server_quantities():
    from loadstage.kube.pod_metrics import parse_bytes as _parse_quantity_bytes
    from loadstage.kube.pod_metrics import parse_cpu as _parse_quantity_cpu
    assert _parse_quantity_cpu("250m") == 0.25 and _parse_quantity_cpu("1500000n") == 0.0015
    assert _parse_quantity_cpu("2") == 2.0
    assert _parse_quantity_bytes("128Mi") == 128 * 2**20 and _parse_quantity_bytes("1000") == 1000
    assert _parse_quantity_bytes("12k") == 12_000 and _parse_quantity_bytes("1Ti") == 2**40
    assert _parse_quantity_bytes("1.5Gi") == 3 * 2**29 and _parse_quantity_cpu("1200u") == 0.0012


def test_redis_password_comes_from_the_secret_for_redis_and_the_target():
    e = experiment(redis={"passwordSecret": {"name": "redis-auth"}})
    v = e.variants()[0]
    redis_container = manifests.redis_deployment(e, v, DEFAULTS)["spec"]["template"]["spec"]["containers"][0]
    assert "readinessProbe" not in redis_container and "livenessProbe" not in redis_container  # probes are clients
    assert redis_container["args"][-2:] == ["--requirepass", "$(REDIS_PASSWORD)"]
    secret_ref = {"name": "REDIS_PASSWORD", "valueFrom": {"secretKeyRef": {"name": "redis-auth", "key": "password"}}}
    assert secret_ref in redis_container["env"]
    runner = manifests.runner_deployment(e, v, DEFAULTS)["spec"]["template"]["spec"]["containers"][0]
    assert secret_ref in runner["env"]
    plain = experiment()
    assert "--requirepass" not in manifests.redis_deployment(plain, plain.variants()[0], DEFAULTS)[
        "spec"]["template"]["spec"]["containers"][0]["args"]



def test_a_deployed_redis_gets_a_password_derived_from_the_operators_key_and_the_experiments_uid():
    keyed = replace(DEFAULTS, redis_key=b"k" * 48)
    e = experiment()
    v = e.variants()[0]
    uid = "0a1b2c3d-4e5f-6789-abcd-ef0123456789"
    redis_container = manifests.redis_deployment(e, v, keyed, uid)["spec"]["template"]["spec"]["containers"][0]
    assert redis_container["args"][-2:] == ["--requirepass", "$(REDIS_PASSWORD)"]
    secret_ref = {"name": "REDIS_PASSWORD",
                  "valueFrom": {"secretKeyRef": {"name": "demo-redis-auth-0a1b2c3d", "key": "password"}}}
    assert secret_ref in redis_container["env"]
    assert secret_ref in manifests.runner_deployment(e, v, keyed, uid)["spec"]["template"]["spec"]["containers"][0][
        "env"]
    password = derived_password(keyed.redis_key, uid)
    secret = manifests.redis_auth_secret(e, uid, password)
    assert secret["metadata"]["name"] == "demo-redis-auth-0a1b2c3d" and secret["stringData"] == {"password": password}
    assert len(password) == 64 and derived_password(keyed.redis_key, uid) == password   # a restart finds it again
    assert password not in (derived_password(keyed.redis_key, uid.replace("0", "1")),
                            derived_password(b"j" * 48, uid))
    assert "k" * 48 not in repr(keyed)
    # the spec's own Secret wins; an external Redis, and an operator without a key, get none
    own = experiment(redis={"passwordSecret": {"name": "redis-auth"}})
    assert manifests.redis_password_ref(own, keyed, uid).name == "redis-auth"
    assert manifests.redis_password_ref(experiment(redis={"url": "redis://cache:6379/0"}), keyed, uid) is None
    assert "--requirepass" not in manifests.redis_deployment(e, v, DEFAULTS, uid)["spec"]["template"]["spec"][
        "containers"][0]["args"]


def test_the_operators_redis_key_is_refused_when_short_naming_the_variable():
    assert operator_key(None) is None and operator_key("") is None
    with pytest.raises(ValidationError, match="LOADSTAGE_REDIS_KEY: the key has 8 characters; at least 32"):
        operator_key("short-ky")

OPERATOR_PEER = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "loadstage-system"}},
                 "podSelector": {"matchLabels": {"app.kubernetes.io/name": "loadstage"}}}


def test_network_policies_admit_only_the_experiments_own_pods_the_operator_and_what_the_spec_allows():
    grafana = {"podSelector": {"matchLabels": {"app": "grafana-agent"}},
               "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
    e = experiment(target={"allowFrom": [grafana, {"ipBlock": {"cidr": "10.8.0.0/16"}}]})
    policies = {p["metadata"]["name"]: p["spec"] for p in manifests.network_policies(
        e, replace(DEFAULTS, operator_peer=OPERATOR_PEER), 8000)}
    assert set(policies) == {"demo-locust-master", "demo-redis", "demo-runner"}

    def peers(name):
        (rule,) = policies[name]["ingress"]
        return rule["from"], rule["ports"]

    def pods(role):
        return {"podSelector": {"matchLabels": {"loadstage.io/experiment": "demo", "loadstage.io/role": role}}}
    for name, role in (("demo-locust-master", "locust-master"), ("demo-redis", "redis"), ("demo-runner", "runner")):
        assert policies[name]["podSelector"] == pods(role)["podSelector"]
        assert policies[name]["policyTypes"] == ["Ingress"]
    assert peers("demo-locust-master") == ([pods("locust-worker")], [{"protocol": "TCP", "port": 5557}])
    assert peers("demo-redis") == ([pods("runner"), OPERATOR_PEER], [{"protocol": "TCP", "port": 6379}])
    assert peers("demo-runner") == ([pods("locust-master"), pods("locust-worker"), OPERATOR_PEER, grafana,
                                     {"ipBlock": {"cidr": "10.8.0.0/16"}}], [{"protocol": "TCP", "port": 8000}])


def test_no_network_policy_when_turned_off_and_none_for_a_deployment_held_in_place():
    assert manifests.network_policies(experiment(networkPolicies=False), DEFAULTS, 8000) == []
    held = experiment(target={"deployment": {"name": "shop", "mode": "InPlace"}, "server": "gunicorn"},
                      redis={"deploy": False})
    assert [p["metadata"]["name"] for p in manifests.network_policies(held, DEFAULTS, 8080)] == ["demo-locust-master"]


def test_an_allow_from_peer_must_say_whom_and_an_ip_block_stands_alone():
    with pytest.raises(ValidationError) as refused:
        experiment(target={"allowFrom": [{}, {"ipBlock": {"cidr": "10.0.0.0/8"},
                                              "podSelector": {"matchLabels": {"a": "b"}}}]})
    assert refused.value.problems == [
        ("spec.target.allowFrom[0]", "give podSelector, namespaceSelector or ipBlock"),
        ("spec.target.allowFrom[1]", "ipBlock stands alone: give it without podSelector and namespaceSelector")]


def test_the_operators_peer_comes_from_the_chart_as_json_and_bad_json_names_the_option():
    from loadstage.cli.operator import network_peer
    assert network_peer("--operator-peer", json.dumps(OPERATOR_PEER)) == OPERATOR_PEER
    assert network_peer("--operator-peer", None) is None
    for bad, said in (("{", "must be JSON"), ('{"ipBlock": {}}', "must be a NetworkPolicy peer")):
        with pytest.raises(ValidationError) as refused:
            network_peer("--monitoring-peer", bad)
        ((where, message),) = refused.value.problems
        assert where == "--monitoring-peer" and message.startswith(said)


def test_only_the_monitoring_peer_may_scrape_a_masters_live_series_and_nobody_without_one():
    monitoring = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
    e = experiment()
    alone = next(p for p in manifests.network_policies(e, DEFAULTS, 8000)
                 if p["metadata"]["name"] == "demo-locust-master")
    assert [rule["ports"][0]["port"] for rule in alone["spec"]["ingress"]] == [5557]
    scraped = next(p for p in manifests.network_policies(e, dataclasses.replace(DEFAULTS, monitoring_peer=monitoring),
                                                         8000) if p["metadata"]["name"] == "demo-locust-master")
    workers, scrapers = scraped["spec"]["ingress"]
    assert workers == alone["spec"]["ingress"][0]
    assert scrapers == {"from": [monitoring], "ports": [{"protocol": "TCP", "port": 9646}]}


@pytest.mark.parametrize("variants,stages,repeats", [(100, 5, 1), (100, 1, 5), (10, 5, 10), (1, 50, 10), (10, 25, 2)])
def test_every_name_of_the_longest_plans_the_crd_allows_fits_a_kubernetes_label(variants, stages, repeats):
    from loadstage.api.names import NAME_MAX
    from loadstage.engine.steps import plan, warmup_before
    threads = list(range(1, min(variants, 20) + 1))
    doc = {"apiVersion": "loadstage.io/v1alpha1", "kind": "LoadExperiment", "metadata": {"name": "x" * NAME_MAX},
           "spec": {"stages": [{"injectors": 1, "duration": "1m"}] * stages, "repeats": repeats,
                    "order": "Interleaved", "warmup": {"injectors": 1, "duration": "5s"},
                    "matrix": {"threads": threads, "workers": list(range(1, variants // len(threads) + 1))}}}
    exp = parse_experiment(doc)
    assert len(exp.variants()) == variants
    steps = plan(exp)
    longest = max((s for step in steps for s in (step, warmup_before(exp, step))), key=lambda s: len(s.run_id))
    retried = replace(longest, attempt=6)   # spec.stageRetries is at most 5
    for name in (manifests.master_name(exp, retried), manifests.workers_name(exp, retried),
                 manifests.results_name(exp, longest)):
        assert len(name) <= 63, name
