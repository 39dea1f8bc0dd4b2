"""The JVM side of a wave's build, with what stays the same from wave to wave made once.

Each Py4J call is a round trip to the JVM that holds the driver thread (~0.25 ms here), and a
one-sentence wave of word count made 53 of them, most to make each level's PythonRDD the way
PySpark's PipelinedRDD does: look up three JVM classes and the broadcast threshold, and convert
the same environment map, include list and broadcast list into new Java collections, per RDD.
Then 40.5, and 34 since: PythonRDD's static methods looked up once (a lookup is a call), a
level's partitioner made once, the topology's broadcast pickled with its id known (BroadcastRef),
and no PySpark RDD made around a level's shuffled input (its constructor asks for the RDD's id).
"""

from __future__ import annotations

from typing import Any


class BroadcastRef:
    """Pickles as its Broadcast does (what a worker unpickles is that Broadcast), with the id
    asked of the JVM once: Broadcast.__reduce__ asks at every pickle, one Py4J call per level's
    closure a wave."""

    def __init__(self, broadcast: Any):
        self.broadcast = broadcast
        self.bid = broadcast._jbroadcast.id()

    def __reduce__(self) -> tuple:
        from pyspark.core.broadcast import _from_id  # noqa: PLC0415

        self.broadcast._pickle_registry.add(self.broadcast)  # the job ships it to the workers, as PySpark does
        return _from_id, (self.bid,)


class JvmHandles:
    """The JVM classes and values a wave's build uses, looked up once."""

    def __init__(self, sc: Any, blob: Any):
        from py4j.java_collections import ListConverter, MapConverter  # noqa: PLC0415

        jvm = sc._jvm
        client = sc._gateway._gateway_client
        self.sc = sc
        self.pairwise_rdd = jvm.PairwiseRDD
        # A shuffle of (Long, bytes) pairs typed as such makes Spark pick Kryo for it, and every
        # task then unpickles its own Kryo serializer and builds a Kryo instance (registering
        # hundreds of classes): 16% of the JVM's CPU on small waves. Typed as objects, the
        # shuffle takes the Java serializer, made at no cost; its records are a few byte
        # arrays a task, so how they are written does not matter.
        self.java_pair_rdd = jvm.org.apache.spark.api.java.JavaPairRDD
        self.any_ref = jvm.scala.reflect.ClassTag.AnyRef()
        self.python_rdd = jvm.PythonRDD
        self.python_partitioner = jvm.PythonPartitioner
        self._value_of_pair = jvm.PythonRDD.valueOfPair  # a static method looked up at each use is a call more
        self._serve_iterator = jvm.PythonRDD.serveIterator
        self._partitioners: dict[tuple[int, int], Any] = {}
        self._to_scala = jvm.scala.jdk.javaapi.CollectionConverters.asScala
        # A level's cached output kept as the byte arrays its task wrote (Spark's own MEMORY_ONLY),
        # not as PySpark's MEMORY_ONLY keeps it: serialized again into 1 MB chunks, then read back
        # out of them for the shuffle. The JVM's CPU a 25,000-sentence wave of word count: 38-43 ms
        # against 45-49 (six alternating pairs), 1.70M bolt-tuples/s acked against 1.66M.
        self.memory_only = jvm.org.apache.spark.storage.StorageLevel.MEMORY_ONLY()
        self._function = jvm.SimplePythonFunction
        self._env = MapConverter().convert(sc.environment, client)
        self._included: list[str] = []
        self._includes = None
        self._threshold = jvm.PythonUtils.getBroadcastThreshold(sc._jsc)
        self._blob = blob
        self._blob_only = ListConverter().convert([blob._jbroadcast], client)
        self._convert = lambda items: ListConverter().convert(items, client)

    def collect(self, jrdd: Any) -> list[bytes]:
        """The elements of `jrdd` (a JavaRDD of bytes) at the driver, as they are. RDD.collect
        has SparkContext check two closures for return statements, each by parsing the bytecode
        of the class that declares it, with no cache: RDD's and SparkContext's, 390 KB a job and
        23% of the JVM's CPU on small waves. collectAsync's one closure is AsyncRDDActions' (26 KB);
        its rows come to Python as RDD.collect's do, through a local socket."""
        from pyspark.serializers import NoOpSerializer  # noqa: PLC0415
        from pyspark.util import _load_from_socket  # noqa: PLC0415

        rows = jrdd.collectAsync().get()
        sock = self._serve_iterator(self._to_scala(rows.iterator()), "squall: a wave's rows")
        with _load_from_socket(sock, NoOpSerializer()) as stream:
            return list(stream)

    def shuffle(self, keyed: Any, n: int, part_fn: Any) -> Any:
        """The JavaRDD of `keyed`'s values (a JavaRDD of bytes, each key followed by its value, as
        PySpark's partitionBy writes them) shuffled to the `n` partitions their keys name:
        PySpark's partitionBy without its Python pass, its partitioner made once per (n, part_fn)."""
        pairs = self.java_pair_rdd(self.pairwise_rdd(keyed.rdd()), self.any_ref, self.any_ref)
        part = self._partitioners.get((n, id(part_fn)))
        if part is None:
            part = self._partitioners[(n, id(part_fn))] = self.python_partitioner(n, id(part_fn))
        return self._value_of_pair(pairs.partitionBy(part))

    def map_partitions(self, prev: Any, fn: Any, preserves_partitioning: bool = False) -> Any:
        """The JavaRDD of `fn(partition, iterator)` over the bytes of `prev` (a JavaRDD), its output
        bytes as they are: PipelinedRDD._jrdd of prev.mapPartitionsWithIndex(fn) on raw bytes with
        the serializer bypassed, in 4 Py4J calls."""
        from pyspark.serializers import CloudPickleSerializer, NoOpSerializer  # noqa: PLC0415

        sc = self.sc
        ser = CloudPickleSerializer()
        command = ser.dumps((fn, None, NoOpSerializer(), NoOpSerializer()))
        if len(command) > self._threshold:  # as PySpark does: a big closure travels as a broadcast
            command = ser.dumps(sc.broadcast(command))
        used = list(sc._pickled_broadcast_vars)
        sc._pickled_broadcast_vars.clear()
        bvars = self._blob_only if used == [self._blob] else self._convert([b._jbroadcast for b in used])
        if self._includes is None or self._included != sc._python_includes:  # sc.addPyFile since
            self._included = list(sc._python_includes)
            self._includes = self._convert(self._included)
        func = self._function(bytearray(command), self._env, self._includes, sc.pythonExec, sc.pythonVer, bvars,
                              sc._javaAccumulator)
        return self.python_rdd(prev.rdd(), func, preserves_partitioning, False).asJavaRDD()
