"""Plain-text board rendering for failing-test messages and debugging.

Two layers: ``cell_view`` / ``header_view`` extract what a cell and the status line hold, as plain
dicts of Python values (the layer a richer renderer can reuse), and ``render_text`` formats them.
Host-side only; takes one unbatched state (jax or numpy leaves).

Visibility follows the observation (programs-rewards-observation §9.1). With ``reveal=False`` the
board shows only what the agent can see: hidden cryptogs (and whatever shares a cell behind one),
enemies with hp <= 0, question-block contents, resources under an unsiphoned block and a
transmission's enemy type without SHOW stay hidden; a hidden cryptog's last-known position is
shown as a hint, as in ``cryptogHints``. Unlike the observation, every visible enemy of a stack is
listed, not only the first. ``reveal=True`` adds the hidden parts, each wrapped in parentheses.

Cell token legend, parts in this order (an empty cell is ``.``):

    @         the player
    X         exit cell content
    S         data siphon lying on the floor
    #5/5      data block: points / transmission spawn count
    #push/4   program block: program name / spawn count
    #?        question block; revealed: #?(5/5) or #?(push/4)
    *         the cell is siphoned          ^   siphon centre
    c2 e1     credits / energy lying on the cell
    V2 D3 G1 C2   enemy type letter and hp, then ! stunned, z<n> disabled for n turns;
              stacked enemies are joined by +, in list order
    t1        transmission with its countdown, then the enemy type letter when visible (SHOW)
    C?        a hidden cryptog was last seen here (cryptogHints)

Frames: ``frame_view`` bundles one step of a replay or of human play (the state's cells and
header, plus optionally the action taken, the policy's probabilities and value, the reward and
its components, the owned programs with cost and validity) into one JSON-able dict. The
terminal (``format_frame``), image (``render_image``) and HTML (``render_html``) renderers all
draw from that dict, so they agree on what is shown and what is hidden.
"""

import jax
import numpy as np

from ..core.constants import (ACTION_SIPHON, BLOCK, DATA_SIPHON, DIR_NAMES, ENEMY_NAMES, EXIT,
                              GRID, N_ACTIONS, PROGRAM_ACTION_OFFSET, PROGRAM_COST_CREDITS,
                              PROGRAM_COST_ENERGY, PROGRAM_NAMES)
from ..core.entities import enemy_visible, in_list_order
from ..core.rewards import REWARD_FIELDS

_MIN_CELL_WIDTH = 3


def _host(state):
    s = jax.device_get(state)
    if np.ndim(s.grid.content) != 1:
        raise ValueError("render takes a single state, not a batch")
    return s


def _enemy_visibility(s):
    """(slots in list order, hidden flag per slot, set of cryptog-hint cells) per §9.1."""
    e, p = s.enemies, s.player
    order = in_list_order(e.active, e.seq)
    live = np.asarray(e.hp) > 0
    cryptog_hidden = ~enemy_visible(np.asarray(e.kind), np.asarray(e.row), np.asarray(e.col),
                                    p.row, p.col, bool(s.show))
    first_live = {}  # cell -> first enemy in list order with hp > 0
    for slot in order:
        if live[slot]:
            first_live.setdefault((int(e.row[slot]), int(e.col[slot])), slot)
    # The observation reports nothing on a cell whose first live enemy is a hidden cryptog.
    masked_cells = {cell for cell, slot in first_live.items() if cryptog_hidden[slot]}
    hidden = {slot: (not live[slot]) or bool(cryptog_hidden[slot])
              or (int(e.row[slot]), int(e.col[slot])) in masked_cells for slot in order}
    # errata O9: a hint comes only from a hidden cryptog that is its cell's first live enemy.
    hints = {(int(e.last_row[slot]), int(e.last_col[slot])) for cell, slot in first_live.items()
             if cryptog_hidden[slot] and int(e.last_row[slot]) >= 0}
    return order, hidden, hints


