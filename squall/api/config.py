"""Topology configuration: a dict with Storm's keys, plus squall's own."""

from __future__ import annotations

from typing import Any


class Config(dict):
    """A `dict` of settings; the class constants name Storm's keys."""

    TOPOLOGY_ACKER_EXECUTORS = "topology.acker.executors"
    TOPOLOGY_MESSAGE_TIMEOUT_SECS = "topology.message.timeout.secs"
    TOPOLOGY_ENABLE_MESSAGE_TIMEOUTS = "topology.enable.message.timeouts"
    TOPOLOGY_MAX_SPOUT_PENDING = "topology.max.spout.pending"
    TOPOLOGY_DEBUG = "topology.debug"
    TOPOLOGY_TICK_TUPLE_FREQ_SECS = "topology.tick.tuple.freq.secs"
    TOPOLOGY_NAME = "topology.name"  # set at submit
    TOPOLOGY_STATE_CHECKPOINT_INTERVAL = "topology.state.checkpoint.interval.ms"
    TOPOLOGY_STATE_PROVIDER = "topology.state.provider"
    TOPOLOGY_STATE_PROVIDER_CONFIG = "topology.state.provider.config"
    TOPOLOGY_DISABLE_LOADAWARE_MESSAGING = "topology.disable.loadaware.messaging"
    # squall's own
    SQUALL_WAVE_MAX_TUPLES = "squall.wave.max.tuples"
    SQUALL_WAVE_MAX_SECS = "squall.wave.max.secs"
    SQUALL_WAVE_TARGET_SECS = "squall.wave.target.secs"
    SQUALL_WAVES_IN_FLIGHT = "squall.waves.in.flight"
    SQUALL_ROOT_SEED = "squall.root.seed"
    SQUALL_MAX_REPLAYS = "squall.max.replays"
    SQUALL_MAX_DELIVERIES = "squall.max.deliveries"  # a broker spout's crash-loop limit (connectors/spout.py)
    SQUALL_DEAD_LETTER_PATH = "squall.dead.letter.path"
    SQUALL_DEAD_LETTER_SINK = "squall.dead.letter.sink"
    SQUALL_GC_TUNE = "squall.gc.tune"
    SQUALL_FIXED_CHECK_WAVES = "squall.fixed.check.waves"  # waves between checks of fixed_attributes; 0: none
    SQUALL_MALLOC_TUNE = "squall.malloc.tune"  # glibc's mmap and trim thresholds (engine/malloc_tuning.py)
    SQUALL_SPARK_UI = "squall.spark.ui"
    SQUALL_SPARK_LOG_LEVEL = "squall.spark.log.level"
    # Where the Spark engine's slots write their snapshots (docs/design.md): a directory every host
    # sees (on a local[...] master a temp dir by default; on a cluster a shared mount, named in
    # squall.shared.paths)
    SQUALL_CHECKPOINT_DIR = "squall.checkpoint.dir"
    SQUALL_SHARED_PATHS = "squall.shared.paths"  # mount points every cluster host sees (list or "a,b")
    SQUALL_SPARK_SLOTS = "squall.spark.slots"  # slots (cores they hold); None: Spark's default parallelism
    # Waves between snapshots at most (they come sooner when the work since the last one outweighs
    # twenty times what one costs, or while acks wait for one)
    SQUALL_SNAPSHOT_WAVES = "squall.snapshot.waves"
    # How long a spout made again by a recovery (its slot died) keeps trying to open, with backoff,
    # before its topology stops: the broker it connects to may be briefly unreachable or slow.
    SQUALL_SPOUT_OPEN_RETRY_SECS = "squall.spout.open.retry.secs"

    DEFAULTS: dict[str, Any] = {
        TOPOLOGY_ACKER_EXECUTORS: 1,
        TOPOLOGY_MESSAGE_TIMEOUT_SECS: 30,
        TOPOLOGY_ENABLE_MESSAGE_TIMEOUTS: True,
        TOPOLOGY_MAX_SPOUT_PENDING: None,
        TOPOLOGY_DEBUG: False,
        # Seconds between tick tuples to every bolt task (None: no ticks); per bolt with add_configuration.
        TOPOLOGY_TICK_TUPLE_FREQ_SECS: None,
        # Stateful bolts (squall.state): ms of topology time between checkpoints, where the state
        # store is, and its settings (a dict: "path" for sqlite, "dsn" for postgres, "url" for redis).
        TOPOLOGY_STATE_CHECKPOINT_INTERVAL: 1000,
        TOPOLOGY_STATE_PROVIDER: "sqlite",
        TOPOLOGY_STATE_PROVIDER_CONFIG: None,
        # False, as in Storm 2: shuffle groupings send a busier slot's tasks fewer tuples (Spark
        # engine; squall.engine.resident.balance). True: plain round robin.
        TOPOLOGY_DISABLE_LOADAWARE_MESSAGING: False,
        # Tuples a spout task may emit per wave when max.spout.pending does not bound it. None: sized
        # by measured cost (squall.engine.driver.wave_sizing; the budget is shared by the spout tasks),
        # starting from the engine's default (2000 local, 20000 on Spark); a number fixes it.
        SQUALL_WAVE_MAX_TUPLES: None,
        # With waves sized by cost: the longest a full wave should take (capped at a quarter of the
        # message timeout).
        SQUALL_WAVE_TARGET_SECS: 2.0,
        # Time a spout task may spend in next_tuple per wave.
        SQUALL_WAVE_MAX_SECS: 0.5,
        # Waves whose jobs run at once on an engine that can (Spark): while one wave's job runs,
        # the driver pulls the spouts for the next and submits it (its tasks wait in Spark for
        # the state they take from the wave before). 1: one wave at a time. Three keep a
        # loaded topology's slots busy across a wave's ends, where two leave them waiting (docs/design.md).
        SQUALL_WAVES_IN_FLIGHT: 3,
        SQUALL_ROOT_SEED: None,
        SQUALL_MAX_REPLAYS: 5,
        # A broker message delivered this often without an ack is dead-lettered ("lost"); None:
        # max(10, 2 * (max_retries + 1)).
        SQUALL_MAX_DELIVERIES: None,
        SQUALL_DEAD_LETTER_PATH: "squall-dead-letters.jsonl",
        SQUALL_GC_TUNE: True,
        SQUALL_FIXED_CHECK_WAVES: 25,
        SQUALL_MALLOC_TUNE: True,
        SQUALL_SPARK_UI: False,
        # Spark's own logs (Java traces of failed tasks): None sends them to a file whose path the
        # lost-wave warning gives; a log4j level ("WARN", "INFO", ...) shows them on the console.
        SQUALL_SPARK_LOG_LEVEL: None,
        SQUALL_SPARK_SLOTS: None,
        SQUALL_SNAPSHOT_WAVES: 25,
        SQUALL_SPOUT_OPEN_RETRY_SECS: 60.0,
    }

    def set_debug(self, on: bool) -> None:
        self[self.TOPOLOGY_DEBUG] = on

    def set_num_ackers(self, n: int) -> None:
        self[self.TOPOLOGY_ACKER_EXECUTORS] = n

    def set_message_timeout_secs(self, secs: float) -> None:
        self[self.TOPOLOGY_MESSAGE_TIMEOUT_SECS] = secs

    def set_max_spout_pending(self, n: int | None) -> None:
        self[self.TOPOLOGY_MAX_SPOUT_PENDING] = n


def effective_conf(*layers: dict | None) -> dict:
    """Defaults, then each layer in order; None layers skipped. Resolved once, at submit."""
    out = dict(Config.DEFAULTS)
    for layer in layers:
        if layer:
            out.update(layer)
    return out


def component_conf(topology_conf: dict, spec: Any) -> dict:
    """What a component's tasks get: the effective topology conf, then the component's own
    (its get_component_configuration(), then add_configuration on its declarer; see
    StormTopology). Spouts and bolts alike, on every engine."""
    return {**topology_conf, **spec.conf} if spec.conf else dict(topology_conf)
