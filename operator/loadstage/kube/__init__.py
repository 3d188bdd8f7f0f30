"""The operator's Kubernetes side: the backend of the stage engine and its parts (the Kopf handlers are in
loadstage.edge), the child manifests (pure functions returning dicts), the status writer and leader election."""
