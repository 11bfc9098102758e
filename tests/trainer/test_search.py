"""The search agent (purejaxrl/search.py with envs/hackmatrix/search_hooks.py, SPEC §4.5): it
plays only legal actions, finds a winning move with a uniform prior, is a function of its key,
gives expert iteration a policy target over the legal actions,
re-draws only what the player cannot see, and its evaluation loop plays the same boards as the
other rows. One compiled search (8 simulations, 2 worlds, a batch of 4 boards) serves every
search test; the evaluation-loop tests run on tiny in-test envs."""

import functools

from flax import struct
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from gymnax.environments import spaces

from envs.contract import Metric
from envs.hackmatrix import HackMatrix, build_observation, set_state
from envs.hackmatrix import determinize, search_hooks
from envs.hackmatrix.core.constants import N_ACTIONS, PROGRAM_ACTION_OFFSET, PROGRAM_NAMES, UNDO
from purejaxrl import search
from purejaxrl.cli.evaluate import main as evaluate_main
from purejaxrl.env_protocol import TrainerEnv
from purejaxrl.evaluation import RecurrentPolicy, game_outcomes, play_episodes, stage_report
from tests.trainer.fork_env import Fork, TableCritic

ENV = HackMatrix()  # set_state's shapes (no reward ledger)
RIGHT, DOWN, LEFT = 3, 1, 2


def _program(name):
    return PROGRAM_ACTION_OFFSET + PROGRAM_NAMES.index(name)


def winning_board():
    """Stage 8, 1 hp, the exit (5,5) one step right; a virus below and one to the left. Right
    wins the game; down or left shoots one virus and the other kills the player."""
    return set_state({"player": {"row": 5, "col": 4, "hp": 1}, "stage": 8,
                      "enemies": [{"type": "virus", "row": 4, "col": 4, "hp": 2},
                                  {"type": "virus", "row": 5, "col": 3, "hp": 2}]})


def program_board():
    """Owned, affordable programs next to blocks and enemies, so that many kinds of action
    are legal and the rest masked."""
    return set_state({
        "player": {"row": 2, "col": 2, "credits": 20, "energy": 20, "dataSiphons": 1},
        "ownedPrograms": [_program(name) for name in ("push", "crash", "wait", "debug", "exch")],
        "blocks": [{"row": 3, "col": 2, "type": "data", "points": 4},
                   {"row": 0, "col": 4, "type": "program", "programType": "warp"}],
        "enemies": [{"type": "daemon", "row": 2, "col": 4, "hp": 3},
                    {"type": "cryptog", "row": 4, "col": 0, "hp": 2}],
        "transmissions": [{"row": 5, "col": 1, "turnsRemaining": 2, "enemyType": "glitch"}]})


def undo_board():
    """UNDO legal (one snapshot, credits for it) beside a legal move: the search must move."""
    state = set_state({"player": {"row": 0, "col": 0, "credits": 5},
                       "ownedPrograms": [PROGRAM_ACTION_OFFSET + UNDO]})
    return state.replace(history=state.history.replace(size=jnp.int32(1)))


def stack(states):
    return jax.tree.map(lambda *leaves: jnp.stack(leaves), *states)


@functools.cache
def compiled_search():
    """The fair search (re-drawn worlds), uniform prior, exit-distance leaf, with its policy
    target (the teacher of expert iteration; its move is the search policy's): jitted once."""
    settings = search.SearchSettings(num_simulations=8, num_worlds=2)
    teacher = search.make_search_teacher(
        settings=settings, prior_fn=search.uniform_prior,
        **search_hooks.make_hooks(ENV, fair=True, leaf="exit"))
    return jax.jit(jax.vmap(teacher))


def boards():
    states = [winning_board(), program_board(), undo_board(), program_board()]
    return stack(states), jax.vmap(build_observation)(stack(states))


def run_search(seed):
    """(actions, policy targets) on the four boards."""
    states, obs = boards()
    actions, targets = compiled_search()(jax.random.split(jax.random.PRNGKey(seed), 4), obs,
                                         states)
    return np.asarray(actions), np.asarray(targets)


# Extended suite (`pytest -m slow`): the search compiled on the four boards, about 85 s.
SLOW = pytest.mark.slow


@pytest.fixture(scope="module")
def searched_with_targets():
    """(actions, policy targets) of the compiled search on the four boards, seeds 0..3."""
    return {seed: run_search(seed) for seed in range(4)}


@pytest.fixture(scope="module")
def searched(searched_with_targets):
    """Actions of the compiled search on the four boards for seeds 0..3."""
    return {seed: actions for seed, (actions, _) in searched_with_targets.items()}


@SLOW
def test_the_winning_board_is_what_its_docstring_says():
    """Precondition of the search test: right wins, down and left die, nothing else is legal."""
    state = winning_board()
    assert np.flatnonzero(np.asarray(build_observation(state).action_mask)).tolist() == [
        DOWN, LEFT, RIGHT]
    step = jax.jit(ENV.step_env)
    for action, won in ((RIGHT, True), (DOWN, False), (LEFT, False)):
        _, _, _, done, info = step(jax.random.PRNGKey(0), state, jnp.int32(action),
                                   ENV.default_params)
        assert bool(done) and bool(info["won"]) == won and bool(info["died"]) == (not won)


@SLOW
def test_uniform_prior_search_finds_the_only_winning_move(searched):
    """With no prior knowledge (uniform logits), the search plays the one action that wins
    (the last legal index, so a search that ignored its values would pick another)."""
    assert [actions[0] for actions in searched.values()] == [RIGHT] * 4


@SLOW
def test_search_never_selects_a_masked_action(searched):
    """Every chosen action is legal in the board's observation, and UNDO is never played
    while another action is legal (the model cannot replay a re-drawn world's history)."""
    _, obs = boards()
    mask = np.asarray(obs.action_mask)
    assert mask[2, PROGRAM_ACTION_OFFSET + UNDO] and mask[1].sum() > 5  # the boards' premise
    for actions in searched.values():
        assert mask[np.arange(4), actions].all()
        assert actions[2] != PROGRAM_ACTION_OFFSET + UNDO


@SLOW
def test_search_is_deterministic_for_a_fixed_key(searched):
    """The same key gives the same actions (a fresh call, not a cached result)."""
    for seed in (0, 3):
        assert run_search(seed)[0].tolist() == searched[seed].tolist()


@SLOW
def test_policy_target_is_a_distribution_over_the_searchable_actions(searched_with_targets):
    """Expert iteration's target: zero on masked actions and on UNDO (never searched), sums
    to 1; on the winning board the winning move carries the most weight."""
    _, obs = boards()
    mask = np.asarray(obs.action_mask)
    for actions, targets in searched_with_targets.values():
        assert np.allclose(targets.sum(axis=1), 1.0, atol=1e-5)
        assert (targets[~mask] == 0).all() and (targets >= 0).all()
        assert (targets[:, PROGRAM_ACTION_OFFSET + UNDO] == 0).all()
        assert targets[0].argmax() == RIGHT


# ------------------------------------------------------------------ determinisation

