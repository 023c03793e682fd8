"""``python -m bench --profile``'s decision chains: the task steps from a decision to its
effect, in Trio virtual time, end at the step that had the effect (whichever task took it)."""

from bench import hotspots


def test_the_end_of_turn_chain_ends_at_the_step_that_sent_the_llm_request() -> None:
    res = hotspots.chains_trio()
    assert res["turns"] and res["interrupts"]
    for turn in res["turns"]:
        chain = hotspots._chain(turn["steps"], stop=hotspots.LLM_REQUEST)
        assert chain.startswith("`AudioRecognition._bounce`")
        assert "`UserTurns.handle`" in chain
        assert chain.endswith("→ `LLM request`")


def test_the_interruption_chain_ends_at_the_clear() -> None:
    res = hotspots.chains_trio()
    steps = res["interrupts"][0]["steps"]
    assert hotspots.CLEAR in steps
    # the session is attached to its input's feed: the frame is handled in the network's step
    chain = hotspots._chain(steps, start=hotspots.FRAME_PRODUCER, stop=hotspots.CLEAR)
    assert chain.startswith("`Network.run`")
    assert chain.endswith("→ `clear_buffer`")
