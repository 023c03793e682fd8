"""Keyterms and conversation turns reach a LiveKit plugin STT the way LiveKit's session hands
them over: through its ``_update_session_keyterms`` and ``_push_conversation_item`` hooks,
in the asyncio loop, with LiveKit's event and message types."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import trio

pytest.importorskip("livekit.agents", reason="the plugin adapters need livekit-agents")

from livekit.agents import llm as lk_llm
from livekit.agents import stt as lk_stt
from livekit.agents import voice as lk_voice
from lk_fakes import FakePluginLLM, FakePluginSTT

from agents_trio import Agent, AgentSession, open_bridge


class ContextSTT(FakePluginSTT):
    """A plugin STT that takes keyterms and conversation context, recording both."""

    def __init__(self) -> None:
        super().__init__()
        self._capabilities = lk_stt.STTCapabilities(streaming=True, interim_results=True,
                                                    keyterms=True, chat_context=True)
        self.keyterm_updates: list[list[str]] = []
        self.on_loop: list[bool] = []  # whether each update ran in the asyncio loop
        self.pushed: list[Any] = []

    def _update_session_keyterms(self, keyterms: list[str]) -> None:
        self.keyterm_updates.append(keyterms)
        try:
            asyncio.get_running_loop()
            self.on_loop.append(True)
        except RuntimeError:
            self.on_loop.append(False)

    def _push_conversation_item(self, ev: lk_voice.ConversationItemAddedEvent) -> None:
        self.pushed.append(ev)


async def test_a_plugin_stt_gets_keyterms_and_turns(autojump_clock) -> None:
    plugin = ContextSTT()
    async with open_bridge():
        async with AgentSession(stt=plugin, llm=FakePluginLLM({"hi": "hello"}),
                                stt_context_options={"keyterms": ["Acme"]}) as session:
            await session.start(Agent(instructions="x"))
            await session.run(user_input="hi")
            await trio.sleep(0.1)
            session.update_options(keyterms=["Acme", "Zyxel"])
            await trio.sleep(0.1)
    assert plugin.keyterm_updates == [["Acme"], ["Acme", "Zyxel"]]
    assert all(isinstance(ev, lk_voice.ConversationItemAddedEvent) for ev in plugin.pushed)
    assert [(ev.item.role, ev.item.text_content) for ev in plugin.pushed] == [
        ("user", "hi"), ("assistant", "hello")]
    assert all(isinstance(ev.item, lk_llm.ChatMessage) for ev in plugin.pushed)


async def test_with_the_sessions_bridge_on_demand_keyterms_go_through_the_loop(
        autojump_clock) -> None:
    plugin = ContextSTT()
    async with AgentSession(stt=plugin, llm=FakePluginLLM({"hi": "hello"}),
                            stt_context_options={"keyterms": ["Acme"]}) as session:
        await session.start(Agent(instructions="x"))
        await session.run(user_input="hi")   # the plugin LLM opened the bridge on demand
        session.update_options(keyterms=["Zyxel"])
        await trio.sleep(0.1)
    # before any bridge: stored by a direct call; then through the loop
    assert plugin.keyterm_updates == [["Acme"], ["Zyxel"]]
    assert plugin.on_loop == [False, True]
