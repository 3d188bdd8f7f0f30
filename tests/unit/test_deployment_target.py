"""An existing Deployment as the target, as pure functions: the settings set on a container loadstage did
not build, the Copy and InPlace pod templates, and the JSON patches that hold and restore a Deployment
and its HPA."""

import copy
import json

import jsonpatch
import pytest

from loadstage.api.load import parse_experiment
from loadstage.kube import deployment_target as dt
from loadstage.kube.manifests import Defaults
from loadstage.kube.server_settings import SettingsNotSettable, apply_server_settings
from loadstage.samplers.worker_log import workers_started
from support.documents import BASE

DEFAULTS = Defaults(runner="r:1", injector="i:1", redis="redis:7")
ORIGINAL = {
    "apiVersion": "apps/v1", "kind": "Deployment",
    "metadata": {"name": "shop", "namespace": "team", "resourceVersion": "4711", "generation": 3,
                 "labels": {"app": "shop"}},
    "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "shop"}}, "template": {
        "metadata": {"labels": {"app": "shop", "tier": "web"}, "annotations": {"sidecar": "off"}},
        "spec": {"serviceAccountName": "shop", "initContainers": [{"name": "migrate", "image": "shop:7"}],
                 "volumes": [{"name": "conf", "configMap": {"name": "shop-conf"}}],
                 "containers": [
                     {"name": "proxy", "image": "envoy:1", "ports": [{"containerPort": 9901}]},
                     {"name": "web", "image": "shop:7", "args": ["gunicorn", "-w", "4", "shop.wsgi"],
                      "env": [{"name": "GUNICORN_CMD_ARGS", "value": "--timeout 60 --threads 8"}],
                      "envFrom": [{"configMapRef": {"name": "shop-env"}}],
                      "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                      "readinessProbe": {"httpGet": {"path": "/health", "port": 8080}},
                      "resources": {"requests": {"cpu": "200m", "ephemeral-storage": "1Gi"}}}]}}}}


def experiment(mode="Copy", matrix=None, **target):
    return parse_experiment({**BASE, "spec": {
        **BASE["spec"], "redis": {"deploy": False},
        "target": {"deployment": {"name": "shop", "container": "web", "mode": mode}, **target},
        **({"matrix": matrix} if matrix else {})}})


def web(template):
    return next(c for c in template["spec"]["containers"] if c["name"] == "web")


def test_copy_keeps_the_pod_template_and_sets_the_variants_settings_labels_and_resources():
    e = experiment(threads=3, server="gunicorn", matrix={"workers": [2, 5], "cpu": ["1"]})
    copied = dt.copy_deployment(e, e.variants()[1], ORIGINAL, DEFAULTS)
    template = copied["spec"]["template"]
    assert copied["metadata"]["name"] == "demo-runner" and copied["spec"]["replicas"] == 1
    assert copied["spec"]["selector"]["matchLabels"] == {"loadstage.io/experiment": "demo",
                                                        "loadstage.io/role": "runner"}
    assert "app" not in template["metadata"]["labels"]          # the user's Services never select the copy
    assert template["metadata"]["annotations"] == {"sidecar": "off", "loadstage.io/variant": "2"}
    for kept in ("serviceAccountName", "initContainers", "volumes"):
        assert template["spec"][kept] == ORIGINAL["spec"]["template"]["spec"][kept]
    container = web(template)
    assert container["args"] == ["gunicorn", "-w", "5", "shop.wsgi"]           # its own flag, rewritten
    assert {"name": "GUNICORN_CMD_ARGS", "value": "--timeout 60 --threads 3"} in container["env"]   # merged
    assert container["envFrom"] == [{"configMapRef": {"name": "shop-env"}}]
    assert container["readinessProbe"] == {"httpGet": {"path": "/health", "port": 8080}}
    assert container["resources"] == {"requests": {"ephemeral-storage": "1Gi", "cpu": "1"}, "limits": {"cpu": "1"}}
    assert next(c for c in template["spec"]["containers"] if c["name"] == "proxy") == \
        ORIGINAL["spec"]["template"]["spec"]["containers"][0]
    assert dt.server_port(e, ORIGINAL) == 8080
    assert ORIGINAL["spec"]["template"]["metadata"]["labels"] == {"app": "shop", "tier": "web"}   # not mutated


def test_unset_workers_and_threads_leave_the_container_as_it_is():
    e = experiment()
    assert (e.variants()[0].workers, e.variants()[0].threads) == (None, None)
    container = web(dt.copy_deployment(e, e.variants()[0], ORIGINAL, DEFAULTS)["spec"]["template"])
    assert container["args"] == ["gunicorn", "-w", "4", "shop.wsgi"]
    assert container["env"] == [{"name": "GUNICORN_CMD_ARGS", "value": "--timeout 60 --threads 8"}]
    assert container["resources"] == {"requests": {"cpu": "200m", "ephemeral-storage": "1Gi"}}


