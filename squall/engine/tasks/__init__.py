"""A topology's tasks, in every executor: spout and bolt tasks (columnar bolts too), the one
host that makes, restores and steps them, their outputs split per target task, and the sealing
of every batch that crosses a task boundary."""