def cell_view(state, row: int, col: int, reveal: bool = False) -> dict:
    """Everything on cell (row, col) as plain values; hidden parts only when ``reveal``.

    Keys: row, col, player, exit, data_siphon, siphoned, siphon_center (bools); block (None or
    {type: data|program|question, points, program (name or None), spawn, hidden}; a question
    block's points/program/spawn are None unless revealed); resources (None or {credits, energy,
    hidden}); enemies (list in list order of {type, hp, stunned, disabled, from_siphon,
    from_scheduled, hidden}); transmissions (list in list order of {turns, type, type_hidden},
    type None when hidden); cryptog_hint (bool). ``hidden`` marks a part the observation hides.
    """
    s = _host(state)
    return _cell_view(s, row, col, reveal, _enemy_visibility(s))


def _cell_view(s, row, col, reveal, visibility) -> dict:
    g, cell = s.grid, row * GRID + col
    content = int(g.content[cell])
    siphoned = bool(g.siphoned[cell])
    block = None
    if content == BLOCK:
        question = bool(g.question[cell])
        program = int(g.program[cell])
        show_content = reveal or not question
        block = dict(type="question" if question else ("program" if program >= 0 else "data"),
                     points=int(g.points[cell]) if show_content else None,
                     program=PROGRAM_NAMES[program] if show_content and program >= 0 else None,
                     spawn=int(g.spawn[cell]) if show_content else None,
                     hidden=question)
    resources = None
    if int(g.credits[cell]) > 0 or int(g.energy[cell]) > 0:
        resources_hidden = content == BLOCK and not siphoned
        if reveal or not resources_hidden:
            resources = dict(credits=int(g.credits[cell]), energy=int(g.energy[cell]),
                             hidden=resources_hidden)
    order, hidden, hints = visibility
    e = s.enemies
    enemies = [dict(type=ENEMY_NAMES[int(e.kind[i])], hp=int(e.hp[i]), stunned=bool(e.stunned[i]),
                    disabled=int(e.disabled[i]), from_siphon=bool(e.from_siphon[i]),
                    from_scheduled=bool(e.from_scheduled[i]), hidden=hidden[i])
               for i in order if int(e.row[i]) == row and int(e.col[i]) == col
               and (reveal or not hidden[i])]
    t = s.transmissions
    type_visible = bool(s.show)
    transmissions = [dict(turns=int(t.turns[i]),
                          type=ENEMY_NAMES[int(t.kind[i])] if reveal or type_visible else None,
                          type_hidden=not type_visible)
                     for i in in_list_order(t.active, t.seq)
                     if int(t.row[i]) == row and int(t.col[i]) == col]
    return dict(row=row, col=col, player=(int(s.player.row), int(s.player.col)) == (row, col),
                exit=content == EXIT, data_siphon=content == DATA_SIPHON, siphoned=siphoned,
                siphon_center=bool(g.siphon_center[cell]), block=block, resources=resources,
                enemies=enemies, transmissions=transmissions, cryptog_hint=(row, col) in hints)


def header_view(state) -> dict:
    """The status values: player numbers, stage, turn, flags, programs and the scheduler."""
    s = _host(state)
    p = s.player
    rank = np.asarray(s.program_rank)
    owned = [int(i) for i in np.flatnonzero(rank >= 0)]
    return dict(
        hp=int(p.hp), credits=int(p.credits), energy=int(p.energy), siphons=int(p.data_siphons),
        score=int(p.score), attack=int(p.attack), stage=int(s.stage), turn=int(s.turn),
        show=bool(s.show), calm=bool(s.calm), step=bool(s.step_active),
        atk_uses=int(s.atk_uses),
        programs=[PROGRAM_NAMES[i] for i in sorted(owned, key=lambda i: rank[i])],
        pending_siphon=int(s.pending_siphon), sched_interval=int(s.sched_interval),
        next_sched_turn=int(s.next_sched_turn), history=int(s.history.size),
        exit=(int(s.exit_row), int(s.exit_col)), board_from_undo=bool(s.board_from_undo),
        overflow=int(s.overflow))


def _hidden(text: str, hidden: bool) -> str:
    return f"({text})" if hidden else text


def _block_token(block: dict) -> str:
    if block["spawn"] is None:
        return "#?"
    body = f"{block['program'] or block['points']}/{block['spawn']}"
    return f"#?({body})" if block["type"] == "question" else f"#{body}"


