"""Results: HDR histograms, what a stage measured, the status's stage and variant results, thresholds,
and the artifact codec. Percentiles always come from merged histograms."""
