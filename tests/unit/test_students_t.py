"""Student's t without scipy (results.students_t): the tables' quantiles, and a quantile that inverts the
distribution at any confidence and freedom."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loadstage.results.students_t import t_quantile, two_sided


@pytest.mark.parametrize("confidence, freedom, expected", [
    (0.95, 1, 12.706), (0.95, 2, 4.303), (0.95, 3, 3.182), (0.95, 4, 2.776), (0.95, 9, 2.262), (0.95, 14, 2.145),
    (0.95, 29, 2.045), (0.99, 19, 2.861), (0.999, 9, 4.781), (0.90, 120, 1.658)])
def test_quantiles_are_the_tables_two_sided_ones(confidence, freedom, expected):
    assert t_quantile(confidence, freedom) == pytest.approx(expected, abs=1e-3)


def test_one_degree_of_freedom_is_cauchy_far_into_its_tail():
    assert t_quantile(0.9999999, 1) == pytest.approx(math.tan(math.pi / 2 * 0.9999999), rel=1e-9)


@given(st.floats(0.05, 1 - 1e-7), st.integers(1, 3000))
def test_the_quantile_inverts_the_distribution(confidence, freedom):
    t = t_quantile(confidence, freedom)
    assert two_sided(t, freedom) == pytest.approx(confidence, abs=1e-12)
    assert t_quantile(confidence, freedom) < t_quantile(min(confidence * 1.001, 1 - 1e-8), freedom)