def hidden_board():
    """Hidden fields of every kind: two cryptogs out of the player's line, a visible cryptog in
    its row, two question blocks, a revealed program block, transmissions, resources under a
    block."""
    state = set_state({
        "player": {"row": 0, "col": 0},
        "blocks": [{"row": 2, "col": 2, "type": "data", "points": 3},
                   {"row": 3, "col": 4, "type": "program", "programType": "push"},
                   {"row": 4, "col": 1, "type": "program", "programType": "crash"}],
        "resources": [{"row": 3, "col": 4, "credits": 2}],
        "enemies": [{"type": "cryptog", "row": 3, "col": 3, "hp": 2},
                    {"type": "cryptog", "row": 1, "col": 5, "hp": 1},
                    {"type": "cryptog", "row": 0, "col": 4, "hp": 2},
                    {"type": "virus", "row": 2, "col": 4, "hp": 2}],
        "transmissions": [{"row": 5, "col": 2, "turnsRemaining": 1, "enemyType": "daemon"},
                          {"row": 1, "col": 3, "turnsRemaining": 2, "enemyType": "virus"}]})
    question = np.zeros(36, bool)
    question[[2 * 6 + 2, 3 * 6 + 4]] = True
    return state.replace(grid=state.grid.replace(question=jnp.asarray(question)))


@functools.cache
def compiled_redraw():
    return jax.jit(jax.vmap(determinize.redraw_hidden, in_axes=(0, None)))


def assert_same_observations(worlds, state):
    """Every world's observation is the state's: integers and flags exactly, floats to a
    millionth (their values are at least 0.02 apart; two programs may round x / 50 apart)."""
    observe = jax.jit(jax.vmap(build_observation))
    shown = jax.device_get(observe(worlds))
    truth = jax.device_get(observe(jax.tree.map(lambda x: x[None], state)))
    for seen, original in zip(jax.tree.leaves(shown), jax.tree.leaves(truth)):
        if np.issubdtype(seen.dtype, np.floating):
            assert np.abs(seen - original).max() < 1e-6
        else:
            assert (seen == original).all()


def redraws(state, count=64):
    return compiled_redraw()(jax.random.split(jax.random.PRNGKey(7), count), state)


def test_redrawn_worlds_keep_the_observation_and_change_the_hidden_fields():
    """Every re-drawn world shows exactly the original's observation (mask included), while
    what it hides is re-drawn: both hidden cryptogs move, question blocks and transmission
    types vary, resources under the block vanish; what is seen stays put."""
    state = hidden_board()
    worlds, level = redraws(state)
    assert_same_observations(worlds, state)
    assert np.asarray(level).tolist() == [0] * 64
    e = jax.device_get(worlds.enemies)
    cells = e.row * 6 + e.col  # [draw, slot]; slots in set_state order
    assert (cells[:, 0] != 3 * 6 + 3).mean() > 0.8 and (cells[:, 1] != 1 * 6 + 5).mean() > 0.8
    assert (cells[:, 0] != cells[:, 1]).all()
    assert (cells[:, 2] == 4).all() and (cells[:, 3] == 2 * 6 + 4).all()  # seen: kept
    g = jax.device_get(worlds.grid)
    question_cells = [2 * 6 + 2, 3 * 6 + 4]
    assert len({tuple(row) for row in g.program[:, question_cells]}) > 10
    assert len({tuple(row) for row in g.points[:, question_cells]}) > 10
    assert (g.program[:, 4 * 6 + 1] == PROGRAM_NAMES.index("crash")).all()  # revealed: kept
    assert (g.program[:, question_cells] != PROGRAM_NAMES.index("crash")).all()
    assert (g.credits[:, 3 * 6 + 4] == 0).all()
    kinds = jax.device_get(worlds.transmissions.kind)[:, :2]
    assert len({tuple(row) for row in kinds}) > 4


def test_a_cryptog_the_mask_reveals_keeps_its_cell():
    """A hidden cryptog on a block is the only enemy on a block, so it alone makes DEBUG legal:
    no cell a proposal may use keeps the mask, and the world keeps the cryptog's cell
    (level 1) with the same observation."""
    state = set_state({"player": {"row": 0, "col": 0, "credits": 10, "energy": 10},
                       "ownedPrograms": [_program("debug")],
                       "blocks": [{"row": 3, "col": 3, "type": "data", "points": 2}],
                       "enemies": [{"type": "cryptog", "row": 3, "col": 3, "hp": 2}]})
    assert bool(build_observation(state).action_mask[_program("debug")])
    worlds, level = redraws(state)
    assert np.asarray(level).tolist() == [1] * 64
    e = jax.device_get(worlds.enemies)
    assert ((e.row[:, 0] == 3) & (e.col[:, 0] == 3)).all()
    assert_same_observations(worlds, state)


def test_transmission_types_are_redrawn_under_show_which_the_observation_does_not_encode():
    """SHOW shows what a transmission hatches into in the game's own view, but no channel of
    the numeric observation encodes it (programs-rewards-observation §9.2): a fair world
    re-draws the types under SHOW too, keeping the observation."""
    state = set_state({"player": {"row": 0, "col": 0}, "showActivated": True,
                       "transmissions": [
                           {"row": 3, "col": 3, "turnsRemaining": 2, "enemyType": "daemon"},
                           {"row": 4, "col": 2, "turnsRemaining": 1, "enemyType": "daemon"}]})
    worlds, level = redraws(state)
    assert np.asarray(level).tolist() == [0] * 64
    kinds = jax.device_get(worlds.transmissions.kind)[:, :2]
    assert len({tuple(row) for row in kinds}) > 4
    assert_same_observations(worlds, state)


def reduc_exhausted_board(revealed_points: int):
    """The player owns REDUC and can pay for it; a revealed data block of ``revealed_points``
    and a question block holding 5 points, both with spawn count 0 (REDUC used until none is
    left above 0)."""
    state = set_state({"player": {"row": 0, "col": 0, "credits": 50, "energy": 50},
                       "ownedPrograms": [_program("reduc")],
                       "blocks": [{"row": 2, "col": 2, "type": "data",
                                   "points": revealed_points},
                                  {"row": 3, "col": 4, "type": "data", "points": 5}]})
    question = np.zeros(36, bool)
    question[3 * 6 + 4] = True
    return state.replace(grid=state.grid.replace(question=jnp.asarray(question),
                                                 spawn=jnp.zeros(36, jnp.int32)))


def test_question_blocks_redrawn_after_reduc_keep_its_cuts_and_the_mask():
    """REDUC lowered every unsiphoned block's spawn count (here 3 times: the revealed data
    block of 3 points shows 0, so REDUC is no longer legal); the mask shows REDUC exhausted, so
    a re-drawn question block's count is 0 and every world keeps the mask and hides the
    block's contents (level 0), where a full count made REDUC legal and left only the true
    state."""
    state = reduc_exhausted_board(revealed_points=3)
    assert not bool(build_observation(state).action_mask[_program("reduc")])
    assert int(determinize.reduc_uses(state)) == 3
    worlds, level = redraws(state)
    assert np.asarray(level).tolist() == [0] * 64
    g = jax.device_get(worlds.grid)
    assert (g.spawn[:, 3 * 6 + 4] == 0).all()
    assert len(set(g.points[:, 3 * 6 + 4].tolist())) > 1
    assert_same_observations(worlds, state)


