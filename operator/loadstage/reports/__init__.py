"""Reports of a run, from a result file or a LoadExperiment in a cluster: the tables (terminal), the ONS
layout (Markdown, HTML with charts), CSV, and the comparison of two runs."""