def _enemy_token(enemy: dict) -> str:
    text = f"{enemy['type'][0].upper()}{enemy['hp']}"
    text += "!" if enemy["stunned"] else ""
    text += f"z{enemy['disabled']}" if enemy["disabled"] > 0 else ""
    return _hidden(text, enemy["hidden"])


def _transmission_token(transmission: dict) -> str:
    kind = transmission["type"]
    letter = "" if kind is None else _hidden(kind[0].upper(), transmission["type_hidden"])
    return f"t{transmission['turns']}{letter}"


def _joined(texts: list, style: str) -> list:
    """Stacked items joined by ``+`` (the separator unstyled)."""
    parts = []
    for i, text in enumerate(texts):
        parts += ([("+", "plain")] if i else []) + [(text, style)]
    return parts


def token_parts(view: dict) -> list:
    """The token of one ``cell_view`` as (text, style) pairs in legend order; joining the texts
    gives ``cell_token``. Styles name what a part is (player, exit, siphon, block, question,
    siphoned, centre, credits, energy, virus/daemon/glitch/cryptog, transmission, hint), with a
    ``hidden-`` prefix for parts the agent cannot see (shown only with ``reveal``)."""
    parts = []
    if view["player"]:
        parts.append(("@", "player"))
    if view["exit"]:
        parts.append(("X", "exit"))
    if view["data_siphon"]:
        parts.append(("S", "siphon"))
    block = view["block"]
    if block is not None:
        style = "question" if block["type"] == "question" else "block"
        text = _block_token(block)
        if block["type"] == "question" and block["spawn"] is not None:
            parts += [("#?", style), (text[2:], "hidden-block")]
        else:
            parts.append((text, style))
    if view["siphoned"]:
        parts.append(("*", "siphoned"))
    if view["siphon_center"]:
        parts.append(("^", "centre"))
    resources = view["resources"]
    if resources is not None:
        kind = "credits" if resources["credits"] > 0 else "energy"
        amount = f"{kind[0]}{resources[kind]}"
        parts.append((_hidden(amount, resources["hidden"]),
                      ("hidden-" if resources["hidden"] else "") + kind))
    for i, enemy in enumerate(view["enemies"]):
        parts += ([("+", "plain")] if i else []) + [
            (_enemy_token(enemy), ("hidden-" if enemy["hidden"] else "") + enemy["type"])]
    parts += _joined([_transmission_token(t) for t in view["transmissions"]], "transmission")
    if view["cryptog_hint"]:
        parts.append(("C?", "hint"))
    return parts


def cell_token(view: dict) -> str:
    """The compact token of one ``cell_view`` (legend in the module docstring)."""
    return "".join(text for text, _ in token_parts(view)) or "."


def _yes_no(flag: bool) -> str:
    return "yes" if flag else "no"


def _header_lines(h: dict) -> list:
    status = (f"stage {h['stage']}  turn {h['turn']}  hp {h['hp']}  credits {h['credits']}  "
              f"energy {h['energy']}  siphons {h['siphons']}  score {h['score']}  "
              f"attack {h['attack']}")
    flags = (f"show {_yes_no(h['show'])}  calm {_yes_no(h['calm'])}  step {_yes_no(h['step'])}  "
             f"atk+ uses {h['atk_uses']}  pending siphon spawns {h['pending_siphon']}  "
             f"scheduled every {h['sched_interval']} next at turn {h['next_sched_turn']}  "
             f"undo history {h['history']}")
    if tuple(h["exit"]) != (GRID - 1, GRID - 1):
        flags += f"  exit {h['exit'][0]},{h['exit'][1]}"
    if h["board_from_undo"]:
        flags += "  board from undo"
    if h["overflow"]:
        flags += f"  OVERFLOW {h['overflow']}"
    return [status, flags, "programs: " + (" ".join(h["programs"]) or "-")]


