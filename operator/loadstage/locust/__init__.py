"""What runs inside the Locust processes: the extension that wires loadstage into Locust (extension; Locust loads
it from injectors/loadstage_results.py), the recorder of every request's time, users' timing, the stage's headline
and artifact built and written on the master, its looks with --slo, the target's own count of served requests,
and the seam with Locust's internals."""
