"""Each server's entry (api.servers) is what the parser refuses, the defaults a variant gets, and the command
line it runs: every case below is generated from the entries, so a new entry is checked without a new test."""

import copy

import pytest

from loadstage.api import parse_experiment
from loadstage.api.schema import ValidationError
from loadstage.api.servers import ENTRIES, Launch, listing
from loadstage.api.spec import SERVER_RULES
from support.documents import BASE

NAMES = [e.name for e in ENTRIES]
NGINX = {"server": "nginx"}


def target(entry, **settings):
    """The entry's server, behind a proxy where it needs one."""
    return {"server": entry.name, **({"proxy": NGINX} if entry.protocol != "http" else {}), **settings}


def parsed(spec_target):
    doc = copy.deepcopy(BASE)
    doc["spec"]["target"] = spec_target
    return parse_experiment(doc)


def problems(spec_target):
    with pytest.raises(ValidationError) as e:
        parsed(spec_target)
    return [f"{p}: {m}" for p, m in e.value.problems]


@pytest.mark.parametrize("entry", ENTRIES, ids=NAMES)
def test_each_server_takes_its_defaults_and_runs_its_own_program(entry):
    (variant,) = parsed(target(entry)).variants()
    assert variant.workers == (2 if entry.workers else 1)
    assert variant.worker_class == (entry.classes[0] if entry.worker_classes else None)
    assert variant.threads == (1 if entry.one_at_a_time(variant.worker_class) else 2)
    argv = entry.command(Launch("shop.wsgi:application", variant.workers, variant.threads, variant.worker_class,
                                ("127.0.0.1:8000",)))
    assert argv[0] == entry.program and "shop.wsgi" in " ".join(argv)


@pytest.mark.parametrize("entry", [e for e in ENTRIES if not e.workers], ids=lambda e: e.name)
def test_a_server_of_one_process_refuses_workers_naming_the_field(entry):
    assert f"spec.target.workers: {entry.name} (spec.target.server) runs one process, so workers must be 1, got 3; " \
           f"use threads or pods instead" in problems(target(entry, workers=3))


@pytest.mark.parametrize("entry", [e for e in ENTRIES if not e.threads], ids=lambda e: e.name)
def test_a_server_of_one_request_at_a_time_refuses_threads_naming_the_field(entry):
    assert any(p.startswith(f"spec.target.threads: {entry.name} (spec.target.server) serves one request at a time")
               for p in problems(target(entry, threads=4)))


@pytest.mark.parametrize("entry,klass", [(e, c) for e in ENTRIES for c in e.worker_classes if c.one_at_a_time],
                         ids=lambda x: getattr(x, "name", ""))
def test_a_class_of_one_request_at_a_time_refuses_threads(entry, klass):
    assert f"spec.target.threads: {entry.name}'s {klass.name} class (spec.target.workerClass) serves one request " \
           f"at a time per process, so threads must be 1, got 4" in problems(
               target(entry, workerClass=klass.name, threads=4))


@pytest.mark.parametrize("entry", [e for e in ENTRIES if not e.unix_socket], ids=lambda e: e.name)
def test_a_server_on_tcp_only_refuses_a_unix_socket(entry):
    assert f"spec.target.proxy.socket: {entry.name} (spec.target.server) listens on TCP only: use tcp" in problems(
        target(entry, proxy={"server": "nginx", "socket": "unix"}))


@pytest.mark.parametrize("entry", [e for e in ENTRIES if e.protocol != "http"], ids=lambda e: e.name)
def test_a_server_that_speaks_no_http_needs_a_proxy(entry):
    assert any(p.startswith(f"spec.target.server: {entry.name} speaks FastCGI") for p in problems(
        {"server": entry.name}))


@pytest.mark.parametrize("entry", ENTRIES, ids=NAMES)
def test_a_worker_class_of_another_server_is_refused(entry):
    foreign = next(c for e in ENTRIES for c in e.classes if c not in entry.classes)
    assert any(p.startswith("spec.target.workerClass: ") and entry.name in p
               for p in problems(target(entry, workerClass=foreign)))


def test_the_api_servers_rules_name_every_server_they_are_about():
    """The CEL side: each capability's rule lists exactly the servers whose entry lacks it."""
    for lacks, words in ((lambda e: not e.workers, "one process"), (lambda e: not e.threads, "one request at a time"),
                         (lambda e: not e.unix_socket, "TCP only"), (lambda e: e.protocol != "http", "FastCGI")):
        names = [e.name for e in ENTRIES if lacks(e)]
        (rule,) = [r for r in SERVER_RULES if words in r.message and "class" not in r.message]
        assert rule.message.startswith(listing(names)) and f"s in {names}" in rule.cel, rule
    classes = [f"{e.name}'s {c.name} class" for e in ENTRIES for c in e.worker_classes if c.one_at_a_time]
    assert classes and all(any(r.message.startswith(c) for r in SERVER_RULES) for c in classes)