def render_text(state, *, reveal: bool = False) -> str:
    """The header lines, then the board with row 5 at the top and row 0 at the bottom (as on the
    screen), one left-aligned fixed-width token per cell (the widest token sets the width)."""
    s = _host(state)
    visibility = _enemy_visibility(s)
    tokens = [[cell_token(_cell_view(s, row, col, reveal, visibility)) for col in range(GRID)]
              for row in range(GRID)]
    width = max(_MIN_CELL_WIDTH, max(len(token) for line in tokens for token in line))
    join = lambda cells: " ".join(cell.ljust(width) for cell in cells).rstrip()  # noqa: E731
    lines = _header_lines(header_view(s))
    lines.append("  " + join(str(col) for col in range(GRID)))
    lines += [f"{row} " + join(tokens[row]) for row in reversed(range(GRID))]
    return "\n".join(lines)


# --- frames: one step of a replay or of human play, shared by every renderer --------------------

def action_name(action: int, shot=None) -> str:
    """"move up" / "shoot left" (direction actions; "move/shoot up" when ``shot`` is unknown),
    "siphon", the program's name upper-case ("PUSH"), or "ACQUIRE (macro)" for the acquire
    macro of ``HackMatrix(acquire_macro=True)``."""
    action = int(action)
    if 0 <= action < len(DIR_NAMES):
        verb = "move/shoot" if shot is None else ("shoot" if shot else "move")
        return f"{verb} {DIR_NAMES[action]}"
    if action == ACTION_SIPHON:
        return "siphon"
    if PROGRAM_ACTION_OFFSET <= action < N_ACTIONS:
        return PROGRAM_NAMES[action - PROGRAM_ACTION_OFFSET].upper()
    if action == N_ACTIONS:
        return "ACQUIRE (macro)"
    raise ValueError(f"action must be in 0..{N_ACTIONS}, got {action}")


def _policy_label(action: int) -> str:
    # Before the step it is unknown whether a direction would move or shoot.
    return DIR_NAMES[action] if action < len(DIR_NAMES) else action_name(action)


