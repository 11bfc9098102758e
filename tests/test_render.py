"""Plain-text rendering; visibility follows programs-rewards-observation §9.1."""

import jax
import jax.numpy as jnp
import pytest

from envs.hackmatrix.viz.render_text import cell_view, header_view, render_text
from envs.hackmatrix.swift_io.scenario import set_state


def with_question_block(state, row, col):
    return state.replace(
        grid=state.grid.replace(question=state.grid.question.at[row * 6 + col].set(True)))


def board(show=False):
    """Player (0,0); a cryptog at (3,4) last seen at (2,4); a stunned virus stacked on a daemon
    at (4,1); a glitch transmission 2 turns out at (3,0); a question block hiding PUSH with 3
    credits under it at (1,2); a siphoned data block at (2,2); energy at (0,3); a data siphon at
    (0,5)."""
    state = set_state({
        "player": {"row": 0, "col": 0, "hp": 2, "credits": 4, "energy": 1, "dataSiphons": 1,
                   "score": 7, "attackDamage": 2},
        "stage": 3, "turn": 5, "showActivated": show, "ownedPrograms": [14, 5],
        "enemies": [{"type": "cryptog", "row": 3, "col": 4, "hp": 2},
                    {"type": "virus", "row": 4, "col": 1, "hp": 1, "stunned": True},
                    {"type": "daemon", "row": 4, "col": 1, "hp": 3}],
        "transmissions": [{"row": 3, "col": 0, "turnsRemaining": 2, "enemyType": "glitch"}],
        "blocks": [{"row": 1, "col": 2, "type": "program", "programType": "push"},
                   {"row": 2, "col": 2, "type": "data", "points": 3, "siphoned": True}],
        "resources": [{"row": 1, "col": 2, "credits": 3}, {"row": 0, "col": 3, "energy": 2},
                      {"row": 0, "col": 5, "dataSiphon": True}],
    })
    # The cryptog moved off the cell where it was last seen (game-rules §7.6).
    enemies = state.enemies.replace(last_row=state.enemies.last_row.at[0].set(2),
                                    last_col=state.enemies.last_col.at[0].set(4))
    return with_question_block(state.replace(enemies=enemies), 1, 2)


HEADER = (
    "stage 3  turn 5  hp 2  credits 4  energy 1  siphons 1  score 7  attack 2\n"
    "show {show}  calm no  step no  atk+ uses 0  pending siphon spawns 0  "
    "scheduled every 12 next at turn 12  undo history 0\n"
    "programs: undo push\n"
)


def test_golden_agent_view():
    """reveal=False shows what the agent sees: the hidden cryptog is absent and hinted at its
    last-known cell (C?), the question block is '#?' with its credits hidden, the transmission
    shows only its countdown; stacked enemies are listed in list order."""
    expected = HEADER.format(show="no") + (
        "  0      1      2      3      4      5\n"
        "5 .      .      .      .      .      X\n"
        "4 .      V1!+D3 .      .      .      .\n"
        "3 t2     .      .      .      .      .\n"
        "2 .      .      #3/3*  .      C?     .\n"
        "1 .      .      #?     .      .      .\n"
        "0 @      .      .      e2     .      S"
    )
    assert render_text(board()) == expected


def test_golden_reveal():
    """reveal=True adds the hidden parts in parentheses: the cryptog, the question block's
    content and its credits, the transmission's enemy type."""
    expected = HEADER.format(show="no") + (
        "  0              1              2              3              4              5\n"
        "5 .              .              .              .              .              X\n"
        "4 .              V1!+D3         .              .              .              .\n"
        "3 t2(G)          .              .              .              (C2)           .\n"
        "2 .              .              #3/3*          .              C?             .\n"
        "1 .              .              #?(push/2)(c3) .              .              .\n"
        "0 @              .              .              e2             .              S"
    )
    assert render_text(board(), reveal=True) == expected


def test_golden_show_activated():
    """§9.1: with SHOW the cryptog is reported (so no hint) and transmissions show their type;
    question contents stay hidden."""
    expected = HEADER.format(show="yes") + (
        "  0      1      2      3      4      5\n"
        "5 .      .      .      .      .      X\n"
        "4 .      V1!+D3 .      .      .      .\n"
        "3 t2G    .      .      .      C2     .\n"
        "2 .      .      #3/3*  .      .      .\n"
        "1 .      .      #?     .      .      .\n"
        "0 @      .      .      e2     .      S"
    )
    assert render_text(board(show=True)) == expected