@pytest.mark.parametrize("server,container,expected", [
    ("gunicorn", {"command": ["/entrypoint.sh"]},
     {"command": ["/entrypoint.sh"], "env": [{"name": "GUNICORN_CMD_ARGS", "value": "--workers 3 --threads 2"}]}),
    ("uwsgi", {"args": ["uwsgi", "--processes=8", "--http", ":8000"]},
     {"args": ["uwsgi", "--processes=3", "--http", ":8000"], "env": [{"name": "UWSGI_THREADS", "value": "2"}]}),
    ("granian", {"args": ["granian", "app:app"]},
     {"args": ["granian", "app:app"], "env": [{"name": "GRANIAN_WORKERS", "value": "3"},
                                              {"name": "GRANIAN_BLOCKING_THREADS", "value": "2"}]}),
    ("waitress", {"command": ["/venv/bin/waitress-serve", "--port=8080", "app:app"]},
     {"command": ["/venv/bin/waitress-serve", "--threads=2", "--port=8080", "app:app"]}),
    ("gunicorn", {"args": ["gunicorn", "-w4", "--threads=8", "app:app"]},
     {"args": ["gunicorn", "-w3", "--threads=2", "app:app"]}),
    # an ASGI app's threads: its sync thread pool, which it reads from its environment
    ("uvicorn", {"args": ["uvicorn", "--workers", "8", "app:app"]},
     {"args": ["uvicorn", "--workers", "3", "app:app"], "env": [{"name": "LOADSTAGE_SYNC_THREADS", "value": "2"}]}),
    ("gunicorn/uvicorn", {"args": ["gunicorn", "-k", "uvicorn.workers.UvicornWorker", "app:app"]},
     {"args": ["gunicorn", "-k", "uvicorn_worker.UvicornWorker", "app:app"],
      "env": [{"name": "LOADSTAGE_SYNC_THREADS", "value": "2"},
              {"name": "GUNICORN_CMD_ARGS", "value": "--workers 3"}]}),
    ("hypercorn/uvloop", {"command": ["hypercorn", "-w", "1", "app:app"]},
     {"command": ["hypercorn", "--worker-class", "uvloop", "-w", "3", "app:app"],
      "env": [{"name": "LOADSTAGE_SYNC_THREADS", "value": "2"}]}),
    ("granian/asgi", {"args": ["granian", "--interface", "asgi", "app:app"]},
     {"args": ["granian", "--interface", "asgi", "app:app"],
      "env": [{"name": "LOADSTAGE_SYNC_THREADS", "value": "2"}, {"name": "GRANIAN_WORKERS", "value": "3"}]}),
])
def test_each_server_gets_workers_and_threads_the_way_it_reads_them(server, container, expected):
    workers = 1 if server == "waitress" else 3
    server, _, choice = server.partition("/")
    chosen = {"interface": choice} if choice in ("wsgi", "asgi") else {"workerClass": choice} if choice else {}
    e = parse_experiment({**BASE, "spec": {**BASE["spec"], "redis": {"deploy": False}, "target": {
        "deployment": {"name": "x"}, "server": server, "workers": workers, "threads": 2, **chosen}}})
    assert apply_server_settings({"name": "web", **container}, e.variants()[0], e.spec.target.interface) == \
        {"name": "web", **expected}


def test_a_setting_loadstage_cannot_reach_is_refused_naming_why():
    e = parse_experiment({**BASE, "spec": {**BASE["spec"], "redis": {"deploy": False}, "target": {
        "deployment": {"name": "x"}, "server": "cheroot", "workers": 1, "threads": 4}}})
    with pytest.raises(SettingsNotSettable, match="do not run cheroot \\(an entrypoint script\\?\\)"):
        apply_server_settings({"name": "web", "command": ["/start.sh"]}, e.variants()[0])
    g = experiment(workers=3, server="gunicorn")
    with pytest.raises(SettingsNotSettable, match="runs its server from a shell string"):
        apply_server_settings({"name": "web", "command": ["sh", "-c", "exec gunicorn -w 4 app:app"]}, g.variants()[0])
    with pytest.raises(SettingsNotSettable, match="GUNICORN_CMD_ARGS comes from a Secret or ConfigMap"):
        apply_server_settings({"name": "web", "command": ["/start.sh"], "env": [
            {"name": "GUNICORN_CMD_ARGS", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}}}]},
            g.variants()[0])


