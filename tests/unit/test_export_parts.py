"""`loadstage export`'s pure parts: which variant and stage, the autoscaler's derivation, the patch of a team's own
container, and bad input refused naming the option."""

import argparse
import dataclasses
import json

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from loadstage.api.schema import ValidationError
from loadstage.api.types import Autoscale
from loadstage.cli import main
from loadstage.cli.export import _own_container
from loadstage.cli.parser import DEFAULT_IMAGES
from loadstage.export import autoscaler, bundle, files
from loadstage.export.choice import ExportRefused, choose
from loadstage.kube.server_settings import SettingsNotSettable
from loadstage.reports import sources
from support.waiting import ROOT

RESULTS = ROOT / "tests" / "data" / "results"


def run_of(name):
    source = str(RESULTS / f"{name}.json")
    document = sources.load_document(source)
    return sources.experiment_of(source, document), sources.results_of(source, document)


def test_the_recommended_variant_is_chosen_with_the_stage_it_met_the_goal_at_a_lower_bound_of_its_capacity():
    chosen = choose(*run_of("goal"), None)
    assert (chosen.variant.index, chosen.variant.threads, chosen.variant.cpu) == (2, 4, "250m")
    assert chosen.why.startswith("recommended: threads=4 cpu=250m meets p99")
    # one stage at the goal's load, none above it failed: it met the objective there, its knee is not known
    assert not chosen.evidence.at_capacity and chosen.evidence.rps_per_pod == 119.82
    assert chosen.evidence.line() == ("stage 1 at 120 rps: 119.82 req/s [101, 133.9], p99 39.4199 ms [37.49, 44.27], "
                                      "CPU 0.192 cores (met the objective; 95% intervals)")


def test_a_searched_variant_is_sized_from_its_bracket_pass_end():
    chosen = choose(*run_of("search"), 2)
    assert chosen.evidence.at_capacity and chosen.evidence.stage.arrival_rate == 150
    assert chosen.title() == "variant 2 (threads=2), as asked"


@pytest.mark.parametrize("run, variant, said", [
    ("search", None, "the run has no recommendation (spec.goal picks one): give --variant N (1 to 2)"),
    ("goal", 9, "--variant 9: the run has variants 1 to 4"),
    ("goal", 1, "variant 1 has no stage that met the objective: nothing to size from"),
])
def test_nothing_to_export_is_refused_saying_why(run, variant, said):
    with pytest.raises(ExportRefused) as refused:
        choose(*run_of(run), variant)
    assert str(refused.value) == said


ASKED = Autoscale(min_load=50, max_load=600, headroom=0.2, growth=1.0, ready_seconds=30)


def test_the_autoscaler_is_derived_from_a_pods_capacity_and_its_cpu_there():
    scaler = autoscaler.derive(ASKED, per_pod=100.0, per_pod_cpu=0.2, cpu_request="250m")
    # a pod is given 80 req/s: 50 -> 1 pod, 600 -> 8; at 80 req/s it uses 0.16 cores, 64% of 250m
    assert (scaler.min_replicas, scaler.max_replicas, scaler.cpu_target_percent) == (1, 8, 64)
    # 1 req/s a second for 15 + 15 + 30 s is 60 req/s, against one pod's 100: 60% headroom
    assert scaler.headroom_needed == pytest.approx(0.6)
    assert "too little: give --headroom 60%" in scaler.lines(ASKED)[2]
    hpa = autoscaler.hpa("shop", scaler, "from a test", ASKED)
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "shop"}
    assert hpa["spec"]["metrics"][0]["resource"]["target"] == {"type": "Utilization", "averageUtilization": 64}
    # a scale-down removes a pod at most as fast as one comes back: 15 s sync + 15 s metrics + 30 s ready
    assert hpa["spec"]["behavior"]["scaleDown"] == {"stabilizationWindowSeconds": 300, "policies": [
        {"type": "Pods", "value": 1, "periodSeconds": 60}]}
    slow = autoscaler.hpa("shop", scaler, "", dataclasses.replace(ASKED, ready_seconds=3600))
    assert slow["spec"]["behavior"]["scaleDown"]["policies"][0]["periodSeconds"] == 1800   # the API's most


def test_without_a_cpu_request_one_is_recommended_and_a_pod_limited_by_its_threads_is_said_to_be():
    scaler = autoscaler.derive(ASKED, per_pod=100.0, per_pod_cpu=0.113, cpu_request=None)
    assert scaler.cpu_request == "120m" and scaler.cpu_target_percent == 75
    weak = autoscaler.derive(ASKED, per_pod=100.0, per_pod_cpu=0.113, cpu_request="500m")
    assert weak.cpu_target_percent == 18 and any("weak signal" in note for note in weak.notes)


