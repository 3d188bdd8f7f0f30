"""The target's own count of served requests, read from its Prometheus text: the runner app's histogram, a
counter of another app, and an app that has neither."""

from loadstage.locust.served_count import served_between, served_requests

RUNNER = """# HELP runner_request_duration_seconds Request latency.
# TYPE runner_request_duration_seconds histogram
runner_request_duration_seconds_bucket{method="GET",route="/q",status="200",le="+Inf"} 5.0
runner_request_duration_seconds_count{method="GET",route="/q",status="200"} 5.0
runner_request_duration_seconds_sum{method="GET",route="/q",status="200"} 0.5
runner_request_duration_seconds_count{method="POST",route="/q",status="303"} 7.0
runner_request_duration_seconds_sum{method="POST",route="/q",status="303"} 0.7
"""
FLASK_EXPORTER = """# HELP flask_http_request_total Total number of HTTP requests
# TYPE flask_http_request_total counter
flask_http_request_total{method="GET",status="200"} 40.0
flask_http_request_total{method="POST",status="201"} 2.0
# HELP flask_http_request_created Total number of HTTP requests
# TYPE flask_http_request_created gauge
flask_http_request_created{method="GET",status="200"} 1.7e9
"""


def test_a_histogram_counts_its_observations_over_every_label():
    assert served_requests(RUNNER) == 12


def test_a_counter_is_found_with_or_without_its_total_suffix():
    assert served_requests(FLASK_EXPORTER, "flask_http_request_total") == 42
    assert served_requests(FLASK_EXPORTER, "flask_http_request") == 42


def test_an_app_without_the_counter_has_no_count_rather_than_zero():
    assert served_requests(FLASK_EXPORTER) is None
    assert served_requests("", "flask_http_request_total") is None


def test_a_counter_absent_before_the_first_request_counted_zero_and_one_absent_throughout_counts_nothing():
    assert served_between({"a": None, "b": 3}, {"a": 5, "b": 10}) == 12
    assert served_between({"a": None}, {"a": None}) is None
    assert served_between({"a": 1}, None) is None and served_between({"a": 1}, {"b": 2}) is None


def test_a_counter_that_went_back_restarted_and_its_count_is_unknown_never_negative():
    assert served_between({"a": 900, "b": 10}, {"a": 40, "b": 20}) is None
    assert served_between({"a": 900}, {"a": None}) is None
