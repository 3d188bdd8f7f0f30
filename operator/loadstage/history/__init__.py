"""Every run remembered: a history of runs in SQLite or PostgreSQL, read back as tables and checked for
regressions."""
