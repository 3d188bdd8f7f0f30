"""The `loadstage` command line: its subcommands, options and exit codes."""

from __future__ import annotations

import argparse
import os
import re

from loadstage.api.types import Autoscale
from loadstage.cli.argument_types import (
    confidence_arg,
    hold_arg,
    label_arg,
    loads_arg,
    percent_arg,
    port_arg,
    positive_arg,
    scale_arg,
    seconds_arg,
    share_arg,
    stage_duration_arg,
    tolerance_arg,
)
from loadstage.export.bundle import FORMATS
from loadstage.history.trends import MIN_ERROR_CHANGE
from loadstage.kube.manifests import Defaults
from loadstage.reports.pivot import FIGURES as PIVOT_FIGURES
from loadstage.results.change_points import MIN_CHANGE, P_VALUE, RECENT

EXIT_OK, EXIT_FAILED, EXIT_INVALID, EXIT_THRESHOLDS, EXIT_REGRESSION, EXIT_NOTHING_SUCCEEDED = 0, 1, 2, 3, 4, 5
REPORT_FORMATS = ("table", "markdown", "csv", "html")
HISTORY_FORMATS = ("table", "csv", "json", "html")
SUFFIX_FORMATS = {".md": "markdown", ".markdown": "markdown", ".csv": "csv", ".html": "html", ".htm": "html",
                  ".txt": "table"}
DEFAULT_IMAGES = Defaults(runner="loadstage/runner-app:0.1.0", injector="loadstage/injector:0.1.0",
                        redis="redis:7.2-alpine")


