"""Benchmarks: agents_trio side by side with LiveKit Agents (asyncio). Run ``python -m bench``."""
