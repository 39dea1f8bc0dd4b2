"""streamparse's DSL: each form of `inputs`, the groupings, streams, config, and the checks
streamparse makes when a Topology class is made (with its kinds of errors); what squall does
not run (Java, shell, thrift) is refused naming the component and the alternative."""

from __future__ import annotations

import pytest

from squall.api.topology import Grouping as SquallGrouping
from squall.streamparse import (
    Bolt,
    Grouping,
    JavaBolt,
    JavaSpout,
    ShellBolt,
    ShellSpout,
    Spout,
    Stream,
    Topology,
    UnsupportedFeature,
)


class Words(Spout):
    outputs = ["word", "n"]


class Split(Spout):
    outputs = [Stream(["word"]), Stream(["word", "reason"], name="errors"), Stream(["x"], name="pick", direct=True)]


class Direct(Spout):
    outputs = [Stream(["x"], direct=True)]


class Sink(Bolt):
    outputs = ["out"]


class Sink2(Bolt):
    outputs = []


def inputs_of(topology_cls, bolt):
    return {(s.source, s.stream): s.grouping for s in topology_cls.build().specs[bolt].inputs}


def test_inputs_as_list_dict_single_spec_and_named_stream():
    class T(Topology):
        words = Words.spec()
        split = Split.spec(par=2)
        direct = Direct.spec()
        a = Sink.spec(inputs=[words, split["errors"]])
        b = Sink.spec(inputs={words: Grouping.fields("word"), split["errors"]: Grouping.fields(["word", "reason"])})
        c = Sink2.spec(inputs=words)
        d = Sink2.spec(inputs=[direct])  # a direct default stream: DIRECT, as streamparse infers it
        e = Sink2.spec(inputs={split["pick"]: Grouping.DIRECT})

    assert inputs_of(T, "a") == {("words", "default"): SquallGrouping("shuffle"),
                                 ("split", "errors"): SquallGrouping("shuffle")}
    assert inputs_of(T, "b") == {("words", "default"): SquallGrouping("fields", ("word",)),
                                 ("split", "errors"): SquallGrouping("fields", ("word", "reason"))}
    assert inputs_of(T, "c") == {("words", "default"): SquallGrouping("shuffle")}
    assert inputs_of(T, "d") == {("direct", "default"): SquallGrouping("direct")}
    assert inputs_of(T, "e") == {("split", "pick"): SquallGrouping("direct")}
    built = T.build()
    assert built.specs["split"].parallelism == 2
    assert built.specs["split"].streams["errors"].fields == ("word", "reason")
    assert built.specs["split"].streams["pick"].direct
    assert [s.name for s in T.specs] == ["words", "split", "direct", "a", "b", "c", "d", "e"]


@pytest.mark.parametrize("grouping,kind", [(Grouping.SHUFFLE, "shuffle"), (Grouping.ALL, "all"),
                                           (Grouping.GLOBAL, "global"), (Grouping.NONE, "none"),
                                           (Grouping.LOCAL_OR_SHUFFLE, "local_or_shuffle")])
def test_each_grouping_maps_to_squall(grouping, kind):
    class T(Topology):
        words = Words.spec()
        sink = Sink.spec(inputs={words: grouping}, par=3)

    assert inputs_of(T, "sink") == {("words", "default"): SquallGrouping(kind)}


def test_names_par_and_config_from_spec_or_class():
    class Configured(Bolt):
        outputs = ["out"]
        par = 4
        config = {"my.key": "class"}

    class T(Topology):
        config = {"topology.message.timeout.secs": 7}
        words = Words.spec(name="the-words", config={"my.key": "spout"})
        fromclass = Configured.spec(inputs=[words])
        fromspec = Configured.spec(name="renamed", inputs=[words], par=2, config={"my.key": "spec"})

    built = T.build()
    assert sorted(built.specs) == ["fromclass", "renamed", "the-words"]
    assert (built.specs["fromclass"].parallelism, built.specs["fromclass"].conf) == (4, {"my.key": "class"})
    assert (built.specs["renamed"].parallelism, built.specs["renamed"].conf) == (2, {"my.key": "spec"})
    assert built.specs["the-words"].conf == {"my.key": "spout"}
    assert T.build_conf() == {"topology.message.timeout.secs": 7}


