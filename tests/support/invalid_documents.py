"""Documents the API server must refuse, each with what its error says (the field, or for a rule across fields its
message): the cluster tier applies them to a real API server, and the unit tier runs the same list through the
parser, so that a rule one half refuses and the other accepts fails a test."""

import yaml

from support.waiting import ROOT


def example(name):
    return yaml.safe_load((ROOT / "examples" / f"{name}.yaml").read_text())


def _search(**spec_changes):
    """The cluster ladder as a capacity search, then changed; a change to None removes the field."""
    doc = _variant(**{k: v for k, v in spec_changes.items() if v is not None})
    doc["spec"].setdefault("slo", {"p99": "300ms"})
    search = {"load": "users", "from": 10, "max": 200, "duration": "30s"}
    doc["spec"]["search"] = {k: v for k, v in {**search, **doc["spec"].get("search", {})}.items() if v is not None}
    for key in ("stages", "thresholds"):   # the ladder's, and its objective: slo is the search's
        if key not in spec_changes:
            del doc["spec"][key]
    for key in [k for k, v in spec_changes.items() if v is None]:
        del doc["spec"][key]
    return doc


def _goal(**spec_changes):
    """The cluster ladder as a goal over two threads, then changed; a change to None removes the field."""
    doc = _variant(**{k: v for k, v in spec_changes.items() if v is not None})
    spec = doc["spec"]
    spec.setdefault("goal", {"injectors": 2})
    spec.setdefault("slo", {"p99": "300ms"})
    spec.setdefault("stageEnd", {"when": "Decided", "max": "1m"})
    spec.setdefault("matrix", {"threads": [1, 2]})
    for key in ("stages", "thresholds"):
        if key not in spec_changes:
            del spec[key]
    for key in [k for k, v in spec_changes.items() if v is None]:
        del spec[key]
    return doc


def _variant(**spec_changes):
    doc = example("cluster-ladder")
    for path, value in spec_changes.items():
        node = doc["spec"]
        keys = path.split("__")
        for key in keys[:-1]:
            node = node.setdefault(key, {}) if not key.isdigit() else node[int(key)]
        node[keys[-1] if not keys[-1].isdigit() else int(keys[-1])] = value
    return doc