TEAMS = {"name": "web", "image": "shop:1.4", "command": ["gunicorn", "-w", "4", "shop.wsgi"],
         "env": [{"name": "DJANGO_SETTINGS_MODULE", "value": "shop.settings"}]}


def test_a_teams_own_container_is_patched_with_only_what_changes():
    chosen = choose(*run_of("goal"), None)
    scaler = autoscaler.derive(ASKED, 119.82, 0.192, "250m")
    patch = files.deployment_patch("shop", TEAMS, chosen, scaler, "note")
    (container,) = patch["spec"]["template"]["spec"]["containers"]
    # its -w rewritten in place; what its command line does not set goes to gunicorn's variable; no image
    assert container == {"name": "web", "command": ["gunicorn", "-w", "2", "shop.wsgi"],
                         "env": [{"name": "GUNICORN_CMD_ARGS", "value": "--threads 4 --worker-class gthread"}],
                         "resources": {"requests": {"cpu": "250m"}, "limits": {"cpu": "250m"}}}
    assert "replicas" not in patch["spec"], "the HPA owns the replicas"
    assert files.deployment_patch("shop", TEAMS, chosen, None, "note")["spec"]["replicas"] == 1
    values = files.helm_values(TEAMS, chosen, scaler)
    assert values["autoscaling"] == {"enabled": True, "minReplicas": 1, "maxReplicas": 7,
                                     "targetCPUUtilizationPercentage": 61}
    assert values["command"][2] == "2" and values["env"][0] == TEAMS["env"][0]


def test_whole_manifests_are_the_deployment_loadstage_ran_with_the_autoscaler_over_its_effective_request():
    experiment, status = run_of("goal")
    made = bundle.build(experiment, status, source="goal.json", shape="manifests", own=bundle.Own("x", {}),
                        defaults=DEFAULT_IMAGES, asked=ASKED)
    assert list(made.files) == ["deployment.yaml", "hpa.yaml"]
    deployment, hpa = made.files["deployment.yaml"], made.files["hpa.yaml"]
    (server,) = deployment["spec"]["template"]["spec"]["containers"]
    assert "--threads" in server["args"] and server["args"][server["args"].index("--threads") + 1] == "4"
    # the resources it ran with: the variant's CPU (request and limit) over the operator's default memory request
    assert server["resources"] == {"requests": {"cpu": "250m", "memory": "128Mi"}, "limits": {"cpu": "250m"}}
    assert "replicas" not in deployment["spec"], "the HPA owns them"
    assert hpa["spec"]["scaleTargetRef"]["name"] == deployment["metadata"]["name"]
    assert made.scaler is not None and made.scaler.cpu_request == "250m"
    assert deployment["metadata"]["annotations"][files.ANNOTATION].startswith("goal.json, variant 3 (threads=4 "
                                                                                "cpu=250m), recommended: ")
    own = experiment.spec.target
    owned = dataclasses.replace(experiment, spec=dataclasses.replace(
        experiment.spec, target=dataclasses.replace(own, deployment=object())))
    with pytest.raises(ExportRefused, match="exported --as kustomize, a patch of it"):
        bundle.build(owned, status, source="goal.json", shape="manifests", own=bundle.Own("x", {}),
                     defaults=DEFAULT_IMAGES)


def test_a_run_with_spec_autoscale_is_exported_with_its_autoscaler_without_the_option(tmp_path, capsys):
    source = tmp_path / "goal.json"
    document = json.loads((RESULTS / "goal.json").read_text())
    document["spec"]["goal"] = {"rps": 120}
    document["spec"]["autoscale"] = {"minLoad": 50, "maxLoad": 600, "headroom": "30%"}
    source.write_text(json.dumps(document))
    assert main(["export", str(source), "-o", str(tmp_path / "out")]) == 0
    hpa = yaml.safe_load((tmp_path / "out" / "hpa.yaml").read_text())
    # 119.82 req/s a pod, 30% kept free: 83.9 req/s a pod; 50 -> 1, 600 -> 8
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (1, 8)
    assert "with 30% headroom it is given 83.87 req/s" in capsys.readouterr().out


def at_two_pods(rps, interval):
    """goal.json with its runner-up turned into the winner's settings at 2 pods, serving `rps` [interval]."""
    experiment, status = run_of("goal")
    twin = status.variants[3]
    twin.settings = {**status.variants[2].settings, "pods": 2}
    twin.stages[0] = dataclasses.replace(twin.stages[0], rps=rps, intervals={**twin.stages[0].intervals,
                                                                           "rps": interval})
    return experiment, status


