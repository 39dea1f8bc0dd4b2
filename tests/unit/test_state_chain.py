"""The driver's check that each bolt task's step starts from the State its last step left."""

from squall.engine.spark.state_chain import StateChain


def test_steps_from_the_last_state_pass_and_an_older_one_is_an_error():
    chain = StateChain()
    assert chain.step("count", 3, 1, 0) is None  # a new instance at its first step
    assert chain.step("count", 3, 2, 1) is None
    assert chain.step("count", 3, 7, 2) is None  # waves 3-6 had no input for it: its State passed on
    assert chain.step("count", 4, 7, 0) is None  # another task, new
    err = chain.step("count", 3, 9, 2)  # its last step was wave 7
    assert err is not None and (err.component, err.task) == ("count", 3)
    assert err.error.startswith("StateLost: its step of wave 9 started from the State of wave 2, but its last "
                                "step was wave 7")
    assert chain.step("count", 3, 10, 9) is None  # and it follows on from the step it did take


def test_a_new_instance_after_steps_is_an_error():
    chain = StateChain()
    chain.step("join", 0, 1, 0)
    err = chain.step("join", 0, 2, 0)
    assert err is not None and "started from a new instance, but its last step was wave 1" in err.error
