"""The names of the LoadExperiment API: its group, version and kind, the phases and conditions of its
status, and the labels and annotations on every object loadstage creates for it."""

API_GROUP = "loadstage.io"
API_VERSION = "v1alpha1"
KIND = "LoadExperiment"
PLURAL, SINGULAR, SHORT_NAMES = "loadexperiments", "loadexperiment", ["lx"]
PHASES = ["Pending", "Deploying", "Running", "Succeeded", "Failed"]
FINISHED = ("Succeeded", "Failed")
CONDITION_TYPES = ["TargetReady", "Running", "Succeeded", "Failed"]
NAME_PATTERN = r"[a-z]([-a-z0-9]*[a-z0-9])?"
NAME_MAX = 40

LABEL_EXPERIMENT = "loadstage.io/experiment"
LABEL_COMPONENT = "app.kubernetes.io/component"
LABEL_ROLE = "loadstage.io/role"   # what selects a child's pods: loadstage's own key, never one of the app's
LABEL_RUN = "loadstage.io/run"
ANNOTATION_VARIANT = "loadstage.io/variant"
ANNOTATION_LOST_INJECTORS = "loadstage.io/lost-injectors"   # on a worker Job: JSON list
ARTIFACT_KEY = "artifact.json"                              # in a stage's results ConfigMap
NAME_SUBDOMAIN = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
ANNOTATION_IN_PLACE = "loadstage.io/in-place"   # on a Deployment or HPA held InPlace: what to restore (JSON)
ANNOTATION_REDIS_URL = "loadstage.io/redis-url"   # on a Secret: the external Redis it may be sent to
