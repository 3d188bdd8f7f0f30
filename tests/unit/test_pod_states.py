"""Which waiting states of a container fail an experiment at once, and which the kubelet retries by itself."""

from loadstage.kube.pods import cannot_start


def _pod(reason: str, message: str) -> dict:
    return {"metadata": {"name": "lx-runner-1"},
            "status": {"containerStatuses": [{"name": "runner", "image": "loadstage/runner-app:0.1.0",
                                              "state": {"waiting": {"reason": reason, "message": message}}}]}}


def test_a_missing_secret_fails_naming_the_pod_the_image_and_the_kubelets_words():
    said = cannot_start([_pod("CreateContainerConfigError", 'secret "redis-auth" not found')])
    assert said == ('pod lx-runner-1 container runner (image loadstage/runner-app:0.1.0): '
                    'CreateContainerConfigError: secret "redis-auth" not found')


def test_a_kubelet_cache_that_has_not_synced_yet_is_waited_out_not_failed():
    # seen in CI on the real node: the kubelet retries these by itself and the pod starts
    for kind in ("secret", "configmap"):
        assert cannot_start([_pod("CreateContainerConfigError",
                                  f"failed to sync {kind} cache: timed out waiting for the condition")]) is None


def test_a_crash_loop_and_a_bad_image_fail_at_once():
    assert "CrashLoopBackOff" in cannot_start([_pod("CrashLoopBackOff", "back-off 10s restarting failed container")])
    assert "ImagePullBackOff" in cannot_start([_pod("ImagePullBackOff", 'Back-off pulling image "nope"')])
    assert cannot_start([_pod("ContainerCreating", "")]) is None
