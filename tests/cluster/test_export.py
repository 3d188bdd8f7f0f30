"""`loadstage export --as kustomize` of a real local run's recommendation over a team's own Deployment: kubectl's
own kustomize builds it (the team's image, sidecar, env and selector kept, its server's settings rewritten), and
the API server takes the Deployment and the HPA."""

import subprocess
import sys

import yaml

from support.waiting import ROOT

TEAMS = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "shop", "labels": {"app": "shop"}},
         "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "shop"}}, "template": {
             "metadata": {"labels": {"app": "shop"}},
             "spec": {"containers": [
                 {"name": "web", "image": "registry.example/shop:1.4",
                  "command": ["gunicorn", "--bind", "0.0.0.0:8000", "-w", "4", "shop.wsgi"],
                  "env": [{"name": "DJANGO_SETTINGS_MODULE", "value": "shop.settings"}]},
                 {"name": "log-shipper", "image": "registry.example/shipper:2"}]}}}}


def test_an_overlay_over_a_teams_deployment_builds_with_kubectl_and_the_api_server_takes_it(cluster, namespace,
                                                                                              tmp_path):
    base = tmp_path / "base"
    base.mkdir()
    (base / "deployment.yaml").write_text(yaml.safe_dump(TEAMS))
    (base / "kustomization.yaml").write_text(yaml.safe_dump({"resources": ["deployment.yaml"]}))
    exported = subprocess.run([sys.executable, "-m", "loadstage.cli", "export", ROOT / "tests/data/results/goal.json",
                               "--deployment", base / "deployment.yaml", "--autoscale", "50:600", "-o",
                               tmp_path / "overlay"], capture_output=True, text=True, cwd=tmp_path)
    assert exported.returncode == 0, exported.stderr
    assert "50 to 600 req/s: 1 to 7 replicas, CPU target 61% of 250m" in exported.stdout, exported.stdout

    built = cluster.kubectl("kustomize", str(tmp_path / "overlay"), check=True).stdout
    deployment, hpa = sorted(yaml.safe_load_all(built), key=lambda d: d["kind"])
    web, shipper = deployment["spec"]["template"]["spec"]["containers"]
    assert web["image"] == "registry.example/shop:1.4" and shipper["name"] == "log-shipper"
    assert web["command"] == ["gunicorn", "--bind", "0.0.0.0:8000", "-w", "2", "shop.wsgi"]
    assert sorted(web["env"], key=lambda e: e["name"]) == [
        {"name": "DJANGO_SETTINGS_MODULE", "value": "shop.settings"},
        {"name": "GUNICORN_CMD_ARGS", "value": "--threads 4 --worker-class gthread"}]
    assert web["resources"] == {"requests": {"cpu": "250m"}, "limits": {"cpu": "250m"}}
    assert deployment["spec"]["selector"] == TEAMS["spec"]["selector"]
    assert "measured at stage 1 at 120 rps" in deployment["metadata"]["annotations"]["loadstage.io/recommendation"]
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (1, 7)

    applied = cluster.kubectl("apply", "-k", str(tmp_path / "overlay"), "-n", namespace)
    assert applied.returncode == 0, applied.stderr
    kept = cluster.apps.read_namespaced_deployment("shop", namespace)
    assert kept.spec.template.spec.containers[0].command[4] == "2"
    scaler = cluster.api_autoscaling().read_namespaced_horizontal_pod_autoscaler("shop", namespace)
    assert (scaler.spec.min_replicas, scaler.spec.max_replicas) == (1, 7)
    assert scaler.spec.metrics[0].resource.target.average_utilization == 61


def test_whole_manifests_of_the_app_loadstage_deployed_are_taken_by_the_api_server_with_their_hpa(cluster,
                                                                                                  namespace,
                                                                                                  tmp_path):
    exported = subprocess.run([sys.executable, "-m", "loadstage.cli", "export", ROOT / "tests/data/results/goal.json",
                               "--as", "manifests", "--autoscale", "50:600", "--ready-seconds", "45s", "-o",
                               tmp_path / "manifests"], capture_output=True, text=True, cwd=tmp_path)
    assert exported.returncode == 0, exported.stderr
    assert sorted(p.name for p in (tmp_path / "manifests").iterdir()) == ["deployment.yaml", "hpa.yaml"]
    applied = cluster.kubectl("apply", "-f", str(tmp_path / "manifests"), "-n", namespace)
    assert applied.returncode == 0, applied.stderr
    name = yaml.safe_load((tmp_path / "manifests" / "deployment.yaml").read_text())["metadata"]["name"]
    kept = cluster.apps.read_namespaced_deployment(name, namespace)
    assert "--threads" in kept.spec.template.spec.containers[0].args
    scaler = cluster.api_autoscaling().read_namespaced_horizontal_pod_autoscaler(name, namespace)
    assert scaler.spec.scale_target_ref.name == name
    (policy,) = scaler.spec.behavior.scale_down.policies   # one pod each 15 + 15 + 45 s
    assert (policy.type, policy.value, policy.period_seconds) == ("Pods", 1, 75)
