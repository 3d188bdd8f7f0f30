"""Experiment documents in: parse a LoadExperiment (from a file or a resource body) into the typed
model, or name every field that is wrong and why."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from loadstage.api.names import API_GROUP, API_VERSION, KIND
from loadstage.api.schema import Problems, ValidationError, key_path
from loadstage.api.servers import (
    BY_NAME,
    CHOOSE_INTERFACE,
    CUSTOM_SERVER,
    ONE_AT_A_TIME_CLASSES,
    ONE_PROCESS,
    ONE_THREAD,
    PROXIED_ONLY,
    SERVER_WORKER_CLASSES,
    TCP_ONLY,
    listing,
    names,
)
from loadstage.api.spec import METADATA, POD_RESOURCES, SPEC
from loadstage.api.types import (
    COMMAND_PLACEHOLDERS,
    DEFAULT_RUNNER_APP,
    NO_PROXY,
    Experiment,
    PodResources,
    Spec,
    command_placeholders,
    resolve_stages,
    server_of,
)
from loadstage.api.yaml_files import load_documents, read_utf8


def server_problems(spec: Spec) -> list[tuple[str, str]]:
    """What the chosen servers cannot express, each naming the field and the server."""
    t, m = spec.target, spec.matrix
    servers = (m and m.server) or [server_of(t)]
    problems = []
    class_field = "spec.matrix.workerClass" if m and m.worker_class else "spec.target.workerClass"
    server_field = "spec.matrix.server" if m and m.server else "spec.target.server"
    classes = (m and m.worker_class) or ([t.worker_class] if t.worker_class else [])
    classed = names(servers, lambda e: e.worker_classes)
    if classes and not classed and CUSTOM_SERVER not in servers:
        problems.append((class_field, f"a worker class is a {' or a '.join(SERVER_WORKER_CLASSES)} setting; "
                                      f"{', '.join(servers)} ({server_field}) has none"))
    for server in dict.fromkeys(classed) if classes else ():
        own = BY_NAME[server].classes
        if wrong := [c for c in classes if c not in own]:
            problems.append((class_field, f"{', '.join(wrong)} is not a worker class of {server} ({server_field}); "
                                          f"its classes are {', '.join(own)}"))
    workers = (m and m.workers) or ([t.workers] if t.workers is not None else [])
    workers_field = "spec.matrix.workers" if m and m.workers else "spec.target.workers"
    for server in ONE_PROCESS.of(servers):
        if any(w != 1 for w in workers):
            problems.append((workers_field, f"{server} ({server_field}) runs one process, so workers must be 1, "
                                            f"got {', '.join(map(str, workers))}; use threads or pods instead"))
    threads = (m and m.threads) or ([t.threads] if t.threads is not None else [])
    threads_field = "spec.matrix.threads" if m and m.threads else "spec.target.threads"
    for server in ONE_THREAD.of(servers):
        if any(n != 1 for n in threads):
            problems.append((threads_field, f"{server} ({server_field}) serves one request at a time per process, "
                                            f"so threads must be 1, got {', '.join(map(str, threads))}; use "
                                            f"workers or pods instead"))
    problems += _proxy_problems(spec, servers, server_field)
    for server in ONE_AT_A_TIME_CLASSES.of(servers):
        one = [c for c in classes if c in BY_NAME[server].one_at_a_time_classes]
        if one and any(n != 1 for n in threads):
            problems.append((threads_field, f"{server}'s {', '.join(one)} class ({class_field}) serves one request "
                                            f"at a time per process, so threads must be 1, got "
                                            f"{', '.join(map(str, threads))}"))
    if t.interface and not t.command and not set(servers) & set(CHOOSE_INTERFACE):
        problems.append(("spec.target.interface", f"{', '.join(servers)} ({server_field}) serves one interface; "
                                                  f"the interface is chosen for {listing(list(CHOOSE_INTERFACE))} "
                                                  f"only"))
    if t.command:
        for name, value in (("spec.target.server", t.server), ("spec.target.workerClass", t.worker_class),
                            ("spec.target.interface", t.interface),
                            ("spec.matrix.server", m and m.server),
                            ("spec.matrix.workerClass", m and m.worker_class)):
            if value:
                problems.append((name, "spec.target.command replaces the server: set one of them, not both"))
        problems += _command_problems(t.command)
    if t.runner_app and not spec.redis.used:
        problems.append(("spec.redis.deploy", f"the bundled runner app ({DEFAULT_RUNNER_APP}) keeps its sessions in "
                                              f"Redis: deploy one, or give a url; deploy: false without a url is for "
                                              f"an app of your own that uses no Redis"))
    return problems


def _proxy_problems(spec: Spec, servers: list[str], server_field: str) -> list[tuple[str, str]]:
    t, m = spec.target, spec.matrix
    proxies = (m and m.proxy) or [t.proxy.server if t.proxy else NO_PROXY]
    sockets = (m and m.socket) or [t.proxy.socket if t.proxy else "tcp"]
    proxy_field = "spec.matrix.proxy" if m and m.proxy else "spec.target.proxy"
    socket_field = "spec.matrix.socket" if m and m.socket else "spec.target.proxy.socket"
    problems = []
    unproxied = NO_PROXY in proxies
    if m and m.socket and proxies == [NO_PROXY]:
        problems.append((socket_field, "joins a proxy to the server, and no variant has one: set spec.target.proxy "
                                       "or spec.matrix.proxy"))
    elif unproxied and "unix" in sockets:
        problems.append((socket_field, f"unix joins a proxy to the server, and {proxy_field} has {NO_PROXY}: the "
                                       f"injectors speak TCP; list unix only where every variant has a proxy"))
    for server in PROXIED_ONLY.of(servers) if unproxied else ():
        problems.append((server_field, f"{server} speaks FastCGI, which Locust does not: it needs a front proxy "
                                       f"({proxy_field}: nginx or httpd)"))
    for server in TCP_ONLY.of(servers) if "unix" in sockets else ():
        problems.append((socket_field, f"{server} ({server_field}) listens on TCP only: use tcp"))
    if t.deployment is not None and (t.proxy or (m and m.proxy)):
        problems.append((proxy_field, "spec.target.deployment runs its own pods, and loadstage adds no proxy to "
                                      "them: put the proxy in the Deployment"))
    if t.command and "unix" in sockets and not any("{bind}" in arg.replace("{{", "") for arg in t.command):
        problems.append(("spec.target.command", "with a unix socket it must listen on {bind}, which is then "
                                                "unix:PATH ({host} and {port} are empty)"))
    return problems


def _command_problems(command: list[str]) -> list[tuple[str, str]]:
    problems, used = [], set()
    for i, arg in enumerate(command):
        path = f"spec.target.command[{i}]"
        try:
            names = command_placeholders(arg)
        except ValueError as error:
            problems.append((path, f"{error} in {arg!r}; write {{{{ and }}}} for a literal brace"))
            continue
        for name in names:
            if name not in COMMAND_PLACEHOLDERS:
                problems.append((path, f"unknown placeholder {{{name}}} (known: "
                                       f"{', '.join(f'{{{p}}}' for p in COMMAND_PLACEHOLDERS)})"))
        used.update(names)
    if not problems and not used & {"port", "bind"}:
        problems.append(("spec.target.command", "must listen on {port} or {bind}: the target's port comes "
                                                "from loadstage"))
    return problems


def _tolerant_metadata(raw: Any) -> Any:
    # Kubernetes adds many fields to metadata; the model reads only name and namespace.
    if isinstance(raw, dict):
        return {k: raw[k] for k in ("name", "namespace") if k in raw}
    return raw


def parse_experiment(doc: Any) -> Experiment:
    """Parses a LoadExperiment document; raises ValidationError naming every bad field."""
    problems = Problems()
    if not isinstance(doc, dict):
        raise ValidationError([("(document)", f"must be a LoadExperiment mapping, got {type(doc).__name__}")])
    expected = f"{API_GROUP}/{API_VERSION}"
    if doc.get("apiVersion") != expected:
        problems.add("apiVersion", f"must be {expected}, got {doc.get('apiVersion')!r}")
    if doc.get("kind") != KIND:
        problems.add("kind", f"must be {KIND}, got {doc.get('kind')!r}")
    for key in doc:
        if key not in ("apiVersion", "kind", "metadata", "spec", "status"):
            problems.add(key_path("", key), "unknown field (known: apiVersion, kind, metadata, spec)")
    if "metadata" not in doc:
        problems.add("metadata", "is required")
    if "spec" not in doc:
        problems.add("spec", "is required")
    metadata = METADATA.parse(_tolerant_metadata(doc.get("metadata")), "metadata", problems)
    spec = SPEC.parse(doc.get("spec"), "spec", problems) if "spec" in doc else None
    problems.raise_if_any()
    assert isinstance(spec, Spec)   # no problem: it parsed
    for path, message in server_problems(spec):
        problems.add(path, message)
    problems.raise_if_any()
    return Experiment(metadata=metadata, spec=resolve_stages(spec), source=doc)


def load_experiment_file(path: str | Path) -> Experiment:
    path = Path(path)
    docs = load_documents(read_utf8(path), str(path))
    if len(docs) != 1:
        raise ValidationError([(str(path), f"must hold exactly one LoadExperiment document, found {len(docs)}")])
    experiment = parse_experiment(docs[0])
    lf = experiment.spec.injectors.locustfile
    if lf is not None and lf.path is not None:
        resolved = (path.parent / lf.path).resolve()
        if not resolved.is_file():
            raise ValidationError([("spec.injectors.locustfile.path", f"file not found: {resolved}")])
        experiment = replace(experiment, spec=replace(experiment.spec, injectors=replace(
            experiment.spec.injectors, locustfile=replace(lf, path=str(resolved)))))
    return experiment


def parse_pod_resources(raw: Any, path: str = "experimentResources") -> PodResources:
    """The operator's default resources of each kind of pod (the chart's experimentResources, as JSON)."""
    if isinstance(raw, str):
        try:
            raw = yaml.safe_load(raw)
        except yaml.YAMLError as e:
            raise ValidationError([(path, f"is not JSON or YAML: {e}")]) from None
    problems = Problems()
    resources: PodResources = POD_RESOURCES.parse(raw, path, problems)
    problems.raise_if_any()
    return resources