def test_reduc_exhausted_beyond_what_the_revealed_blocks_show_keeps_the_worlds_fair():
    """The revealed blocks bound REDUC's uses only from below: a revealed data block of 1 point
    at 0 says 1 use, while the hidden block of 5 points needed 5. The mask still shows REDUC
    exhausted (owned, affordable, not legal), so every world sets the hidden count to 0 and
    keeps the observation (level 0); with the cuts alone, draws above 1 left REDUC legal, and
    where no proposal kept the mask the world was the true state (level 2)."""
    state = reduc_exhausted_board(revealed_points=1)
    assert int(determinize.reduc_uses(state)) == 1
    assert bool(determinize.reduc_shown_exhausted(state))
    worlds, level = redraws(state)
    assert np.asarray(level).tolist() == [0] * 64
    g = jax.device_get(worlds.grid)
    assert (g.spawn[:, 3 * 6 + 4] == 0).all()
    assert len(set(g.points[:, 3 * 6 + 4].tolist())) > 1
    assert_same_observations(worlds, state)
    # Not shown where the player cannot pay for REDUC: its mask entry says nothing then.
    poor = state.replace(player=state.player.replace(credits=jnp.int32(0),
                                                     energy=jnp.int32(0)))
    assert not bool(determinize.reduc_shown_exhausted(poor))


# ------------------------------------------------------------------ the evaluation loop

@struct.dataclass
class CountdownObs:
    action_mask: jax.Array


@struct.dataclass
class CountdownState:
    target: jax.Array  # the board: drawn from the reset key
    time: jax.Array


class Countdown:
    """A board is a number 1..9 drawn at reset; the episode lasts that many steps and is won
    when it is even. Deterministic after reset: a loop's results show which boards it played.
    Its metrics are named like HackMatrix's (outcomes, R9 completions, siphons and programs,
    the last counted per stage) and its resource at the end is its clock, so both evaluation
    loops have every field of the stage report to record."""

    default_params = None
    num_stages = 9
    metrics = (
        Metric("won", lambda obs, action, info: info["won"], at_end=True, summary="win_rate"),
        Metric("died", lambda obs, action, info: info["died"], at_end=True),
        Metric("invalid", lambda obs, action, info: info["invalid_action"]),
        Metric("undo_exploit", lambda obs, action, info: info["undo_exploit_completion"]),
        Metric("siphons", lambda obs, action, info: action == 4),
        Metric("programs", lambda obs, action, info: action >= PROGRAM_ACTION_OFFSET,
               per_stage=True),
    )

    def episode_resources(self, state):
        return {"clock": state.time}

    def action_space(self, params):
        return spaces.Discrete(N_ACTIONS)

    def action_mask(self, obs):
        return obs.action_mask

    def reset(self, key, params):
        state = CountdownState(target=jax.random.randint(key, (), 1, 10), time=jnp.int32(0))
        return CountdownObs(jnp.ones(N_ACTIONS, bool)), state

    def step(self, key, state, action, params):
        del key
        state = state.replace(time=state.time + 1)
        done = state.time >= state.target
        won = done & (state.target % 2 == 0)
        info = {"stage": state.target, "won": won, "died": done & ~won,
                "invalid_action": jnp.bool_(False), "undo_exploit_completion": jnp.bool_(False)}
        return (CountdownObs(jnp.ones(N_ACTIONS, bool)), state,
                state.target.astype(jnp.float32) + action, done, jnp.bool_(False), info)


def counting_policy(key, obs, env_state):
    return jnp.int32(4)  # the siphon index: counted by play_episodes and by the counters


def countdown():
    return TrainerEnv(Countdown(), None)


def test_play_boards_plays_play_episodes_boards_whatever_the_lanes():
    """Per board, play_boards records every field play_episodes records on the same key (the
    same boards: the env's metrics, the per-stage steps and counts, the resources at the end),
    with 1, 3, 16 or all boards in flight (16 and 17 lanes end on 2: the tail's narrower
    phase), so a search row gets the same stage report."""
    env, key, boards = countdown(), jax.random.PRNGKey(3), 17
    reference = jax.device_get(jax.jit(lambda k: play_episodes(
        env, None, counting_policy, k, boards, 50))(key))
    assert len(set(reference["length"].tolist())) > 3  # the boards differ
    # The two longest games outlast the rest: all lanes' last step is played on 2 lanes.
    assert sorted(reference["length"].tolist())[-3] < max(reference["length"].tolist())
    assert {"stage_steps", "stage_programs", "end_clock", "siphons"} <= set(reference)
    assert search.lane_widths(boards) == [17, 2] and search.lane_widths(8) == [8]
    assert search.lane_widths(64) == [64, 8] and search.lane_widths(256) == [256, 32, 4]
    for lanes in (1, 3, 16, boards):
        pooled = jax.device_get(jax.jit(lambda k, lanes=lanes: search.play_boards(
            env, None, counting_policy, k, boards, 50, lanes))(key))
        assert set(pooled) == set(reference), lanes
        for name, values in pooled.items():
            assert values.tolist() == reference[name].tolist(), (lanes, name)


def test_recording_the_actions_changes_no_game():
    """``record_actions`` only adds ``actions`` (each env's, -1 after its end) to
    ``play_episodes``' results: the same keys play the same games, so a recorded evaluation's
    figures are the unrecorded one's."""
    from purejaxrl.evaluation import random_policy
    env, key, boards = countdown(), jax.random.PRNGKey(4), 7
    plain, recorded = (jax.device_get(jax.jit(lambda k, record=record: play_episodes(
        env, None, random_policy(env), k, boards, 50, record_actions=record))(key))
        for record in (False, True))
    assert set(recorded) == set(plain) | {"actions"}
    for name, values in plain.items():
        assert values.tolist() == recorded[name].tolist(), name
    for actions, length in zip(recorded["actions"], recorded["length"]):
        assert np.all(actions[:length] >= 0) and np.all(actions[length:] == -1)
    assert len({tuple(a) for a in recorded["actions"].tolist()}) > 1  # random, not constant


def test_a_search_row_has_the_stage_report_of_every_other_row(capsys):
    """``evaluate.py``'s search and rollout rows (``evaluate_search.play_row``) carry the stage
    report a policy row gets from ``play_episodes`` on the same boards: where the games end,
    the steps and per-stage counts, the resources at the end."""
    import argparse
    from purejaxrl.cli import evaluate_search
    env, key, boards = countdown(), jax.random.PRNGKey(3), 11
    played = jax.jit(lambda k: play_episodes(env, None, counting_policy, k, boards, 50))(key)
    reference = stage_report(played, env.num_stages)
    args = argparse.Namespace(episodes=boards, search_boards_in_flight=3, record_actions=False)
    summary = evaluate_search.play_row(args, env, None, counting_policy, key, 50, "row", {})
    assert summary["stages"] == reference
    # The row reports as it goes: at the end, every board finished and the games won.
    progress = [line for line in capsys.readouterr().err.splitlines() if "boards finished" in line]
    assert progress[-1].startswith(f"row: {boards}/{boards} boards finished, "
                                   f"{int(np.sum(jax.device_get(played['won'])))} won (")
    assert summary["games"] == game_outcomes(played)  # board by board, in the same order
    assert any(row["ended"]["died"] for row in reference)  # the report is not empty


def alternating_policy():
    """A policy with a memory (the steps it has taken on this board): it siphons on even
    steps and moves on odd ones, so its siphon count shows whether its memory restarts with
    every board."""
    def act(key, obs, env_state, steps):
        return jnp.where(steps % 2 == 0, 4, 0).astype(jnp.int32), steps + 1
    return RecurrentPolicy(act, jnp.int32(0))