@pytest.mark.parametrize("rps, interval, per_pod, said", [
    # 2 pods at 230 req/s [200, 262]: 115 a pod [100, 131], within the 1-pod interval [101, 133.9]
    (230.0, [200.0, 262.0], 119.82, "linear within the intervals: 119.8 req/s a pod at 1 pod [101, 133.9]; "
                                    "115 req/s a pod at 2 pods [100, 131]"),
    # 2 pods at 160 req/s [150, 170]: 80 a pod [75, 85], below the 1-pod interval: sized from 80
    (160.0, [150.0, 170.0], 80.0, "not linear: 119.8 req/s a pod at 1 pod [101, 133.9]; 80 req/s a pod at 2 pods "
                                  "[75, 85]; sized from the lowest, at 2 pods"),
])
def test_where_the_run_measured_two_pod_counts_a_pod_is_sized_from_the_lower_unless_they_agree(rps, interval,
                                                                                               per_pod, said):
    made = bundle.build(*at_two_pods(rps, interval), source="goal.json", shape="kustomize",
                        own=bundle.Own("shop", TEAMS), defaults=DEFAULT_IMAGES, asked=ASKED)
    assert made.scaler is not None and made.scaler.per_pod == per_pod
    assert made.scaler.notes[0] == said
    assert said in made.lines()


GOAL_WINNER = choose(*run_of("goal"), None)


def args_for(path, container=None):
    return argparse.Namespace(deployment=str(path), container=container, name=None)


ANYTHING = st.recursive(st.none() | st.integers() | st.text(max_size=8),
                        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
                            st.sampled_from(["name", "value", "kind", "spec", "containers"]), inner, max_size=3),
                        max_leaves=8)
CONTAINERS = st.fixed_dictionaries({"name": st.text(min_size=1, max_size=5)}, optional={
    "command": ANYTHING | st.lists(st.sampled_from(["gunicorn", "-w", "4", "--threads=2", "app:app"]), max_size=5),
    "args": ANYTHING, "env": ANYTHING | st.lists(st.fixed_dictionaries({"name": st.text(max_size=3)}), max_size=2)})
DEPLOYMENTS = st.builds(lambda containers: {"kind": "Deployment", "metadata": {"name": "shop"},
                                            "spec": {"template": {"spec": {"containers": containers}}}},
                        st.lists(CONTAINERS, max_size=2)) | st.dictionaries(
    st.sampled_from(["kind", "metadata", "spec"]), ANYTHING, max_size=3)


@settings(max_examples=150, deadline=None)
@given(DEPLOYMENTS)
def test_a_damaged_deployment_manifest_is_refused_naming_the_option_or_read(tmp_path_factory, shape):
    path = tmp_path_factory.mktemp("d") / "deployment.yaml"
    path.write_text(yaml.safe_dump({**shape, "kind": "Deployment"}))
    try:
        name, container = _own_container(args_for(path))
    except ValidationError as e:
        assert [p for p, _ in e.problems] in (["--deployment"], ["--container"]), e.problems
        return
    try:   # what was read is patched, or the server's settings are refused naming why
        patch = files.deployment_patch(name, container, GOAL_WINNER, None, "note")
    except SettingsNotSettable:
        return
    assert patch["spec"]["template"]["spec"]["containers"][0]["name"] == container["name"]


def test_a_file_of_two_deployments_or_a_missing_container_is_refused(tmp_path):
    two = tmp_path / "two.yaml"
    one = {"kind": "Deployment", "metadata": {"name": "shop"}, "spec": {"template": {"spec": {"containers": [TEAMS]}}}}
    two.write_text(yaml.safe_dump_all([one, one]))
    with pytest.raises(ValidationError) as refused:
        _own_container(args_for(two))
    assert refused.value.problems == [("--deployment", f"{two} holds 2 Deployments: give a file with one")]
    empty = tmp_path / "empty.yaml"
    empty.write_text(yaml.safe_dump({**one, "spec": {"template": {"spec": {"containers": []}}}}))
    with pytest.raises(ValidationError) as refused:
        _own_container(args_for(empty))
    assert refused.value.problems == [("--deployment", f"{empty}: a Deployment needs metadata.name and a container")]
    single = tmp_path / "one.yaml"
    single.write_text(yaml.safe_dump(one))
    with pytest.raises(ValidationError) as refused:
        _own_container(args_for(single, "api"))
    assert refused.value.problems == [("--container", "'api' is not a container of Deployment shop (web)")]


def test_a_server_read_only_from_its_command_line_is_refused_without_the_teams_manifest(tmp_path, capsys):
    from loadstage.cli import main
    code = main(["export", str(RESULTS / "servers.json"), "--variant", "3", "-o", str(tmp_path / "out")])
    assert code == 2 and not (tmp_path / "out").exists()
    assert capsys.readouterr().err == (
        f"error: {RESULTS / 'servers.json'}: waitress reads threads only from its command line, and the container's "
        f"command and args do not run waitress-serve (an entrypoint script?); loadstage cannot set it there; give "
        f"--deployment FILE, your Deployment's manifest\n")
