"""Resident bolt tasks: each bolt task lives in one long-lived slot process for the whole run,
and the driver sends it each wave's inputs, instead of starting it again (one Spark job) per wave.

A slot is a Python process that holds bolt tasks of any number of topologies (`slot`). The
driver talks to each over one connection (`link`), runs a topology's waves level by level
through its slots (`executor`), and keeps, per task, what it needs to rebuild that task if its
slot dies: the task's last confirmed snapshot and every step since (`task_log`). Where slots
run is a host's business: on Spark each is a long-running task of its own job
(`squall.engine.spark.slots`), so Spark places it, and starts it again when it dies.
"""
