"""The Spark engine's data plane (docs/design.md): every spout, bolt and acker task of a topology
lives in a slot, a long-lived Python process that holds tasks of any number of topologies
(`slot`, `slot_topology`). Tuples go from slot to slot (`peers`); the driver (`driver`) sends
each slot one marker a wave and reads one report back over its link (`link`), so what it does
per wave does not grow with the tuples. Slots snapshot their tasks every few waves
(`snapshots`, `slot_recovery`); when one dies, every task goes back to the last confirmed
snapshot and the waves since run again (`recovery`). Where slots run is a host's business: on
Spark each is a long-running task of its own job (`squall.engine.spark.slots`), so Spark places
it, and starts it again when it dies.
"""
