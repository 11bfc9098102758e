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
"""

import jax
import numpy as np

from .constants import BLOCK, CRYPTOG, DATA_SIPHON, ENEMY_NAMES, EXIT, GRID, PROGRAM_NAMES

_MIN_CELL_WIDTH = 3


def _host(state):
    s = jax.device_get(state)
    if np.ndim(s.grid.content) != 1:
        raise ValueError("render takes a single state, not a batch")
    return s


def _in_order(active, seq) -> list:
    slots = np.flatnonzero(np.asarray(active))
    return [int(i) for i in slots[np.argsort(np.asarray(seq)[slots], kind="stable")]]


def _enemy_visibility(s):
    """(slots in list order, hidden flag per slot, set of cryptog-hint cells) per §9.1."""
    e, p = s.enemies, s.player
    order = _in_order(e.active, e.seq)
    live = np.asarray(e.hp) > 0
    cryptog_hidden = ((np.asarray(e.kind) == CRYPTOG) & (np.asarray(e.row) != p.row)
                      & (np.asarray(e.col) != p.col) & ~bool(s.show))
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
                     for i in _in_order(t.active, t.seq)
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


def cell_token(view: dict) -> str:
    """The compact token of one ``cell_view`` (legend in the module docstring)."""
    parts = ["@" if view["player"] else "", "X" if view["exit"] else "",
             "S" if view["data_siphon"] else ""]
    if view["block"] is not None:
        parts.append(_block_token(view["block"]))
    parts += ["*" if view["siphoned"] else "", "^" if view["siphon_center"] else ""]
    resources = view["resources"]
    if resources is not None:
        amount = (f"c{resources['credits']}" if resources["credits"] > 0
                  else f"e{resources['energy']}")
        parts.append(_hidden(amount, resources["hidden"]))
    parts.append("+".join(_enemy_token(enemy) for enemy in view["enemies"]))
    parts.append("+".join(_transmission_token(t) for t in view["transmissions"]))
    parts.append("C?" if view["cryptog_hint"] else "")
    return "".join(parts) or "."


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
    if h["exit"] != (GRID - 1, GRID - 1):
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