def history_options(parser: argparse.ArgumentParser, recording: bool = True) -> None:
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--history", metavar="URL",
                       help="the history: sqlite:///PATH or postgresql://USER@HOST/DB (default: $LOADSTAGE_HISTORY, "
                            "else $XDG_DATA_HOME/loadstage/history.sqlite)")
    if recording:
        where.add_argument("--no-history", action="store_true", help="do not record this run in the history")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="loadstage",
                                     description="Load-stage experiments for Python web apps (WSGI and ASGI).")
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run an experiment on this machine with real processes")
    run.add_argument("file", help="LoadExperiment YAML file")
    run.add_argument("-o", "--output", help="write the result (the resource with its status) to this "
                                            ".json or .yaml file, updated after every stage")
    run.add_argument("--stage-duration", type=stage_duration_arg, metavar="DURATION",
                     help="run every stage for this long instead (e.g. 10s)")
    run.add_argument("--warmup-duration", type=stage_duration_arg, metavar="DURATION",
                     help="run the warm-up stage (and spec.verify's) for this long instead")
    run.add_argument("--users-scale", type=scale_arg, metavar="FACTOR",
                     help="multiply users and spawn rate per injector by FACTOR (e.g. 0.1)")
    run.add_argument("--workdir", help="keep logs and per-stage files here (default: a temporary "
                                       "directory, removed after a successful run)")
    run.add_argument("--fail-on-threshold", action="store_true",
                     help=f"exit {EXIT_THRESHOLDS} if any stage failed its objective (thresholds or slo); with "
                          f"spec.search, if a variant's search failed at `from` or ran out of injectors; with "
                          f"spec.goal, if none met it or its pick's verification (spec.verify) broke it")
    run.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    run.add_argument("--metrics-port", type=port_arg, metavar="PORT",
                     help="serve the run's live Prometheus series on 127.0.0.1:PORT while it runs (docs/live.md)")
    run.add_argument("--metrics-hold", type=hold_arg, metavar="DURATION", default=0.0,
                     help="with --metrics-port, keep serving the final series this long after the run, for a "
                          "last scrape (e.g. 30s)")

    history_options(run)
    run.add_argument("--label", action="append", default=[], type=label_arg, metavar="KEY=VALUE",
                     help="a label of this run in the history (added to spec.history.labels), e.g. commit=$SHA; "
                          "repeatable")
    validate = sub.add_parser("validate", help="check an experiment file and show its plan")
    validate.add_argument("file")

    rep = sub.add_parser("report", help="the results of a run (a result file or lx/NAME in a cluster) as a table, "
                                        "Markdown, CSV or a self-contained HTML page with charts")
    rep.add_argument("source", help="a result file from `loadstage run -o`, or lx/NAME (current kubeconfig)")
    rep.add_argument("-n", "--namespace", help="namespace of lx/NAME (default: the kubeconfig context's)")
    rep.add_argument("--format", choices=REPORT_FORMATS,
                     help="table (default), markdown (the ONS layout), csv (a row per stage and variant) or html "
                          "(one file, charts inline); with -o FILE.md/.csv/.html the suffix picks it")
    rep.add_argument("-o", "--output", help="write to this file instead of standard output")
    rep.add_argument("--pivot", metavar="ROWS:COLUMN",
                     help="a study's own table instead: one figure of every stage, a row per combination of the "
                          "settings ROWS and a column per value of COLUMN (stage and users count as settings), "
                          "e.g. proxy,server:socket")
    rep.add_argument("--figure", choices=list(PIVOT_FIGURES), default="rps",
                     help="the --pivot table's figure (default rps); with 3 or more repeats, their trimmed mean")
    rep.add_argument("--follow", action="store_true",
                     help="print the table again whenever a stage finishes, until the run has ended; exits "
                          f"{EXIT_OK} if it Succeeded, {EXIT_FAILED} if it Failed")

    cmp = sub.add_parser("compare", help="the matching stages of two runs side by side; exits "
                                         f"{EXIT_REGRESSION} if one regressed")
    cmp.add_argument("base", help="the run to compare with: a result file, lx/NAME, or history:SERIES~N (N runs "
                                  "before the series' newest), history:SERIES (its newest) or history:UID")
    cmp.add_argument("new", help="the run to judge: a result file, lx/NAME or history:...")
    history_options(cmp, recording=False)
    cmp.add_argument("-n", "--namespace", help="namespace of lx/NAME (default: the kubeconfig context's)")
    cmp.add_argument("--tolerance", default="10%", type=tolerance_arg,
                     help="how much worse a figure may get before it counts (default 10%%): p99 and p99.9 up, "
                          "throughput down, the error rate up")
    cmp.add_argument("--confidence", default="95%", type=confidence_arg,
                     help="how sure a regression must be (default 95%%): the interval of the change, from both "
                          "runs' confidence intervals, must leave zero out; each of the stage's judged figures "
                          "is held to 1 - (1 - confidence) / figures")
    cmp.add_argument("--format", choices=("table", "markdown"), default="table",
                     help="table (default) or markdown (for a pull-request comment)")

    art = sub.add_parser("artifacts", help="write every stage's histograms and rows (a result file or lx/NAME) "
                                           "to a directory")
    art.add_argument("source", help="a result file from `loadstage run -o`, or lx/NAME (current kubeconfig)")
    art.add_argument("-n", "--namespace", help="namespace of lx/NAME (default: the kubeconfig context's)")
    art.add_argument("-o", "--output", default="artifacts", help="directory to write to (default: artifacts)")

    hist = sub.add_parser("history", help="the runs kept in the history: `history [SERIES]` lists a series' runs, "
                                          f"`history check [SERIES]` exits {EXIT_REGRESSION} where the newest run "
                                          "is past a change that made a figure worse")
    hist.add_argument("words", nargs="*", metavar="[check] [SERIES]",
                      help="a series (an experiment's name, or its spec.history.series); none: the only one, or a "
                           "list of them (check: every one)")
    history_options(hist, recording=False)
    hist.add_argument("--format", choices=HISTORY_FORMATS, default="table",
                      help="the runs as a table, CSV, JSON, or one offline HTML page with each figure drawn over "
                           "the runs")
    hist.add_argument("-o", "--output", help="write to this file instead of standard output")
    hist.add_argument("--last", type=positive_arg, metavar="N", help="only the newest N runs")
    hist.add_argument("--p-value", type=share_arg, default=P_VALUE, metavar="P",
                      help=f"check: a change point is kept where Student's t-test between its sides is under P "
                           f"(default {P_VALUE:g})")
    hist.add_argument("--min-change", type=percent_arg, default=MIN_CHANGE, metavar="PERCENT",
                      help=f"check: a latency or capacity change smaller than this is not reported (default "
                           f"{MIN_CHANGE:.0%})")
    hist.add_argument("--min-error-change", type=percent_arg, default=MIN_ERROR_CHANGE, metavar="PERCENT",
                      help=f"check: an error rate's, in percentage points (default {MIN_ERROR_CHANGE:.1%})")
    hist.add_argument("--recent", type=positive_arg, default=RECENT, metavar="RUNS",
                      help=f"check: a change with more runs after it than this is history, not news (default "
                           f"{RECENT})")
    exp = sub.add_parser("export", help="the recommended variant (or --variant N) as a patch of your Deployment: a "
                                        "kustomize overlay or Helm values, and with --autoscale an HPA")
    exp.add_argument("source", help="a result file from `loadstage run -o`, or lx/NAME (current kubeconfig)")
    exp.add_argument("-n", "--namespace", help="namespace of lx/NAME (default: the kubeconfig context's)")
    exp.add_argument("--as", dest="format", choices=FORMATS, default="kustomize",
                     help="kustomize: an overlay (kustomization.yaml, deployment-patch.yaml, hpa.yaml) over --base; "
                          "helm: values.yaml in helm create's shape; manifests: the whole Deployment loadstage "
                          "deployed (deployment.yaml, hpa.yaml)")
    exp.add_argument("-o", "--output", default="recommendation", help="directory to write to (default: "
                                                                       "recommendation)")
    exp.add_argument("--variant", type=positive_arg, metavar="N",
                     help="this variant (from 1), not the recommended one")
    exp.add_argument("--deployment", metavar="FILE", help="your Deployment's manifest: its container's command line "
                                                          "is rewritten where it sets workers or threads")
    exp.add_argument("--container", help="the container to set (default: the Deployment's first, else 'app')")
    exp.add_argument("--name", help="the Deployment's name, without --deployment (default: the experiment's)")
    exp.add_argument("--base", default="../base", help="kustomize: the overlay's base (default: ../base)")
    exp.add_argument("--autoscale", type=loads_arg, metavar="MIN:MAX",
                     help="the traffic to serve, req/s: adds a HorizontalPodAutoscaler sized from the measurements "
                          "(default: the run's spec.autoscale)")
    exp.add_argument("--headroom", type=percent_arg, default=Autoscale.headroom, metavar="PERCENT",
                     help=f"of a pod's capacity kept free (default {Autoscale.headroom * 100:g}%%)")
    exp.add_argument("--growth", type=float, metavar="RPS_PER_S",
                     help="how fast the load may rise, req/s a second: checks the headroom covers a scale-up")
    exp.add_argument("--ready-seconds", type=seconds_arg, default=Autoscale.ready_seconds, metavar="SECONDS",
                     help=f"from a new pod's creation to serving (default {Autoscale.ready_seconds:g}s)")
    ver = sub.add_parser("verify", help="run a result's recommendation again on this machine, as exported, at the "
                                        "load the export promises a pod, and record whether the objective holds "
                                        "(status.verification)")
    ver.add_argument("source", help="a result file from `loadstage run -o` of a spec.goal in req/s")
    ver.add_argument("-o", "--output", help="write the result with its status.verification here (default: back "
                                            "into SOURCE)")
    ver.add_argument("--warmup-duration", type=stage_duration_arg, metavar="DURATION",
                     help="warm up for this long before the verified stage (default: the run's warm-up's, else 10s)")
    ver.add_argument("--workdir", help="keep logs and per-stage files here (default: a temporary directory)")
    ver.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    sub.add_parser("crd", help="print the LoadExperiment CustomResourceDefinition")
    sub.add_parser("reference", help="print the experiment field reference (Markdown), from the same schema")

    op = sub.add_parser("operator", help="run the Kopf operator against the current cluster")
    scope = op.add_mutually_exclusive_group(required=True)
    scope.add_argument("-n", "--namespace", action="append", dest="namespaces", metavar="NAMESPACE",
                       help="watch this namespace (repeatable)")
    scope.add_argument("-A", "--all-namespaces", action="store_true", help="watch every namespace")
    op.add_argument("--liveness-port", type=int, default=8080,
                    help="serve the liveness probe on http://ADDRESS:PORT/healthz (0: off)")
    op.add_argument("--listen-address", default="0.0.0.0",
                    help="address of the liveness and metrics servers (default 0.0.0.0: every interface of "
                         "the pod; 127.0.0.1 for an operator run on a workstation)")
    op.add_argument("--runner-image", default=os.environ.get("LOADSTAGE_RUNNER_IMAGE", DEFAULT_IMAGES.runner))
    op.add_argument("--injector-image",
                    default=os.environ.get("LOADSTAGE_INJECTOR_IMAGE", DEFAULT_IMAGES.injector))
    op.add_argument("--redis-image", default=os.environ.get("LOADSTAGE_REDIS_IMAGE", DEFAULT_IMAGES.redis))
    op.add_argument("--experiment-resources", default=os.environ.get("LOADSTAGE_EXPERIMENT_RESOURCES"),
                    metavar="JSON", help="requests and limits of each kind of pod, where an experiment sets none: "
                                         "{target, redis, locustMaster, locustWorker} (the chart's "
                                         "experimentResources; default: requests only, 50m-100m CPU)")
    op.add_argument("--operator-peer", default=os.environ.get("LOADSTAGE_OPERATOR_PEER"), metavar="JSON",
                    help="the operator's own pods as a NetworkPolicy peer ({namespaceSelector, podSelector}; the "
                         "chart sets it), allowed into each experiment's Redis and target")
    op.add_argument("--monitoring-peer", default=os.environ.get("LOADSTAGE_MONITORING_PEER"), metavar="JSON",
                    help="who may scrape the Locust masters' live series, as a NetworkPolicy peer (the chart's "
                         "metrics.serviceMonitor.namespace); without it, nobody may")
    op.add_argument("--redis-sample-url", default=os.environ.get("LOADSTAGE_REDIS_SAMPLE_URL"),
                    help="sample Redis connections at this URL instead of the experiment's Redis Service "
                         "(for an operator outside the cluster, e.g. through kubectl port-forward)")
    op.add_argument("--metrics-port", type=int, default=0,
                    help="serve the operator's Prometheus metrics on this port (0: off)")
    op.add_argument("--history-url", default=os.environ.get("LOADSTAGE_HISTORY_URL"), metavar="URL",
                    help="record each finished experiment into this history (postgresql://USER@HOST/DB; its password "
                         "in PGPASSWORD); default $LOADSTAGE_HISTORY_URL, else none")
    op.add_argument("--leader-elect", action="store_true",
                    help="run as one of several replicas: only the holder of a Lease runs experiments, the others "
                         "stand by and take over when it is gone")
    op.add_argument("--leader-elect-namespace", default=os.environ.get("POD_NAMESPACE") or "default",
                    help="namespace of the Lease (default: $POD_NAMESPACE, else default)")
    op.add_argument("--leader-elect-lease", default="loadstage-operator", help="name of the Lease")
    op.add_argument("-v", "--verbose", action="store_true")
    for command in (parser, *sub.choices.values()):
        # argparse reads `-5s` as an option, and says only "expected one argument"; no option of loadstage starts
        # with a digit, so the value reaches its rule, which names it
        command._negative_number_matcher = re.compile(r"^-\d")
    return parser
