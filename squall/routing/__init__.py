"""Groupings as functions: which task each emitted tuple, or each row of a batch of columns, goes
to; the same in every engine and process (tuples.py for a tuple at a time, columns.py for a batch,
hashing.py for the fields hash both share)."""