def test_missing_container_and_port_name_the_field():
    e = parse_experiment({**BASE, "spec": {**BASE["spec"], "redis": {"deploy": False}, "target": {
        "deployment": {"name": "shop", "container": "api"}}}})
    with pytest.raises(dt.TargetDeploymentInvalid, match=r"spec\.target\.deployment\.container: Deployment shop has "
                                                         r"no container 'api' \(it has proxy, web\)"):
        dt.server_port(e, ORIGINAL)
    portless = copy.deepcopy(ORIGINAL)
    del portless["spec"]["template"]["spec"]["containers"][1]["ports"]
    with pytest.raises(dt.TargetDeploymentInvalid, match=r"spec\.target\.deployment\.port: container web"):
        dt.server_port(experiment(), portless)


def test_in_place_holds_with_a_snapshot_once_and_restores_exactly():
    e = experiment("InPlace", server="gunicorn", matrix={"workers": [2, 3]}, resources={"limits": {"memory": "1Gi"}})
    who = dt.holder(e, "team", "uid-1")
    held = copy.deepcopy(ORIGINAL)
    for variant in e.variants():
        template = dt.variant_template(e, variant, dt.as_it_was(held, "uid-1"), DEFAULTS, keep_labels=True)
        assert template == dt.variant_template(e, variant, ORIGINAL, DEFAULTS, keep_labels=True)   # never stacked
        # the Deployment's selector, and whatever selects its pods, still matches: only loadstage's keys are added
        assert template["metadata"]["labels"] == {"app": "shop", "tier": "web", "loadstage.io/experiment": "demo",
                                                  "loadstage.io/role": "runner"}
        held = jsonpatch.apply_patch(held, dt.hold_patch(held, template, 5, who))
        held["metadata"]["generation"] += 1
        assert held["spec"]["replicas"] == 5 and web(held["spec"]["template"])["args"][2] == str(variant.workers)
    snapshot = dt.held_by(held)      # the first hold's: the original, not variant 1's
    assert snapshot["experiment"] == "team/demo" and snapshot["uid"] == "uid-1"
    assert snapshot["template"] == ORIGINAL["spec"]["template"] and snapshot["replicas"] == 2
    restored = jsonpatch.apply_patch(held, dt.release_patch(held))
    assert restored["spec"] == ORIGINAL["spec"]
    assert "loadstage.io/in-place" not in restored["metadata"].get("annotations", {})
    stale = copy.deepcopy(held)
    stale["metadata"]["generation"] = 1
    with pytest.raises(jsonpatch.JsonPatchTestFailed):   # another writer in between: the API server refuses
        jsonpatch.apply_patch(held, [*dt.release_patch(stale)])


def test_an_hpa_is_pinned_and_restored():
    hpa = {"metadata": {"name": "shop", "resourceVersion": "9"},     # an HPA keeps no generation
           "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "shop"},
                    "minReplicas": 2, "maxReplicas": 10}}
    assert dt.scales(hpa, "shop") and not dt.scales(hpa, "cart")
    pinned = jsonpatch.apply_patch(hpa, dt.pin_patch(hpa, 4, {"experiment": "team/demo", "uid": "u"}))
    assert (pinned["spec"]["minReplicas"], pinned["spec"]["maxReplicas"]) == (4, 4)
    assert json.loads(pinned["metadata"]["annotations"]["loadstage.io/in-place"])["minReplicas"] == 2
    assert jsonpatch.apply_patch(pinned, dt.release_patch(pinned)) == {**hpa, "metadata": {**hpa["metadata"],
                                                                                          "annotations": {}}}


def test_the_workers_a_server_says_it_started():
    log = "[INFO] Starting gunicorn 23.0.0\n[INFO] Booting worker with pid: 7\n[INFO] Booting worker with pid: 8\n"
    assert workers_started("gunicorn", log) == 2
    assert workers_started("uwsgi", "spawned uWSGI worker 1 (pid: 9, cores: 2)\n") == 1
    assert workers_started("granian", "anything") is None


def test_a_patch_refused_with_a_bare_422_is_retried_only_when_the_object_changed_in_between():
    """An HPA's controller rewrites its status between the read and the pin: the API server's 422 may not say
    that the test failed, and the pin must read the HPA again rather than fail the experiment."""
    from kubernetes.client.rest import ApiException

    from loadstage.kube.in_place import _patch_fresh
    versions = iter(["2", "3"])
    patched = []

    def read():
        return {"metadata": {"resourceVersion": next(versions)}}

    def patch(obj):
        if obj["metadata"]["resourceVersion"] == "1":
            raise ApiException(status=422, reason="the server rejected our request due to an error in our request")
        patched.append(obj["metadata"]["resourceVersion"])
    assert _patch_fresh(read, patch, {"metadata": {"resourceVersion": "1"}})["metadata"]["resourceVersion"] == "2"
    assert patched == ["2"]

    def refuse(obj):
        raise ApiException(status=422, reason="spec.minReplicas: Invalid value")
    with pytest.raises(ApiException):   # refused for itself: the object had not changed
        _patch_fresh(lambda: {"metadata": {"resourceVersion": "7"}}, refuse, {"metadata": {"resourceVersion": "7"}})