def test_golden_player_on_exit_with_siphon_centre():
    """Parts of one cell are concatenated in legend order: player, exit, siphoned, centre."""
    state = set_state({"player": {"row": 5, "col": 5},
                       "blocks": [{"row": 5, "col": 5, "type": "none", "siphoned": True}],
                       "transmissions": [{"row": 0, "col": 0, "turnsRemaining": 0,
                                          "enemyType": "virus"}]})
    state = state.replace(
        grid=state.grid.replace(siphon_center=state.grid.siphon_center.at[35].set(True)))
    expected = (
        "stage 1  turn 0  hp 3  credits 0  energy 0  siphons 0  score 0  attack 1\n"
        "show no  calm no  step no  atk+ uses 0  pending siphon spawns 0  "
        "scheduled every 12 next at turn 12  undo history 0\n"
        "programs: -\n"
        "  0    1    2    3    4    5\n"
        "5 .    .    .    .    .    @X*^\n"
        "4 .    .    .    .    .    .\n"
        "3 .    .    .    .    .    .\n"
        "2 .    .    .    .    .    .\n"
        "1 .    .    .    .    .    .\n"
        "0 t0   .    .    .    .    ."
    )
    assert render_text(state) == expected


def test_cell_view_enemies_behind_a_hidden_cryptog_and_dead_enemies():
    """§9.1 / errata O5: a cell whose first live enemy is a hidden cryptog reports nothing, not
    even a visible enemy behind it; enemies with hp <= 0 are never reported."""
    state = set_state({"player": {"row": 0, "col": 0}, "enemies": [
        {"type": "virus", "row": 3, "col": 3, "hp": 0},
        {"type": "cryptog", "row": 3, "col": 3, "hp": 2},
        {"type": "glitch", "row": 3, "col": 3, "hp": 1}]})
    assert cell_view(state, 3, 3)["enemies"] == []
    revealed = cell_view(state, 3, 3, reveal=True)["enemies"]
    assert [(e["type"], e["hp"], e["hidden"]) for e in revealed] == [
        ("virus", 0, True), ("cryptog", 2, True), ("glitch", 1, True)]
    # The cryptog's hint is at its last-known position, its own cell here.
    assert cell_view(state, 3, 3)["cryptog_hint"]


def test_cell_view_cryptog_in_player_line_is_visible():
    """§9.1: a cryptog sharing the player's row or column is reported, with no hint."""
    state = set_state({"player": {"row": 3, "col": 0}, "enemies": [
        {"type": "cryptog", "row": 3, "col": 4, "hp": 2},
        {"type": "daemon", "row": 3, "col": 4, "hp": 1}]})
    view = cell_view(state, 3, 4)
    assert [(e["type"], e["hidden"]) for e in view["enemies"]] == [("cryptog", False),
                                                                    ("daemon", False)]
    assert not view["cryptog_hint"]


def test_cell_view_resources_visible_on_siphoned_block():
    """§9.1: resources under a block are shown once the cell is siphoned, hidden before."""
    state = set_state({"player": {"row": 0, "col": 0},
                       "blocks": [{"row": 2, "col": 2, "type": "data", "siphoned": True},
                                  {"row": 2, "col": 3, "type": "data"}],
                       "resources": [{"row": 2, "col": 2, "energy": 2},
                                     {"row": 2, "col": 3, "credits": 1}]})
    assert cell_view(state, 2, 2)["resources"] == {"credits": 0, "energy": 2, "hidden": False}
    assert cell_view(state, 2, 3)["resources"] is None
    assert cell_view(state, 2, 3, reveal=True)["resources"] == {"credits": 1, "energy": 0,
                                                                "hidden": True}


def test_header_view_lists_programs_in_acquisition_order():
    """§9.1 ownedPrograms: acquisition order (here ATK+, then PUSH)."""
    state = set_state({"player": {"row": 0, "col": 0}, "ownedPrograms": [26, 5]})
    assert header_view(state)["programs"] == ["atk+", "push"]


def test_batched_state_is_refused():
    batched = jax.tree.map(lambda x: jnp.stack([x, x]), set_state({"player": {"row": 0, "col": 0}}))
    with pytest.raises(ValueError, match="single state"):
        render_text(batched)


# --- frames (issue 6): one dict per displayed step, shared by the text, image and HTML views ----

import json  # noqa: E402
import re  # noqa: E402

import numpy as np  # noqa: E402

from envs.hackmatrix.viz.render_text import action_name, format_frame, frame_view  # noqa: E402
from envs.hackmatrix.viz.render_html import replay_html  # noqa: E402
from envs.hackmatrix.viz.render_image import COLOURS, FRAME_SIZE, render_image  # noqa: E402
from envs.hackmatrix.viz.render_image import _cell_box  # noqa: E402

AGENT_BOARD = (
    "  0      1      2      3      4      5\n"
    "5 .      .      .      .      .      X\n"
    "4 .      V1!+D3 .      .      .      .\n"
    "3 t2     .      .      .      .      .\n"
    "2 .      .      #3/3*  .      C?     .\n"
    "1 .      .      #?     .      .      .\n"
    "0 @      .      .      e2     .      S"
)


def policy_probs():
    """up 0.5, right 0.3, WAIT (action 5 + 5) 0.2, every other action masked (0)."""
    probs = np.zeros(28, np.float32)
    probs[[0, 3, 10]] = [0.5, 0.3, 0.2]
    return probs