INVALID = [
    (_variant(stages=[]), "spec.stages: Invalid value: 0: spec.stages in body should have at least 1 items"),
    (_variant(stages__0__injectors=0), "spec.stages[0].injectors: Invalid value: 0"),
    (_variant(stages__1__duration="20 minutes"), "spec.stages[1].duration: Invalid value: \"20 minutes\""),
    (_variant(stages__1__duration=600), "spec.stages[1].duration: Invalid value: \"integer\""),
    (_variant(target__pods=0), "spec.target.pods: Invalid value: 0"),
    (_variant(target__threads=100), "spec.target.threads: Invalid value: 100"),
    (_variant(target__workerClass="eventlet"), "spec.target.workerClass: Unsupported value"),
    (_variant(injectors__waitTime={"min": "3s", "max": "1s"}), "spec.injectors.waitTime: Invalid value: \"object\": min must be <= max"),
    (_variant(injectors__usersPerInjector=-1), "spec.injectors.usersPerInjector: Invalid value: -1"),
    (_variant(redis={"deploy": True, "url": "redis://x:6379"}), "spec.redis: Invalid value: \"object\": set either deploy: true or url, not both"),
    (_variant(redis={"deploy": False}), "spec: Invalid value: \"object\": the bundled runner app keeps its sessions in "
                                        "Redis: spec.redis.deploy: false without a url is for an app of your own"),
    (_variant(target={"app": "mine:app"}, redis={"deploy": False, "passwordSecret": {"name": "s"}}),
     "spec.redis: Invalid value: \"object\": passwordSecret needs a Redis: deploy one, or give a url"),
    (_variant(target={"readinessProbe": {"exec": {"command": ["true"]}, "httpGet": {"path": "/"}}}),
     "spec.target.readinessProbe: Invalid value: \"object\": set exactly one of httpGet, tcpSocket or exec"),
    (_variant(redis={"url": "http://x"}), "spec.redis.url: Invalid value: \"http://x\""),
    (_variant(matrix={"threads": [2, 2]}), "spec.matrix.threads[1]: Duplicate value: 2"),
    (_variant(matrix={"threads": []}), "spec.matrix.threads: Invalid value: 0"),
    (_variant(matrix={"workers": list(range(1, 12)), "threads": list(range(1, 11))}),
     "spec.matrix: Invalid value: \"object\": at most 100 variants"),
    (_variant(thresholds={"errorRate": "150"}), "spec.thresholds.errorRate: Invalid value: \"150\""),
    (_variant(thresholds={"p99": "fast"}), "spec.thresholds.p99: Invalid value: \"fast\""),
    (_variant(injectors__scenario="respondent", injectors__locustfile={"configMap": {"name": "x"}}),
     "spec.injectors: Invalid value: \"object\": set either scenario or locustfile, not both"),
    (_variant(cleanup="Sometimes"), "spec.cleanup: Unsupported value: \"Sometimes\""),
    (_variant(target__readyTimeout="2h"), "spec.target.readyTimeout: Invalid value: \"string\": must be at most 1h"),
    (_variant(matrix={"workers": list(range(1, 11)), "threads": list(range(1, 11))},
              stages=[{"injectors": n, "duration": "1m"} for n in range(1, 7)]),
     "spec: Invalid value: \"object\": at most 500 stages in all (variants x stages x repeats)"),
    (_variant(repeats=11), "spec.repeats: Invalid value: 11"),
    (_variant(order="Shuffled"), "spec.order: Unsupported value: \"Shuffled\""),
    (_variant(seed=-1), "spec.seed: Invalid value: -1"),
    (_variant(matrix={"threads": list(range(1, 11))}, repeats=10,
              stages=[{"injectors": n, "duration": "1m"} for n in range(1, 7)]),
     "spec: Invalid value: \"object\": at most 500 stages in all (variants x stages x repeats)"),
    (_variant(injectors__pacing="5ms"), "spec.injectors.pacing: Invalid value: \"string\": must be at least 10ms"),
    (_variant(stages__0__users=50),
     "spec.stages[0]: Invalid value: \"object\": set either injectors or users, not both"),
    (_variant(stages=[{"duration": "1m"}]), "spec.stages[0]: Invalid value: \"object\": set injectors, users or arrivalRate"),
    (_variant(stages=[{"users": 5, "arrivalRate": 100, "duration": "1m"}]),
     "spec.stages[0].arrivalRate: Invalid value: \"object\": users (a closed model) and arrivalRate (an open model)"),
    (_variant(stages=[{"arrivalRate": 100, "requests": 1000}]),
     "spec.stages[0].requests: Invalid value: \"object\": arrivalRate starts tasks on a schedule"),
    (_variant(stages=[{"arrivalRate": 0, "duration": "1m"}]), "spec.stages[0].arrivalRate: Invalid value: 0"),
    (_variant(injectors__pacing="1s", stages=[{"injectors": 2, "arrivalRate": 100, "duration": "1m"}]),
     "spec: Invalid value: \"object\": spec.injectors.pacing and an arrivalRate"),
    (_variant(injectors__maxRatePerInjector=10, stages=[{"arrivalRate": 10001, "duration": "1m"}]),
     "spec: Invalid value: \"object\": a stage given in users or in arrivalRate alone needs at most 1000 injectors"),
    (_variant(stages=[{"injectors": 1}]),
     "spec.stages[0]: Invalid value: \"object\": set duration, requests, or both (duration is then the time limit)"),
    (_variant(stages=[{"injectors": 1, "requests": 0}]), "spec.stages[0].requests: Invalid value: 0"),
    (_variant(injectors__keepAlive="no"), "spec.injectors.keepAlive: Invalid value: \"string\""),
    (_variant(stages=[{"users": 100001, "duration": "1m"}]),
     "spec: Invalid value: \"object\": a stage given in users or in arrivalRate alone needs at most 1000 injectors"),
    (_variant(injectors__maxUsersPerInjector=2, stages=[{"users": 2001, "duration": "1m"}]),
     "spec: Invalid value: \"object\": a stage given in users or in arrivalRate alone needs at most 1000 injectors"),
    (_variant(target__server="tornado"), "spec.target.server: Unsupported value: \"tornado\""),
    (_variant(matrix={"server": ["gunicorn", "bjoern"], "threads": [1, 4]}),
     "spec: Invalid value: \"object\": bjoern and meinheld serve one request at a time per process: threads"),
    (_variant(target__server="waitress"),   # the example's workers: 2
     "spec: Invalid value: \"object\": waitress and cheroot run one process: workers"),
    (_variant(matrix={"server": ["uwsgi", "granian"], "workerClass": ["sync"]}),
     "spec: Invalid value: \"object\": a worker class (spec.target.workerClass or spec.matrix.workerClass) is a "
     "gunicorn or a flup or a hypercorn setting"),
    (_variant(target={"server": "flup", "proxy": {"server": "nginx"}}, matrix={"workerClass": ["sync"]}),
     "spec: Invalid value: \"object\": a worker class (spec.target.workerClass or spec.matrix.workerClass) is a "
     "gunicorn or a flup or a hypercorn setting"),
    (_variant(target__server="flup"), "spec: Invalid value: \"object\": flup speaks FastCGI, not HTTP: it needs a "
                                      "front proxy"),
    (_variant(matrix={"proxy": ["none", "nginx"], "socket": ["unix"]}),
     "spec: Invalid value: \"object\": a unix socket (spec.target.proxy.socket or spec.matrix.socket) joins a proxy "
     "to the server: every variant needs a proxy"),
    (_variant(target={"server": "mod_wsgi", "proxy": {"server": "nginx", "socket": "unix"}}),
     "spec: Invalid value: \"object\": mod_wsgi listens on TCP only: no unix socket"),
    (_variant(target={"server": "flup", "workerClass": "prefork", "threads": 4, "proxy": {"server": "nginx"}}),
     "spec: Invalid value: \"object\": flup's prefork class serves one request at a time per process: threads"),
    (_variant(target__proxy={"server": "haproxy"}), "spec.target.proxy.server: Unsupported value: \"haproxy\""),
    (_variant(matrix={"socket": ["tcp", "pipe"]}), "spec.matrix.socket[1]: Unsupported value: \"pipe\""),
    (_variant(target__command=["hypercorn", "{port}"], matrix={"server": ["uwsgi"]}),
     "spec: Invalid value: \"object\": spec.target.command replaces the server"),
    (_variant(target__resources={"limits": {"cpu": "2 cores"}}),
     "spec.target.resources.limits.cpu: Invalid value: \"2 cores\""),
    (_variant(target__resources={"requests": {"memory": "2Gi"}, "limits": {"memory": "1Gi"}}),
     "spec.target.resources: Invalid value: \"object\": a request must not be above its limit"),
    (_variant(matrix={"cpu": ["5m"]}), "spec.matrix.cpu[0]: Invalid value: \"\": must be at least 10m"),
    (_variant(matrix={"cpu": [0.5]}), "spec.matrix.cpu[0]: Invalid value: \"number\""),
    (_variant(injectors__resources={"limits": {"cpu": "500m"}}),
     "spec.injectors.resources.limits.cpu: Invalid value: \"\": must be at least 1"),
    (_variant(target__command=["hypercorn", "--bind", "{bind}", "{prot}"]),
     "spec: Invalid value: \"object\": spec.target.command must listen on {port} or {bind}, and use only the "
     "placeholders"),
    (_search(stages=[{"injectors": 1, "duration": "1m"}]),
     "spec: Invalid value: \"object\": give spec.stages (a ladder), spec.search (a capacity search) or spec.goal"),
    (_search(search=None), "spec: Invalid value: \"object\": give spec.stages (a ladder), spec.search"),
    (_search(slo=None), "spec: Invalid value: \"object\": spec.search needs spec.slo"),
    (_search(thresholds={"p99": "1s"}),
     "spec: Invalid value: \"object\": spec.slo and spec.thresholds are both objectives"),
    (_search(slo={}), "spec.slo: Invalid value: \"object\": give at least one objective"),
    (_search(repeats=3), "spec: Invalid value: \"object\": spec.search runs each variant's own search once"),
    (_search(order="Interleaved"), "spec: Invalid value: \"object\": spec.search decides each variant's next stage"),
    (_search(search__max=10), "spec.search.max: Invalid value: \"object\": max must be above from"),
    (_search(search__resolution="0.0%"),
     "spec.search.resolution: Invalid value: \"object\": resolution must be above 0%"),
    (_search(search__load="bytes"), "spec.search.load: Unsupported value: \"bytes\""),
    (_search(search__load="rps", search__max=500_001),
     "spec: Invalid value: \"object\": a stage given in users or in arrivalRate alone needs at most 1000 injectors"),
    (_search(search__load="rps", injectors__pacing="1s"),
     "spec: Invalid value: \"object\": spec.injectors.pacing and an arrivalRate"),
    (_search(search__load="injectors", search__max=1001),
     "spec.search.max: Invalid value: \"object\": a search over injectors goes up to at most 1000"),
    (_search(stageEnd={"when": "Decided"}, search={"duration": None}),
     "spec: Invalid value: \"object\": spec.search.duration is required, unless spec.stageEnd (when: Decided) "
     "gives a max"),
    (_variant(stageEnd={"when": "Decided"}),
     "spec: Invalid value: \"object\": spec.stageEnd.when: Decided needs spec.slo"),
    (_variant(stageEnd={"when": "Decided"}, slo={"p99": "1s"}, thresholds=None, repeats=2),
     "spec: Invalid value: \"object\": spec.stageEnd.when: Decided judges each stage at its own looks"),
    (_search(stageEnd={"when": "Decided", "min": "2m", "max": "1m"}),
     "spec.stageEnd.min: Invalid value: \"object\": min must be at most max"),
    (_search(search__max=2001, injectors__maxUsersPerInjector=2),
     "spec: Invalid value: \"object\": a stage given in users or in arrivalRate alone needs at most 1000 injectors"),
    (_goal(stages=[{"injectors": 1, "duration": "1m"}]),
     "spec: Invalid value: \"object\": give spec.stages (a ladder), spec.search (a capacity search) or spec.goal"),
    (_goal(slo=None), "spec.goal: Invalid value: \"object\": spec.goal needs spec.slo"),
    (_goal(matrix=None), "spec.matrix: Invalid value: \"object\": spec.goal picks one of spec.matrix's variants"),
    (_goal(stageEnd={"when": "Decided"}), "spec.stageEnd: Invalid value: \"object\": spec.goal runs each variant one "
                                          "stage at its load, ended once decided"),
    (_goal(goal={"rps": 10, "users": 10}), "spec.goal: Invalid value: \"object\": give one load (rps, users or "
                                           "injectors), or maximize"),
    (_goal(order="Random"), "spec.order: Invalid value: \"object\": spec.goal picks the variants' order itself"),
    (_goal(goal={"maximize": "capacityPerCore"}), "spec.goal: Invalid value: \"object\": spec.goal.maximize "
                                                  "compares the variants' capacities: it needs spec.search"),
    (_goal(matrix={"threads": list(range(1, 21)), "workers": list(range(1, 21)), "pods": [1, 2, 3]}),
     "spec.matrix: Invalid value: \"object\": at most 100 variants (the product of all list lengths), or 1000 "
     "with spec.goal"),
]
