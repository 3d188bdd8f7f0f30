"""The system under test: a questionnaire runner that keeps its sessions in Redis."""