def test_action_names():
    """Directions are named by what info["shot"] says happened; programs upper-case; 28 is the
    acquire macro (``HackMatrix(acquire_macro=True)``); beyond it there is no action."""
    assert action_name(0, shot=False) == "move up"
    assert action_name(2, shot=True) == "shoot left"
    assert action_name(1) == "move/shoot down"
    assert action_name(4) == "siphon"
    assert action_name(5) == "PUSH" and action_name(21) == "D_BOM" and action_name(27) == "HACK"
    assert action_name(28) == "ACQUIRE (macro)"
    for outside in (29, -1):
        with pytest.raises(ValueError):
            action_name(outside)


def test_golden_frame_text_with_action_policy_and_reward():
    """The board as render_text shows it, then the action, the reward with its non-zero
    components in Swift's evaluation order (§8.2: step_penalty before kills), the value and
    the likeliest legal actions, the outcome."""
    frame = frame_view(board(), step=4, action=0, shot=True, probs=policy_probs(), value=1.25,
                       reward=0.49, breakdown={"victory": 0.0, "kills": 0.5, "step_penalty": -0.01},
                       outcome="died")
    expected = HEADER.format(show="no") + AGENT_BOARD + (
        "\nstep 4: action shoot up\n"
        "reward +0.4900 = step_penalty -0.0100  kills +0.5000\n"
        "value +1.2500  policy up 50.0%  right 30.0%  WAIT 20.0%\n"
        "episode over: died"
    )
    assert format_frame(frame) == expected
    assert format_frame(frame_view(board())) == render_text(board())


def test_colour_text_strips_to_the_plain_text_and_dims_hidden_parts():
    frame = frame_view(board(), reveal=True, step=0, action=4, probs=policy_probs(), value=0.0)
    coloured = format_frame(frame, color=True, legend=True)
    assert "\x1b[" in coloured
    assert re.sub(r"\x1b\[[0-9;]*m", "", coloured) == format_frame(frame, legend=True)
    assert "\x1b[2m(C2)\x1b[0m" in coloured  # the hidden cryptog, revealed, is dimmed
    assert "C? last-known cell of a hidden cryptog" in coloured


def test_frame_view_is_json_and_follows_visibility():
    """§9.1: without reveal the cryptog is absent (hinted at (2,4)) and the question block's
    content is None; with reveal both are present and marked hidden."""
    agent = frame_view(board(), probs=policy_probs(), top_k=2,
                       action_mask=np.arange(28) == 14)
    json.dumps(agent)
    cell = lambda frame, row, col: frame["cells"][row * 6 + col]  # noqa: E731
    assert cell(agent, 3, 4)["enemies"] == [] and cell(agent, 2, 4)["cryptog_hint"]
    assert cell(agent, 1, 2)["block"]["program"] is None
    revealed = frame_view(board(), reveal=True)
    revealed_enemies = cell(revealed, 3, 4)["enemies"]
    assert [(e["type"], e["hidden"]) for e in revealed_enemies] == [("cryptog", True)]
    assert cell(revealed, 1, 2)["block"]["program"] == "push"
    # Top-k over legal actions only; direction probabilities in U, D, L, R order.
    assert [t["name"] for t in agent["policy"]["top"]] == ["up", "right"]
    assert agent["policy"]["directions"] == pytest.approx([0.5, 0.0, 0.0, 0.3])
    # Owned programs in acquisition order (UNDO then PUSH), costs from game-rules §1.3.
    assert agent["programs"] == [
        {"action": 14, "name": "UNDO", "credits": 1, "energy": 0, "valid": True},
        {"action": 5, "name": "PUSH", "credits": 0, "energy": 2, "valid": False}]


def test_image_frame_has_fixed_size_player_disc_and_hides_the_cryptog():
    frame = frame_view(board(), step=0, action=0, shot=False, probs=policy_probs(), value=0.1)
    image = render_image(frame)
    assert image.size == FRAME_SIZE
    x0, y0, x1, y1 = _cell_box(0, 0)  # the player's cell: a yellow disc at its centre
    assert image.getpixel(((x0 + x1) // 2 + 9, (y0 + y1) // 2)) == COLOURS["player"]
    revealed = render_image(frame_view(board(), reveal=True, step=0, action=0, shot=False,
                                       probs=policy_probs(), value=0.1))
    box = _cell_box(3, 4)
    assert np.any(np.asarray(image.crop(box)) != np.asarray(revealed.crop(box)))
    assert render_image(frame_view(board(), reveal=True)).size == FRAME_SIZE


def test_html_replay_embeds_frames_safely_and_offline():
    frames = [dict(frame_view(board(), step=0, outcome="</script><b>x"), episode=0)]
    page = replay_html(frames, title="t <&>")
    assert not re.search(r"https?://", page)
    assert page.count("</script>") == 2  # the frames' own "</" is escaped as "<\/"
    data = page[page.index('id="frames">') + len('id="frames">'):page.index("</script>")]
    assert json.loads(data)[0]["outcome"] == "</script><b>x"
    assert "<title>t &lt;&amp;&gt;</title>" in page
