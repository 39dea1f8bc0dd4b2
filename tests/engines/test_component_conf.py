"""Configuration as in Storm, on both engines: defaults resolved once at submit, then the
topology conf, then the component's own get_component_configuration(), then the declarer's
add_configuration; spouts and bolts see the same effective conf."""

from __future__ import annotations

from squall import Bolt, Config, Spout, TopologyBuilder
from squall.testing import complete_topology

KEYS = ["my.own", "my.both", "my.decl", "my.topo", Config.TOPOLOGY_MESSAGE_TIMEOUT_SECS, Config.SQUALL_MAX_REPLAYS]


class ConfSpout(Spout):
    """Emits, once, what its conf says for KEYS."""

    def get_component_configuration(self):
        return {"my.own": "spout"}

    def declare_output_fields(self, d):
        d.declare(["conf"])

    def open(self, conf, context, collector):
        self.conf, self.collector, self.sent = conf, collector, False

    def next_tuple(self):
        if not self.sent:
            self.sent = True
            self.collector.emit([[self.conf.get(k) for k in KEYS]], msg_id="conf")


class ConfBolt(Bolt):
    """For each input, emits what its conf says for KEYS."""

    def get_component_configuration(self):
        return {"my.own": 1, "my.both": "component"}

    def declare_output_fields(self, d):
        d.declare(["conf"])

    def prepare(self, conf, context, collector):
        self.values, self.collector = [conf.get(k) for k in KEYS], collector

    def execute(self, t):
        self.collector.emit([self.values], anchors=t)
        self.collector.ack(t)


def test_spouts_and_bolts_see_one_effective_conf(cluster_kwargs):
    b = TopologyBuilder()
    b.set_spout("feed", ConfSpout())
    b.set_spout("conf_spout", ConfSpout())
    (b.set_bolt("report", ConfBolt(), parallelism=2).shuffle_grouping("feed")
     .add_configuration("my.both", "declarer").add_configuration("my.decl", 2))
    conf = Config({"my.topo": 3, "my.own": "topology"})
    result = complete_topology(b.create_topology(), mocked_sources={"feed": [[1]]}, conf=conf, **cluster_kwargs)
    assert result.emitted("report") == [[[1, "declarer", 2, 3, 30, 5]]]
    assert result.emitted("conf_spout") == [[["spout", None, None, 3, 30, 5]]]
