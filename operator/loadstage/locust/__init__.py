"""What runs inside the Locust processes: the recorder of every request's time, the stage's headline and
artifact built on the master, the target's own count of served requests, and the seam with Locust's
internals. The extension that wires them into Locust is injectors/loadstage_results.py."""
