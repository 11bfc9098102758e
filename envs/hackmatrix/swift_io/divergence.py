"""Reporting of the parity harness: what a divergence between two engines records, and the
text it is printed as (scripts/parity_diff.py, scripts/swift_soak.py, test failures)."""

from typing import NamedTuple

# A divergence often differs in many places at once (a wrong enemy order moves every later
# entry); the first ones locate it, the rest would bury the board.
MAX_REPORTED_DIFFERENCES = 40


def report_lines(differences: list) -> list:
    """The differences, indented, at most ``MAX_REPORTED_DIFFERENCES`` of them and a count of
    the rest."""
    lines = [f"  {d}" for d in differences[:MAX_REPORTED_DIFFERENCES]]
    if len(differences) > MAX_REPORTED_DIFFERENCES:
        lines.append(f"  ... {len(differences) - MAX_REPORTED_DIFFERENCES} more")
    return lines


class Divergence(NamedTuple):
    """The first difference of a lockstep run of two engines sharing the key stream."""

    trajectory: int
    step: int  # steps taken in the trajectory before the diverging request
    request: str  # what was compared: "reset", "step <action>", "validActions", ...
    differences: list
    board: str  # render_text(reveal=True) of the reference state before the request

    def report(self) -> str:
        lines = [f"first divergence: trajectory {self.trajectory}, after {self.step} steps, "
                 f"on {self.request}", "reference board before it (hidden parts revealed):",
                 self.board, "differences (reference != candidate):"]
        return "\n".join(lines + report_lines(self.differences))


class OracleDivergence(Exception):
    """Swift's reply to a step cannot be reproduced by the mirror (or fails a support check).
    ``state`` and ``swift`` (the mirror before the step and Swift's reply) allow a replay."""

    def __init__(self, kind: str, action, differences: list, board: str, state=None,
                 swift=None):
        self.kind, self.action, self.differences, self.board = kind, action, differences, board
        self.state, self.swift = state, swift
        super().__init__(self.report())

    def report(self) -> str:
        lines = [f"divergence ({self.kind}) on action {self.action}",
                 "mirror before the step (hidden parts revealed):", self.board,
                 "differences (mirror != Swift):"]
        return "\n".join(lines + report_lines(self.differences))
