"""Agents that orch ships to benchmark hosts; ``orch_agent`` is packed into ``agent.pyz``."""
