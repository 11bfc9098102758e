"""Viewers: the text renderer, PNG frames, the self-contained HTML replay, and the replay
simulator with its record format (what scripts/watch_agent.py and scripts/play.py run)."""
