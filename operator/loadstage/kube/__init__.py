"""The operator: Kopf handlers at the edge, the Kubernetes backend of the stage engine and its parts,
the child manifests (pure functions returning dicts), the status writer and leader election."""
