"""Samplers that run beside a stage and keep peaks: Redis connections and local process trees, on one
periodic loop (a thread, or a task in the event loop)."""
