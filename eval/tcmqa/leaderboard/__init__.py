"""The leaderboard Space's logic (board, submission checks, item explorer, settings), without gradio.

``tcmqa.leaderboard.space`` wires these into the UI; tests and benchmarks use them directly.
"""