def test_grouping_and_stream_checks():
    with pytest.raises(ValueError, match="cannot be empty"):
        Grouping.fields()
    assert repr(Grouping.fields("a", "b")) == "fields(['a', 'b'])" and repr(Grouping.SHUFFLE) == "SHUFFLE"
    with pytest.raises(TypeError, match="field names must be strings"):
        Stream(["a", 1])
    with pytest.raises(TypeError, match="list, tuple, or None"):
        Stream("word")
    with pytest.raises(TypeError, match="name must be a string"):
        Stream(["a"], name=3)
    with pytest.raises(TypeError, match='"direct"'):
        Stream(["a"], direct="yes")
    with pytest.raises(KeyError, match="Invalid stream"):
        Words.spec()["nope"]
    with pytest.raises(NotImplementedError, match="Grouping.fields"):
        Grouping.custom_object("com.example.MyGrouping", [])


def _make(body):
    return type("T", (Topology,), body)


@pytest.mark.parametrize("body,error,match", [
    ({"sink": Sink.spec(inputs=[Words.spec()])}, KeyError, "not part of this topology"),
    ({}, ValueError, "at least one Spout"),
    ({"w": Words.spec(), "sink": Sink.spec()}, ValueError, 'Sink "sink" requires at least one input'),
    ({"w": Spout.spec()}, ValueError, "requires at least one output"),
    ({"w": Words.spec(), "forgot": Sink}, TypeError, "Did you forget to call the spec"),
    ({"w": Words.spec(), "config": [("a", 1)]}, TypeError, "config must be a dictionary"),
    ({"w": Words.spec(), "w2": Words.spec(name="w")}, ValueError, "Duplicate component name: w"),
])
def test_class_checks_with_streamparse_kinds_of_errors(body, error, match):
    with pytest.raises(error, match=match):
        _make(body)


def test_fields_grouping_on_undeclared_field_and_bad_par():
    w = Words.spec()
    with pytest.raises(ValueError, match="Field 'nope' specified in grouping is not a valid output field"):
        _make({"w": w, "s": Sink.spec(inputs={w: Grouping.fields("nope")})})
    with pytest.raises(ValueError, match="greater than 0"):
        Sink.spec(inputs=[w], par=0)
    with pytest.raises(TypeError, match="Parallelism hint must be an integer"):
        Sink.spec(inputs=[w], par="2")
    with pytest.raises(TypeError, match="inputs is a dict"):
        Sink.spec(inputs={w: "shuffle"})
    per_env = _make({"w": w, "s": Sink.spec(inputs=[w], par={"prod": 4})})
    with pytest.raises(TypeError, match=r"component 's'.*give an int"):
        per_env.build()


@pytest.mark.parametrize("make,kind,alternative", [
    (lambda w: JavaBolt.spec(full_class_name="com.example.Count", args_list=[], inputs=[w], outputs=["c"]),
     "JavaBolt", "squall.streamparse.Bolt"),
    (lambda w: ShellBolt.spec(command="node", script="count.js", inputs=[w], outputs=["c"]),
     "ShellBolt", "squall.streamparse.Bolt"),
    (lambda w: JavaSpout.spec(full_class_name="org.apache.storm.kafka.KafkaSpout", args_list=[], outputs=["c"]),
     "JavaSpout", "squall.connectors"),
    (lambda w: ShellSpout.spec(command="ruby", script="feed.rb", outputs=["c"]),
     "ShellSpout", "squall.streamparse.Spout"),
])
def test_java_and_shell_components_are_refused_by_name(make, kind, alternative):
    w = Words.spec()
    with pytest.raises(UnsupportedFeature) as err:
        _make({"w": w, "legacy": make(w)})
    text = str(err.value)
    assert f"component 'legacy' is a {kind}" in text and alternative in text


def test_thrift_and_flux_submission_are_refused_with_the_alternative(tmp_path):
    class T(Topology):
        words = Words.spec()

    for call in (lambda: T.write(str(tmp_path / "t.thrift")), lambda: T.read(str(tmp_path / "t.thrift")),
                 lambda: T.to_flux_dict("t"), lambda: T.thrift_topology):
        with pytest.raises(UnsupportedFeature, match="squall run topologies/"):
            call()
    with pytest.raises(AttributeError):
        T.no_such_attribute  # noqa: B018


def test_streamparse_module_paths_work_with_the_one_changed_prefix():
    import squall.streamparse as sp
    from squall.streamparse.bolt import BatchingBolt as B2
    from squall.streamparse.bolt import Bolt as B1
    from squall.streamparse.dsl import Topology as T1
    from squall.streamparse.spout import ReliableSpout as S2
    from squall.streamparse.spout import Spout as S1

    assert (B1, B2, S1, S2, T1) == (sp.Bolt, sp.BatchingBolt, sp.Spout, sp.ReliableSpout, sp.Topology)
    assert isinstance(sp.StormHandler(), __import__("logging").Handler)
