"""From the answer to the running app: a recommended variant as a patch of the team's Deployment and an
autoscaler sized from its measurements (docs/export.md)."""
