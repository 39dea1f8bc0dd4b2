"""The wave coordinator, the per-task runners, and the executors (local, Spark)."""
