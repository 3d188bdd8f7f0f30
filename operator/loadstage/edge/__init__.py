"""The operator's edge: Kopf's handlers, which parse a resource's body into the model and hand it to the engine
(with the Kubernetes backend). The only package that imports Kopf, beside the command line that starts it."""
