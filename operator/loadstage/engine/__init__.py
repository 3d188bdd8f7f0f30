"""The stage engine: the order of a run, the status it keeps, what it asks of a backend, and the
command line of every component (the same for a pod and a local process)."""
