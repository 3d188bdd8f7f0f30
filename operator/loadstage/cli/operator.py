"""`loadstage operator`, `crd` and `reference`: the Kopf operator, as one of several replicas if asked, the
CustomResourceDefinition it serves, and the field reference of the same schema."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading

from loadstage.api.crd import render_crd
from loadstage.api.load import parse_pod_resources
from loadstage.api.reference import render_reference
from loadstage.api.schema import ValidationError
from loadstage.api.types import DEFAULT_POD_RESOURCES
from loadstage.cli.parser import EXIT_OK
from loadstage.history.locations import Location, location
from loadstage.kube.manifests import Defaults
from loadstage.kube.redis_auth import KEY_ENV, operator_key


def cmd_crd(_args) -> int:
    sys.stdout.write(render_crd())
    return EXIT_OK


def cmd_reference(_args) -> int:
    sys.stdout.write(render_reference())
    return EXIT_OK


def cmd_operator(args) -> int:
    import logging

    import kopf

    from loadstage.edge import export, handlers, history, verify  # noqa: F401  (handlers registered on import)

    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    resources = parse_pod_resources(args.experiment_resources) if args.experiment_resources else \
        DEFAULT_POD_RESOURCES   # refused with the value's path (e.g. experimentResources.target.limits.cpu)
    config = handlers.OperatorConfig(
        defaults=Defaults(runner=args.runner_image, injector=args.injector_image, redis=args.redis_image,
                          resources=resources, operator_peer=network_peer("--operator-peer", args.operator_peer),
                          monitoring_peer=network_peer("--monitoring-peer", args.monitoring_peer),
                          redis_key=operator_key(os.environ.get(KEY_ENV))),
        namespaces=tuple(args.namespaces or ()), redis_sample_url=args.redis_sample_url,
        metrics_port=args.metrics_port or None, listen_address=args.listen_address,
        history=history_location(args.history_url))
    liveness = f"http://{args.listen_address}:{args.liveness_port}/healthz" if args.liveness_port else None
    election = _lead(args) if args.leader_elect else None
    try:
        kopf.run(standalone=True, clusterwide=args.all_namespaces, namespaces=args.namespaces or (),
                 liveness_endpoint=liveness, memo=kopf.Memo(config=config))
    finally:
        if election is not None:
            election.release()
    return EXIT_OK


def history_location(url: str | None) -> Location | None:
    """The operator's history (the chart's history.url; its password in PGPASSWORD, from a Secret)."""
    if not url:
        return None
    try:
        return location(url)
    except ValueError as e:
        raise ValidationError([("--history-url", str(e))]) from None


def network_peer(option: str, text: str | None) -> dict | None:
    if not text:
        return None
    try:
        peer = json.loads(text)
    except ValueError as e:
        raise ValidationError([(option, f"must be JSON: {e}")]) from None
    if not isinstance(peer, dict) or not peer.keys() <= {"namespaceSelector", "podSelector"} or not peer:
        raise ValidationError([(option, "must be a NetworkPolicy peer: an object with namespaceSelector "
                                        "and/or podSelector")])
    return peer


def _lead(args):
    """Waits, as a standby, until this process holds the Lease; then keeps it, and ends the
    process at once if it is lost, so two operators never act together."""
    import logging

    from loadstage.kube import leader
    from loadstage.kube.client import api_client, load_config
    load_config()
    election = leader.LeaderElection(api_client(), args.leader_elect_namespace, args.leader_elect_lease,
                                     leader.identity())
    health = leader.StandbyHealth(args.listen_address, args.liveness_port) if args.liveness_port else None
    logging.getLogger("loadstage.leader").info("standby as %s: waiting for Lease %s/%s", election.holder,
                                               args.leader_elect_namespace, args.leader_elect_lease)
    stopped = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopped.set())
    try:
        if not election.acquire(stopped):
            sys.exit(EXIT_OK)
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        if health is not None:
            health.close()

    def lost(why: str) -> None:
        logging.getLogger("loadstage.leader").critical("lost the Lease (%s): exiting so that the new leader "
                                                       "acts alone", why)
        os._exit(1)
    election.keep(lost)
    logging.getLogger("loadstage.leader").info("leading as %s", election.holder)
    return election
