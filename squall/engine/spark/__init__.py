"""The Spark engine: one Spark job per wave; bolt tasks are partitions."""