def test_play_boards_gives_every_board_a_fresh_memory():
    """A recurrent policy's memory starts from its initial memory on every board, also on a
    lane that has played other boards: per board, play_boards records what play_episodes
    does, and the siphons are the board's even steps."""
    env, key, boards, policy = countdown(), jax.random.PRNGKey(3), 11, alternating_policy()
    reference = jax.device_get(jax.jit(lambda k: play_episodes(
        env, None, policy, k, boards, 50))(key))
    assert (reference["siphons"] == (reference["length"] + 1) // 2).all()
    # 3 lanes for 11 boards: every lane plays several boards in turn.
    pooled = jax.device_get(jax.jit(lambda k: search.play_boards(
        env, None, policy, k, boards, 50, 3))(key))
    for name in ("length", "stage", "siphons"):
        assert pooled[name].tolist() == reference[name].tolist(), name


def test_stage_of_reads_the_stage_the_player_is_shown():
    """HackMatrix's ``search_hooks.stage_of`` (the switch of ``--search-until-stage``) is the
    stage, which the observation shows (its sixth player feature, (stage - 1) / 7): a policy
    that switches on it uses nothing hidden."""
    state = winning_board()
    assert int(search_hooks.stage_of(state)) == 8
    assert float(build_observation(state).player[5]) == 1.0


def test_hand_over_plays_the_second_policy_from_the_switch_on():
    """``search.hand_over``: the first policy's move until the switch holds, the second's from
    then on (Countdown's clock is the steps taken: the switch at clock 3)."""
    env, key, boards = countdown(), jax.random.PRNGKey(3), 11
    moving = lambda key, obs, env_state: jnp.int32(0)  # noqa: E731
    policy = search.hand_over(counting_policy, moving, lambda obs, state: state.time >= 3)
    played = jax.device_get(jax.jit(lambda k: play_episodes(
        env, None, policy, k, boards, 50))(key))
    assert (played["siphons"] == np.minimum(played["length"], 3)).all()
    assert played["length"].max() > 3


def test_hand_over_carries_the_memory_across_the_switch():
    """Two recurrent policies share the player's memory: the second starts from the memory
    the first left (here the steps taken), not from a fresh one. The first siphons on even
    steps, the second on odd ones, so every game's siphons follow from its length alone."""
    env, key, boards = countdown(), jax.random.PRNGKey(3), 11

    def odd_steps(key, obs, env_state, steps):
        return jnp.where(steps % 2 == 1, 4, 0).astype(jnp.int32), steps + 1
    policy = search.hand_over(alternating_policy(), RecurrentPolicy(odd_steps, jnp.int32(0)),
                              lambda obs, state: state.time >= 3)
    played = jax.device_get(jax.jit(lambda k: play_episodes(
        env, None, policy, k, boards, 50))(key))
    expected = [sum(1 for t in range(n) if (t < 3 and t % 2 == 0) or (t >= 3 and t % 2 == 1))
                for n in played["length"].tolist()]
    assert played["siphons"].tolist() == expected
    assert played["length"].max() >= 6  # games long enough to show a reset memory


def test_play_boards_records_final_state_values_from_the_last_chosen_state():
    """``final_state_values`` are read from the state each game's last action was chosen in
    (as ``episode_resources``): for Countdown, whose clock counts the steps taken, that is the
    episode's length - 1, and a vector value keeps its shape per board. ``on_progress`` hears
    of every board that ends (the boards finished and won so far), the last call all of them."""
    env, key, boards = countdown(), jax.random.PRNGKey(3), 11
    values = {"clock": lambda state: state.time,
              "pair": lambda state: jnp.stack([state.time, state.target])}
    heard = []
    pooled = jax.device_get(jax.jit(lambda k: search.play_boards(
        env, None, counting_policy, k, boards, 50, 3, values,
        on_progress=lambda finished, won: heard.append((int(finished), int(won)))))(key))
    assert (pooled["clock"] == pooled["length"] - 1).all()
    assert pooled["pair"].shape == (boards, 2)
    assert (pooled["pair"][:, 1] == pooled["stage"]).all()
    # One call per step in which boards ended: distinct counts, the wins growing with them.
    heard.sort()
    assert len({finished for finished, _ in heard}) == len(heard)
    assert [won for _, won in heard] == sorted(won for _, won in heard)
    assert heard[-1] == (boards, int(pooled["won"].sum()))
    assert 0 < int(pooled["won"].sum()) < boards


def test_play_boards_stops_a_board_at_max_steps_unfinished():
    """A board still running at ``max_steps`` is recorded as unfinished, with its length."""
    env, key = countdown(), jax.random.PRNGKey(3)
    pooled = jax.device_get(search.play_boards(env, None, counting_policy, key, 6, 4, 2))
    assert pooled["length"].tolist() == np.minimum(
        jax.device_get(jax.vmap(env.reset, (0, None))(
            jax.random.split(jax.random.split(key)[0], 6), None)[1].target), 4).tolist()
    assert (pooled["finished"] == (pooled["stage"] <= 4)).all()


def test_stage_shares_count_every_stage_reached():
    """The share reaching stage k counts the episodes that ended on stage k or later."""
    shares = search.stage_reached_shares(
        {"stage": np.array([1, 2, 2, 5, 8]), "won": np.array([0, 0, 0, 0, 1], bool)}, 8)
    assert shares == {"2": 0.8, "3": 0.4, "4": 0.4, "5": 0.4, "6": 0.2, "7": 0.2, "8": 0.2,
                      "won": 0.2}


# ------------------------------------------------------------------ the critic as leaf value

def fork_search_move(critic, uniform_share: float = 0.0, leaf_bonus=None,
                     rescale_values: bool = True) -> int:
    """The move of a noise-free 8-simulation search at the fork's start that maximises the
    "gain" in the critic's units (reward scale 0.5, gamma 0.99), with ``critic`` as prior
    (mixed with ``uniform_share`` of uniform) and leaf value (plus ``leaf_bonus(state)``),
    its Q-values min-max normalised or (``rescale_values`` False) raw."""
    fork = Fork()
    settings = search.SearchSettings(num_simulations=8, gamma=0.99, gumbel_scale=0.0,
                                     rescale_values=rescale_values)
    hooks = search.critic_objective(TrainerEnv(fork, None), critic, None, "gain",
                                    reward_scale=0.5)
    if leaf_bonus is not None:
        hooks["leaf_value"] = search.with_value_bonus(hooks["leaf_value"], leaf_bonus)
    act = search.make_search_policy(
        fork, None, settings, prior_fn=search.network_prior(critic, None, uniform_share),
        **hooks)
    obs, state = fork.reset(None, None)
    return int(jax.jit(act)(jax.random.PRNGKey(0), obs, state))


def test_value_leaf_searches_the_networks_own_return():
    """``critic_objective``: a step earns the training reward times the reward scale (the
    critic's units), a leaf is worth the critic's value, so the move is the larger of
    scale x gain (action 0: 0.5, V(position 1) = 0) and gamma x V(position 2) (action 1).
    With V = 0.8 the search moves to position 2 (it would not if the scale were ignored:
    1 > 0.8); with V = 0.2 it takes the gain (it would not if the env's reward, -5, were
    searched)."""
    for value, expected in ((0.8, 1), (0.2, 0)):
        assert fork_search_move(TableCritic([0.0, 0.0, value])) == expected, value


def test_a_leaf_bonus_makes_the_search_take_the_branch_it_pays_for():
    """``with_value_bonus``: a bonus on a state is added to every leaf value there. With V = 0.2
    at position 2 the search takes the gain (0.5 against 0.99 x 0.2); a bonus of 0.6 on
    position 2 makes that branch worth 0.99 x 0.8 > 0.5, and the search moves there. A bonus
    on position 1 instead leaves the move at the gain."""
    for rewarded, expected in ((2, 1), (1, 0)):
        def bonus(state, rewarded=rewarded):
            return jnp.where(state == rewarded, 0.6, 0.0)
        assert fork_search_move(TableCritic([0.0, 0.0, 0.2]),
                                leaf_bonus=bonus) == expected, rewarded


def test_mix_uniform_mixes_over_the_legal_actions_only():
    """``mix_uniform``: share 0 is the logits as they are; share s gives (1 - s) x the
    network's probabilities + s x uniform over the legal actions, and illegal actions keep
    no probability."""
    logits = jnp.array([2.0, 0.0, -3.0, 5.0])
    mask = jnp.array([True, True, True, False])
    assert search.mix_uniform(logits, mask, 0.0) is logits
    probs = jax.nn.softmax(search.mix_uniform(logits, mask, 0.3))
    legal = jax.nn.softmax(jnp.array([2.0, 0.0, -3.0]))
    np.testing.assert_allclose(probs[:3], 0.7 * legal + 0.1, rtol=1e-5)
    assert float(probs[3]) == 0.0


def test_mix_over_groups_opens_every_group_and_keeps_the_odds_inside_one():
    """``mix_uniform`` over action groups ({0, 1} moves, {2} siphon, {3, 4} programs, action 4
    illegal): the uniform part gives each group with a legal action 1/3, shared inside the
    group as the network shares it; so the siphon the network all but never plays gets about
    share / 3, while the odds of move 0 against move 1 are the network's exactly."""
    logits = jnp.array([2.0, 0.0, -9.0, -9.0, 4.0])
    mask = jnp.array([True, True, True, True, False])
    groups = jnp.array([[1, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1], [0, 0, 1]], jnp.float32)
    probs = jax.nn.softmax(search.mix_uniform(logits, mask, 0.3, groups))
    network = jax.nn.softmax(jnp.array([2.0, 0.0, -9.0, -9.0]))
    moves = network[0] + network[1]
    expected = 0.7 * network + 0.1 * jnp.array([network[0] / moves, network[1] / moves, 1, 1])
    np.testing.assert_allclose(probs[:4], expected, rtol=1e-5)
    np.testing.assert_allclose(probs[0] / probs[1], network[0] / network[1], rtol=1e-5)
    assert float(probs[4]) == 0.0


class SharpCritic(TableCritic):
    """A critic whose policy all but never plays action 1 (logits 0 and -12)."""

    def apply(self, params, obs):
        return jnp.array([0.0, -12.0]), self.values[obs.position]


def test_a_uniform_share_in_the_prior_lets_the_search_choose_what_the_network_vetoes():
    """Gumbel MuZero adds the prior's logits to the rescaled Q-values (at most about 5 at
    mctx's defaults): with V(position 2) = 0.8 the search's values favour action 1 (0.99 x 0.8
    against the gain of 0.5), but a prior 12 logits against it keeps the move at action 0.
    Half uniform in the prior lets the values decide."""
    for share, expected in ((0.0, 0), (0.5, 1)):
        assert fork_search_move(SharpCritic([0.0, 0.0, 0.8]), share) == expected, share


class LeaningCritic(TableCritic):
    """A critic whose policy prefers action 0 by 2 logits."""

    def apply(self, params, obs):
        return jnp.array([0.0, -2.0]), self.values[obs.position]


def test_raw_q_values_let_only_a_difference_of_real_size_overrule_the_prior():
    """Min-max normalisation stretches any difference of the root's Q-values to the full
    weight (about 5 logits at mctx's defaults): action 1 worth 0.99 x 0.52 = 0.515 against
    action 0's 0.5 overrules a prior 2 logits against it. With raw values the 0.015 weighs
    about 0.1 logit and the prior's move stands; a real difference (0.99 x 1.2 = 1.19 against
    0.5, about 3.7 logits) still overrules it."""
    for value, rescale, expected in ((0.52, True, 1), (0.52, False, 0), (1.2, False, 1)):
        assert fork_search_move(LeaningCritic([0.0, 0.0, value]),
                                rescale_values=rescale) == expected, (value, rescale)


def test_mix_where_mixes_only_where_the_predicate_holds():
    """``mix_uniform_where``: where ``mix_where(obs)`` is false the network's logits stand as
    they are; where it is true they are ``mix_uniform``'s; without a predicate, everywhere."""
    @struct.dataclass
    class Obs:
        action_mask: jax.Array
        flag: jax.Array

    logits = jnp.array([2.0, 0.0, -9.0])
    mask = jnp.array([True, True, True])
    mixed = search.mix_uniform(logits, mask, 0.3)
    where = lambda obs: obs.flag  # noqa: E731
    np.testing.assert_array_equal(
        search.mix_uniform_where(logits, Obs(mask, jnp.bool_(False)), 0.3, None, where), logits)
    np.testing.assert_array_equal(
        search.mix_uniform_where(logits, Obs(mask, jnp.bool_(True)), 0.3, None, where), mixed)
    np.testing.assert_array_equal(
        search.mix_uniform_where(logits, Obs(mask, jnp.bool_(False)), 0.3), mixed)


def acquiring_board(**changes):
    """Player at (2, 2) with a data siphon and a warp program block above, at (3, 2), in the
    siphon cross (game-rules §2: centre and the 4 orthogonal cells)."""
    scenario = {"player": {"row": 2, "col": 2, "dataSiphons": 1},
                "blocks": [{"row": 3, "col": 2, "type": "program", "programType": "warp"}]}
    for key, value in changes.items():
        scenario[key] = value
    return set_state(scenario)


def test_acquisition_in_reach_is_a_siphon_that_would_take_a_program_not_owned():
    """``search_hooks.acquisition_in_reach`` from the observation alone (game-rules §6: a siphon
    takes every unsiphoned block of the cross, and a program block gives its program if not
    owned): true for a warp block above the player with a siphon in hand; false once warp is
    owned, with no siphon in hand, for a block on the diagonal, for a block already siphoned,
    and for a question block (its program is hidden)."""
    reach = jax.jit(lambda state: search_hooks.acquisition_in_reach(build_observation(state)))
    warp = {"row": 3, "col": 2, "type": "program", "programType": "warp"}
    assert bool(reach(acquiring_board()))
    question = acquiring_board()
    cell = 3 * 6 + 2
    question = question.replace(grid=question.grid.replace(
        question=question.grid.question.at[cell].set(True)))
    for name, state in {
            "owned": acquiring_board(ownedPrograms=[_program("warp")]),
            "no siphon": acquiring_board(player={"row": 2, "col": 2}),
            "diagonal": acquiring_board(blocks=[{**warp, "col": 3}]),
            "siphoned": acquiring_board(blocks=[{**warp, "siphoned": True}]),
            "question": question}.items():
        assert not bool(reach(state)), name


def test_the_explore_pool_narrows_the_exploration_target_to_its_programs():
    """``HackMatrix(explore_pool=NAMES)``: the exploration target is the acquiring siphon of a
    pool program only (``acquisition_in_reach``'s ``wanted_programs``); the warp block above
    the player is a target with no pool or a pool naming warp, and none with a pool of reset;
    the action is the siphon either way."""
    obs = build_observation(acquiring_board())
    for pool, offered in (((), True), (("warp", "reset"), True), (("reset",), False)):
        reach, action = jax.jit(HackMatrix(explore_pool=pool).exploration_target)(obs)
        assert bool(reach) == offered, pool
        assert int(action) == search_hooks.ACTION_SIPHON
    with pytest.raises(ValueError, match="explore_pool must name distinct programs"):
        HackMatrix(explore_pool=("resett",))


def test_program_bonus_is_the_sum_over_the_programs_owned():
    """``search_hooks.program_bonus``: the bonuses of the owned programs add up; programs not
    named, or named but not owned, add nothing; an unknown name is refused at once."""
    bonus = search_hooks.program_bonus({"reset": 0.5, "siph+": 0.25, "warp": 2.0})
    player = {"row": 0, "col": 0}
    owning = set_state({"player": player, "ownedPrograms": [
        _program("reset"), _program("siph+"), _program("crash")]})
    assert float(bonus(owning)) == pytest.approx(0.75)
    assert float(bonus(set_state({"player": player}))) == 0.0
    with pytest.raises(ValueError, match="unknown programs resett"):
        search_hooks.program_bonus({"resett": 1.0})


def test_threat_cost_prices_the_crowd_beyond_the_stage_start_transmissions():
    """``search_hooks.threat_cost``: ``-cost`` per enemy alive and per transmission pending
    (each hatches into an enemy; both are kept into the next stage, game-rules §3.3), less the
    1 + 2 + ... + stage transmissions the stages have added at their start, so that an exit,
    which adds the new stage's, changes nothing by itself; a slot whose enemy has no HP left
    is not a threat; a negative or non-finite cost is refused. ``search.sum_value_terms``
    adds it to the program bonus."""
    def board(stage, transmissions=1):
        return set_state({
            "stage": stage, "player": {"row": 0, "col": 0},
            "ownedPrograms": [_program("reset")],
            "enemies": [{"type": "daemon", "row": 2, "col": 4, "hp": 3},
                        {"type": "virus", "row": 4, "col": 4, "hp": 0},
                        {"type": "glitch", "row": 1, "col": 1, "hp": 1}],
            "transmissions": [{"row": 5, "col": index, "turnsRemaining": 2,
                               "enemyType": "glitch"} for index in range(transmissions)]})
    cost = search_hooks.threat_cost(0.25)
    assert float(search_hooks.threat_count(board(1))) == 3.0
    assert float(cost(board(1))) == pytest.approx(-0.25 * (3 - 1))
    assert float(cost(board(3))) == pytest.approx(-0.25 * (3 - 6))
    assert float(cost(board(4, transmissions=1 + 4))) == pytest.approx(float(cost(board(3))))
    both = search.sum_value_terms([search_hooks.program_bonus({"reset": 2.0}), cost])
    assert float(both(board(1))) == pytest.approx(1.5)
    assert search.sum_value_terms([]) is None
    for bad in (-1.0, float("nan")):
        with pytest.raises(ValueError, match="a threat cost must be a finite number >= 0"):
            search_hooks.threat_cost(bad)


def test_a_recurrent_search_carries_the_memory_down_the_tree():
    """``make_recurrent_search_teacher``: the root is evaluated from the player's memory and
    each child from its parent's memory after the parent's observation. The node here counts
    observations, and position 2 is worth 0.8 from the seventh observation of the episode on
    (the player has seen 5, the root is the 6th, every node below it is later); against the
    gain of 0.5, the search moves there only if the memory travelled root -> child. The
    memory it hands back is the root's (6). From a memory far below, the same tree never
    values position 2, and the search takes the gain."""
    fork = Fork()
    objective = search.critic_objective(TrainerEnv(fork, None), TableCritic([0.0, 0.0, 0.0]),
                                        None, "gain", reward_scale=0.5)

    def node_fn(seen, key, obs, state):
        seen = seen + 1
        return seen, jnp.zeros(2), jnp.where((obs.position == 2) & (seen >= 7), 0.8, 0.0)

    teach = search.make_recurrent_search_teacher(
        fork, None, search.SearchSettings(num_simulations=8, gumbel_scale=0.0),
        node_fn=node_fn, reward_fn=objective["reward_fn"])
    obs, state = fork.reset(None, None)
    teach = jax.jit(teach)
    action, _, memory, _ = teach(jax.random.PRNGKey(0), obs, state, jnp.int32(5))
    assert (int(action), int(memory)) == (1, 6)
    action, _, _, _ = teach(jax.random.PRNGKey(0), obs, state, jnp.int32(-100))
    assert int(action) == 0


# ------------------------------------------------------------------ the command line

@pytest.mark.parametrize("arguments, message", [
    (["--search-simulations", "0"], "--search-simulations must be >= 1, got 0"),
    (["--search-simulations", "16", "-3"], "--search-simulations must be >= 1, got -3"),
    (["--search-simulations", "8", "--search-worlds", "0"], "--search-worlds must be >= 1"),
    (["--search-simulations", "8", "--search-boards-in-flight", "0"],
     "--search-boards-in-flight must be >= 1"),
    (["--search-simulations", "8", "--search-prior", "checkpoint"],
     "--search-prior checkpoint needs --checkpoint"),
    (["--search-simulations", "8", "--search-leaf", "value"],
     "--search-leaf value needs --checkpoint"),
    (["--policies", "none"], "--policies none leaves nothing to evaluate"),
    (["--search-program-bonus", "reset=0.5"],
     "--search-program-bonus needs --search-simulations or --rollout-search"),
    (["--search-simulations", "8", "--search-program-bonus", "reset=0.5", "reset=1"],
     "--search-program-bonus names a program twice"),
    (["--search-threat-cost", "0.5"],
     "--search-threat-cost needs --search-simulations or --rollout-search"),
    (["--search-simulations", "8", "--search-threat-cost", "0"],
     "--search-threat-cost must be > 0, got 0"),
    (["--search-simulations", "8", "--search-value-scale", "0"],
     "--search-value-scale must be > 0, got 0"),
    (["--search-simulations", "8", "--search-gumbel-scale", "-1"],
     "--search-gumbel-scale must be >= 0, got -1"),
    (["--rollout-search", "2", "--search-gumbel-scale", "0"],
     "--search-value-scale and --search-gumbel-scale shape the tree search"),
    (["--search-simulations", "8", "--search-prior-mix", "1.5"],
     "--search-prior-mix must be in [0, 1], got 1.5"),
    (["--search-simulations", "8", "--search-prior-mix", "0.25"],
     "--search-prior-mix mixes uniform into the checkpoint's prior: it needs one"),
    (["--search-simulations", "8", "--search-prior-mix-over", "groups"],
     "--search-prior-mix-over groups needs --search-prior-mix"),
    (["--search-simulations", "8", "--search-prior-mix-where", "acquire"],
     "--search-prior-mix-where acquire needs --search-prior-mix"),
    (["--rollout-search", "0"], "--rollout-search must be >= 1, got 0"),
    (["--rollout-search", "2", "--rollout-horizon", "-1"], "--rollout-horizon must be >= 0"),
    (["--rollout-search", "2", "--rollout-candidates", "0"],
     "--rollout-candidates must be >= 1"),
    (["--rollout-search", "2", "--rollout-min-gain-z", "-1"],
     "--rollout-min-gain-z must be >= 0"),
    (["--rollout-search", "1", "4", "--rollout-min-gain-z", "2"],
     "--rollout-min-gain-z needs --rollout-search R >= 2"),
    (["--rollout-search", "2", "--rollout-hold", "0"],
     "--rollout-hold must be in 1..--rollout-horizon + 1 = 9, got 0"),
    (["--rollout-search", "2", "--rollout-horizon", "2", "--rollout-hold", "4"],
     "--rollout-hold must be in 1..--rollout-horizon + 1 = 3, got 4"),
    (["--rollout-search", "2", "--rollout-hold", "1", "12"],
     "--rollout-hold must be in 1..--rollout-horizon + 1 = 9, got 12"),
    (["--rollout-hold", "3"], "--rollout-hold needs --rollout-search"),
    (["--rollout-search", "2", "--search-leaf", "rollout"],
     "--search-leaf rollout does not apply to --rollout-search"),
    (["--rollout-search", "2", "--rollout-policy", "greedy"],
     "--rollout-policy greedy needs --checkpoint"),
    (["--policies", "none", "--rollout-search", "2", "--search-leaf", "value"],
     "--search-leaf value needs --checkpoint"),
])
def test_bad_search_options_fail_at_once_with_one_line(arguments, message, capsys,
                                                       monkeypatch):
    """Bad search options get a one-line error and exit 2 before any work (JAX not used)."""
    assert_refused_before_work(arguments, message, capsys, monkeypatch)


@pytest.mark.parametrize("arguments, message", [
    (["--rollout-search", "2", "--search-prior", "uniform"],
     "--search-prior is the tree search's prior: it needs --search-simulations"),
    (["--rollout-search", "2", "--search-prior-mix", "0.25"],
     "--search-prior-mix opens the tree search's prior: it needs --search-simulations"),
    (["--rollout-search", "2", "--search-worlds", "8"],
     "--search-worlds is the tree search's worlds per move: it needs --search-simulations"),
    (["--search-worlds", "4"], "--search-worlds is the tree search's worlds per move"),
    (["--search-simulations", "8", "--search-information", "perfect", "--search-worlds", "8"],
     "--search-worlds re-draws what the player cannot see"),
    (["--search-information", "perfect"],
     "--search-information needs --search-simulations or --rollout-search"),
    (["--search-leaf", "zero"], "--search-leaf needs --search-simulations or --rollout-search"),
    (["--search-raw-values"],
     "--search-raw-values shapes the tree search: it needs --search-simulations"),
    (["--search-boards-in-flight", "8"],
     "--search-boards-in-flight needs --search-simulations or --rollout-search"),
    (["--search-simulations", "8", "--rollout-horizon", "4"],
     "--rollout-horizon needs --rollout-search"),
    (["--rollout-candidates", "8"], "--rollout-candidates needs --rollout-search"),
    (["--rollout-policy", "sampled"], "--rollout-policy needs --rollout-search"),
    (["--rollout-min-gain-z", "1"], "--rollout-min-gain-z needs --rollout-search"),
])
def test_a_search_flag_no_row_reads_is_refused(arguments, message, capsys, monkeypatch):
    """A search flag where no row it shapes is asked for (the tree's worlds and prior with
    only rollout rows, any search flag without search rows, the rollouts' without rollout
    rows; even given at its default) is refused before any work, one line, exit 2, not
    accepted and ignored."""
    assert_refused_before_work(arguments, message, capsys, monkeypatch)


def assert_refused_before_work(arguments, message, capsys, monkeypatch):
    """evaluate.py with ``arguments`` exits 2 with the one line ``error: <message>...``,
    before any JAX work (a PRNG key made is work started)."""
    def no_work(*args, **kwargs):
        raise AssertionError("work started")
    monkeypatch.setattr(jax.random, "PRNGKey", no_work)
    assert evaluate_main(arguments) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {message}") and "\n" not in err


def test_value_and_gumbel_scales_reach_the_tree_search_and_name_its_row(monkeypatch):
    """``--search-value-scale V --search-gumbel-scale G`` are the ``SearchSettings`` of every
    tree row and its name's ``-vsV-gG`` (the defaults, 0.1 and 1, add no tag), and
    ``--search-raw-values`` its raw Q-values and ``-raw``; the JSON's cost records all three.
    No board is played here."""
    from purejaxrl.cli import evaluate, evaluate_search
    captured = {}

    def capture(settings, **hooks):
        captured.setdefault("settings", []).append(settings)
        return "policy"
    monkeypatch.setattr(search, "make_search_policy", capture)
    monkeypatch.setattr(evaluate_search, "play_row",
                        lambda args, env, params, policy, key, steps, name, cost: cost)
    env = TrainerEnv(HackMatrix(), None)
    for flags, name, scales in (
            ([], "search-4", (0.1, 1.0, True)),
            (["--search-value-scale", "0.5", "--search-gumbel-scale", "0"], "search-4-vs0.5-g0",
             (0.5, 0.0, True)),
            (["--search-raw-values", "--search-value-scale", "0.02"], "search-4-raw-vs0.02",
             (0.02, 1.0, False))):
        captured.clear()
        args = evaluate.build_parser().parse_args(["--search-simulations", "4", *flags])
        rows = evaluate_search.search_rows(args, env, None, None, None, None, 10)
        assert list(rows) == [name]
        settings = captured["settings"][0]
        assert (settings.value_scale, settings.gumbel_scale, settings.rescale_values) == scales
        assert (rows[name]["value_scale"], rows[name]["gumbel_scale"],
                rows[name]["rescale_values"]) == scales


@pytest.mark.parametrize("value", ["reset", "reset=high", "=0.5", "reset=nan"])
def test_a_malformed_program_bonus_is_refused_by_the_parser(value, capsys):
    """``--search-program-bonus`` takes NAME=number: anything else exits 2 with one line."""
    with pytest.raises(SystemExit) as exit_info:
        evaluate_main(["--search-simulations", "8", "--search-program-bonus", value])
    assert exit_info.value.code == 2
    assert "expected NAME=VALUE" in capsys.readouterr().err


@pytest.mark.parametrize("flags, message", [
    (["--search-simulations", "8"], "--search-until-stage hands the game"),
    (["--policies", "random"], "--search-until-stage needs --search-simulations"),
])
def test_search_until_stage_needs_a_search_and_a_checkpoint(flags, message, capsys):
    """``--search-until-stage`` hands the game to the checkpoint's greedy move: without a
    search row or a checkpoint it is refused before any work, exit 2, one line."""
    assert evaluate_main([*flags, "--search-until-stage", "8"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {message}") and "\n" not in err


def test_search_reward_needs_the_value_leaf(capsys):
    """``--search-reward`` sets the reward the search's steps earn in the critic's units, so
    it needs the critic's leaf (``--search-leaf value``): refused before any work, one line."""
    assert evaluate_main(["--search-simulations", "8", "--search-reward", "stages"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --search-reward needs --search-leaf value") and "\n" not in err


@pytest.mark.parametrize("flags", [["--rollout-search", "2", "--rollout-hold", "4"],
                                   ["--search-simulations", "8", "--search-hold-plans", "2"]])
def test_holding_a_plan_is_refused_on_an_env_without_one(flags, capsys, monkeypatch):
    """``--rollout-hold`` and ``--search-hold-plans`` need plan actions (HackMatrix: the
    acquire macro, which only an --acquire-macro checkpoint's env has; without one a -holdS
    row is the unheld one): refused once the env is built, before any play."""
    def no_play(*args, **kwargs):
        raise AssertionError("play started")
    monkeypatch.setattr(search, "play_boards", no_play)
    assert evaluate_main(["--policies", "none", *flags]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith(f"error: {flags[2]} needs an env with plan actions")


def test_an_unknown_program_bonus_is_refused_before_any_play(capsys, monkeypatch):
    """A program the env does not know is refused once the env is built, before any board is
    played: exit 2, one line."""
    def no_play(*args, **kwargs):
        raise AssertionError("play started")
    monkeypatch.setattr(search, "play_boards", no_play)
    assert evaluate_main(["--policies", "none", "--search-simulations", "8",
                          "--search-program-bonus", "resett=0.5"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("error: --search-program-bonus: unknown programs resett")


@pytest.mark.parametrize("fixture", ["recorded_random_games", "recorded_random_episodes"])
def test_recorded_actions_re_simulate_each_board_step_for_step(fixture, request):
    """Both evaluation loops keep each board's actions with ``record_actions``
    (``play_boards``, the search rows'; ``play_episodes``, every other row's), and
    ``recorded_games.game_keys`` of the loop gives the keys the board was played with:
    stepping HackMatrix from the board's reset key with those actions (the replay's own jitted
    step, ``viz.replay.jitted_env_step``) earns the same return and ends on the same step,
    also for boards that a lane took over from another (play_boards: 2 lanes, 4 boards)."""
    from envs.hackmatrix.viz.replay import jitted_env_step, jitted_reset
    from purejaxrl.recorded_games import game_keys
    recorded = request.getfixturevalue(fixture)
    env, env_params, played, games = (recorded[name] for name in
                                      ("env", "env_params", "played", "games"))
    seed, boards = recorded["seed"], recorded["boards"]
    reset, step = jitted_reset(env.env), jitted_env_step(env.env)
    longest = max(len(actions) for actions in games["actions"])
    reset_keys, _, env_keys = game_keys(recorded["loop"], seed, boards, list(range(boards)),
                                        longest)
    ended = 0
    for board in range(boards):
        actions = games["actions"][board]
        assert len(actions) == games["length"][board] > 0
        assert np.all(played["actions"][board, len(actions):] == -1)
        state, total = reset(reset_keys[board], env_params), 0.0
        for t, action in enumerate(actions):
            out = jax.device_get(step(env_keys[board, t], state, jnp.int32(action), env_params))
            assert bool(out["mask"][action])  # the recorded action was legal there
            state, total = out["state"], total + float(out["reward"])
            over = bool(out["terminated"]) or bool(out["truncated"])
            assert over == (t + 1 == len(actions) and games["end"][board] != "unfinished")
        ended += games["end"][board] in ("won", "died")
        assert total == pytest.approx(games["return"][board], abs=1e-3)
    assert ended >= 1  # a game that ends inside the cap is re-simulated to its end


def test_a_held_plan_is_played_again_while_legal_then_the_policy_plays():
    """``hold_plans``: once the policy picks a plan action, that action is played on the next
    S - 1 steps while it stays legal; the policy's own memory advances every step; a plan
    action that turns illegal ends the hold at once."""
    plan = 5
    plans = np.zeros(6, bool)
    plans[plan] = True

    def act(key, obs, env_state, steps):  # the plan on its first step, then always action 1
        return jnp.where(steps == 0, plan, 1).astype(jnp.int32), steps + 1

    legal_until = {"t": 99}

    def legal(obs):
        return jnp.ones(6, bool).at[plan].set(obs < legal_until["t"])

    for hold, until, want in ((1, 99, [5, 1, 1, 1, 1]), (3, 99, [5, 5, 5, 1, 1]),
                              (3, 2, [5, 5, 1, 1, 1])):
        legal_until["t"] = until
        held = search.hold_plans(RecurrentPolicy(act, jnp.int32(0)), plans, hold, legal)
        memory, played = held.initial_memory, []
        for t in range(5):
            action, memory = held.act(None, jnp.int32(t), None, memory)
            played.append(int(action))
        assert played == want, (hold, until)
        assert int(memory[0]) == 5  # the policy's memory counted every step


def test_a_fair_rows_name_carries_a_world_count_other_than_the_default():
    """Two world counts in one table are two rows: ``-wK`` where K is not the default; a
    perfect-information row searches the one true world and carries none."""
    from purejaxrl.cli.evaluate_search import DEFAULT_WORLDS, row_name
    assert row_name(16, "checkpoint", True, "value") == "search-16-ppo-value"
    assert row_name(16, "checkpoint", True, "value", worlds=DEFAULT_WORLDS) == "search-16-ppo-value"
    assert row_name(16, "checkpoint", True, "value", worlds=8) == "search-16-ppo-w8-value"
    assert row_name(16, "uniform", False, worlds=1) == "search-16-perfect-info"


def test_a_critic_trained_with_the_program_potential_is_no_leaf_value(tmp_path, capsys):
    """The program potential pays gamma * Phi(s') - Phi(s), so a critic trained with it learned
    the return less Phi(s); the search's model pays no potential, so that critic as the leaf
    value would dock every program a leaf owns. ``--search-leaf value`` on such a checkpoint
    is refused once the env is built, before any play (exit 2, one line), and so is
    ``--distill-leaf value`` in a run with the potential (a ConfigError from ``ppo.build``);
    without the potential both are accepted."""
    from purejaxrl import ppo
    from purejaxrl.config import ConfigError, TrainConfig
    from tests.initial_checkpoint import save_initial_checkpoint
    config = TrainConfig(num_envs=2, num_steps=8, total_timesteps=16, num_minibatches=1,
                         update_epochs=1, hidden_width=8, hidden_depth=1, core_width=8,
                         max_episode_steps=20).with_env_options(program_potential=0.5)
    run_dir = save_initial_checkpoint(config, str(tmp_path / "potential"), "potential")
    assert evaluate_main(["--checkpoint", run_dir, "--policies", "none",
                          "--search-simulations", "2", "--search-leaf", "value"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("error: --search-leaf value: the network was trained with "
                          "program_potential 0.5")
    distilling = config.replace(distill_coef=0.5, distill_leaf="value")
    with pytest.raises(ConfigError, match="--distill-leaf value: the network was trained"):
        ppo.build(distilling)
    ppo.build(distilling.with_env_options(program_potential=0.0))
    assert search_hooks.critic_leaf_problem({"program_potential": 0.0}) is None


def test_the_model_pays_the_potential_shaping_at_the_searchs_discount():
    """The search's model shapes with gamma * Phi(s') - Phi(s) at the search's own discount
    (a critic's gamma for a value leaf: its training paid the shaping at that gamma), not at
    the env's default 0.99 (until stop 81). The model's params carry it (``shaping_gamma``,
    which the env's step reads)."""
    hooks = search_hooks.make_hooks(ENV, fair=False, leaf="zero", gamma=0.999)
    assert float(hooks["model_params"].shaping_gamma) == 0.999
    default = search_hooks.make_hooks(ENV, fair=False, leaf="zero")
    assert float(default["model_params"].shaping_gamma) == search_hooks.DEFAULT_GAMMA
