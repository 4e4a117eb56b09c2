"""The execute path's donation plan (cpp/pjrt/execute.h PlanOutputMemory) as a unit: which output takes
which donated input's memory. The expected plans follow the rule the header states: aliased inputs take
their own output when the sizes match, then each other donated input takes the first unclaimed output
of its size."""

from jax_metal_plugin import _core

plan = _core.plan_output_memory


def test_aliased_inputs_take_their_output():
    assert plan([1, 0], [True, True], [16, 8], [8, 16]) == [1, 0]


def test_inputs_not_donated_keep_their_memory():
    assert plan([0, 1], [False, True], [16, 16], [16, 16]) == [-1, 1]
    assert plan([0], [False], [4], [4]) == [-1]


def test_an_alias_of_another_size_gets_fresh_memory():
    assert plan([0], [True], [8], [16]) == [-1]


def test_buffer_donors_take_the_first_unclaimed_output_of_their_size():
    # input 0 is aliased to output 1; input 1 is a donor (no alias) of 16 bytes: output 1 is claimed,
    # output 0 has another size, so it takes output 2.
    assert plan([1, -1], [True, True], [16, 16], [8, 16, 16]) == [-1, 0, 1]
    # two donors of one size share nothing: the first takes the first output, the second the next.
    assert plan([-1, -1], [True, True], [4, 4], [4, 4, 4]) == [0, 1, -1]


def test_aliases_claim_before_donors():
    # the donor (input 0) comes first but the alias of input 1 already holds output 0.
    assert plan([-1, 0], [True, True], [4, 4], [4, 4]) == [1, 0]


def test_no_inputs_or_no_outputs():
    assert plan([], [], [], [4, 8]) == [-1, -1]
    assert plan([-1], [True], [4], []) == []