def frame_view(state, *, reveal: bool = False, step=None, action=None, shot=None, probs=None,
               value=None, reward=None, breakdown=None, action_mask=None, outcome=None,
               top_k: int = 5) -> dict:
    """One displayable step as a JSON-able dict (plain Python values only).

    ``state`` is the position shown; ``probs`` (f[28]) and ``value`` are the policy's output at
    that position, ``action`` the action chosen there (named with ``shot`` from the step's info),
    ``reward`` / ``breakdown`` (component name -> value) what that action earned, ``action_mask``
    (bool[28]) marks which owned programs are currently valid, ``outcome`` a label for an ended
    episode ("won", "died", ...).

    Keys: step, reveal, header (``header_view``), cells (36 ``cell_view`` dicts in cell order,
    each with ``token`` and ``parts`` from ``token_parts``), action (None or {index, name}),
    policy (None or {value, top: [{action, name, prob}] of the ``top_k`` likeliest legal
    actions, directions: [p_up, p_down, p_left, p_right]}), reward (None or {total, components:
    the non-zero components}), programs (owned, in acquisition order: {action, name, credits,
    energy, valid (None without a mask)}), outcome.
    """
    s = _host(state)
    visibility = _enemy_visibility(s)
    cells = []
    for cell in range(GRID * GRID):
        view = _cell_view(s, cell // GRID, cell % GRID, reveal, visibility)
        parts = token_parts(view)
        view.update(token="".join(text for text, _ in parts) or ".", parts=[list(p) for p in parts])
        cells.append(view)
    header = header_view(s)
    header["exit"] = list(header["exit"])
    policy = None
    if probs is not None or value is not None:
        policy = {"value": None if value is None else float(value), "top": [], "directions": None}
        if probs is not None:
            p = np.asarray(probs, np.float64)
            order = [int(i) for i in np.argsort(-p, kind="stable") if p[i] > 0][:top_k]
            policy["top"] = [{"action": i, "name": _policy_label(i), "prob": float(p[i])}
                             for i in order]
            policy["directions"] = [float(x) for x in p[:len(DIR_NAMES)]]
    reward_view = None
    if reward is not None:
        # Swift's evaluation order (§8.2), whatever order the pytree dict came in.
        order = {name: i for i, name in enumerate(REWARD_FIELDS)}
        names = sorted(breakdown or {}, key=lambda n: (order.get(n, len(order)), n))
        components = {name: float(breakdown[name]) for name in names
                      if float(breakdown[name]) != 0.0}
        reward_view = {"total": float(reward), "components": components}
    rank = np.asarray(s.program_rank)
    mask = None if action_mask is None else np.asarray(action_mask)
    programs = [{"action": PROGRAM_ACTION_OFFSET + int(i), "name": PROGRAM_NAMES[i].upper(),
                 "credits": int(PROGRAM_COST_CREDITS[i]), "energy": int(PROGRAM_COST_ENERGY[i]),
                 "valid": None if mask is None else bool(mask[PROGRAM_ACTION_OFFSET + i])}
                for i in sorted(np.flatnonzero(rank >= 0), key=lambda i: rank[i])]
    return {"step": step, "reveal": bool(reveal), "header": header, "cells": cells,
            "action": None if action is None else {"index": int(action),
                                                   "name": action_name(action, shot)},
            "policy": policy, "reward": reward_view, "programs": programs, "outcome": outcome}


LEGEND = """legend: @ player  X exit  S data siphon on the floor  #5/5 data block (points/spawns)
  #push/4 program block  #? question block (#?(..) revealed)  * siphoned cell  ^ siphon centre
  c2 credits  e1 energy  V virus  D daemon  G glitch  C cryptog (letter + hp, ! stunned,
  z<n> disabled n turns, stacked enemies joined by +)  t2 transmission hatching in 2 turns
  (t2G: into a glitch, visible with SHOW)  C? last-known cell of a hidden cryptog
  (..) parts hidden from the agent, shown by --reveal"""

# ANSI SGR codes per token style (terminal colours); hidden parts are dimmed.
ANSI_STYLES = {
    "player": "1;93", "exit": "1;92", "siphon": "1;96", "block": "94", "question": "95",
    "siphoned": "90", "centre": "90", "credits": "33", "energy": "36", "virus": "1;91",
    "daemon": "1;31", "glitch": "1;35", "cryptog": "1;33", "transmission": "35", "hint": "2;33",
    "plain": "",
}
_RESET = "\x1b[0m"


def _styled(text: str, style: str, color: bool) -> str:
    if not color:
        return text
    code = "2" if style.startswith("hidden-") else ANSI_STYLES.get(style, "")
    return f"\x1b[{code}m{text}{_RESET}" if code else text


def _signed(x: float) -> str:
    return f"{x:+.4f}"


def format_frame(frame: dict, *, color: bool = False, legend: bool = False) -> str:
    """Terminal text of a ``frame_view``: the ``render_text`` header and board (ANSI colours
    when ``color``), then the action, reward with its non-zero components, value and top
    actions, owned programs with cost and validity, and the outcome. ``color=False`` output
    has no escape codes (goldens, logs, pipes)."""
    tokens = [[frame["cells"][row * GRID + col] for col in range(GRID)] for row in range(GRID)]
    width = max(_MIN_CELL_WIDTH, max(len(c["token"]) for line in tokens for c in line))

    def cell_text(cell):
        text = "".join(_styled(t, style, color) for t, style in cell["parts"]) or "."
        return text + " " * (width - len(cell["token"]))

    lines = _header_lines(frame["header"])
    lines.append("  " + " ".join(str(col).ljust(width) for col in range(GRID)).rstrip())
    lines += [(f"{row} " + " ".join(cell_text(c) for c in tokens[row])).rstrip()
              for row in reversed(range(GRID))]
    step = frame.get("step")
    if frame.get("action") is not None:
        prefix = f"step {step}: " if step is not None else ""
        lines.append(prefix + "action " + _styled(frame["action"]["name"], "player", color))
    reward = frame.get("reward")
    if reward is not None:
        parts = "  ".join(f"{name} {_signed(v)}" for name, v in reward["components"].items())
        lines.append(f"reward {_signed(reward['total'])}" + (f" = {parts}" if parts else ""))
    policy = frame.get("policy")
    if policy is not None:
        text = "" if policy["value"] is None else f"value {_signed(policy['value'])}  "
        text += "policy " + "  ".join(f"{t['name']} {100 * t['prob']:.1f}%" for t in policy["top"])
        lines.append(text.rstrip())
    if frame.get("outcome"):
        lines.append("episode over: " + frame["outcome"])
    if legend:
        lines.append(LEGEND)
    return "\n".join(lines)
