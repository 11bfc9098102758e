"""The program-block curriculum (``HackMatrix(program_block_pool=NAMES,
program_block_share=P)``, the trainer's ``--program-block-pool``): on a share P of generated
stage boards (a new game's first and every stage advance's) the unsiphoned block nearest the
player holds a visible block of a pool program; the player still has to siphon it. The rest of
the board is the game's own, programs stay distinct within a stage (game-rules §3.4 step 2.3),
the block's transmission spawn is its program's (game-rules §1.3), and a policy loaded to play
is judged on the game's own boards."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from envs.hackmatrix.core.constants import BLOCK, GRID, N_CELLS, PROGRAM_SPAWN_COST, RESET
from envs.hackmatrix.env import HackMatrix
from purejaxrl.config import ConfigError, TrainConfig, validate_config
from tests.game_harness import scenario

PLAIN = HackMatrix()
PLANTED = HackMatrix(program_block_pool=("reset",), program_block_share=1.0)
PARAMS = PLAIN.default_params
KEYS = jax.random.split(jax.random.PRNGKey(3), 48)
RIGHT = 3


def _resets(env):
    return jax.jit(jax.vmap(lambda key: env.reset(key, PARAMS)[1]))(KEYS)


def _lane(tree, i):
    return jax.tree.map(lambda x: np.asarray(x[i]), tree)


def _distances(state):
    cells = np.arange(N_CELLS)
    return (np.abs(cells // GRID - int(state.player.row))
            + np.abs(cells % GRID - int(state.player.col)))


def _assert_planted_reset(board, own):
    """``board`` is ``own`` (the game's board) with a visible RESET block on a nearest block."""
    grid, own_grid = board.grid, own.grid
    np.testing.assert_array_equal(grid.content, own_grid.content)
    np.testing.assert_array_equal(grid.credits, own_grid.credits)
    np.testing.assert_array_equal(grid.energy, own_grid.energy)
    blocks = own_grid.content == BLOCK
    [cell] = np.flatnonzero(grid.program == RESET)
    assert blocks[cell] and _distances(board)[cell] == _distances(board)[blocks].min()
    assert not grid.question[cell] and grid.points[cell] == 0
    assert grid.spawn[cell] == PROGRAM_SPAWN_COST[RESET]
    programs = grid.program[grid.program >= 0]
    assert len(set(programs.tolist())) == len(programs)
    # The board's other programs are its own: a block that held RESET got the planted
    # block's old content, so the multiset of contents is only rearranged or overwritten.
    own_programs = set(own_grid.program[own_grid.program >= 0].tolist())
    assert set(programs.tolist()) - own_programs <= {RESET}
    for name in ("player", "enemies", "transmissions", "stage", "program_rank"):
        same = jax.tree.map(np.array_equal, getattr(board, name), getattr(own, name))
        assert all(jax.tree.leaves(same)), name


def test_every_new_games_nearest_block_holds_a_visible_pool_program():
    """Share 1: each reset's nearest block (ties drawn) is a visible RESET block with RESET's
    spawn; layout, resources, player, enemies and transmissions are the plain reset's; where
    the board already held RESET elsewhere, the two blocks swapped contents."""
    plain, planted = _resets(PLAIN), _resets(PLANTED)
    moved = 0
    for i in range(len(KEYS)):
        own, board = _lane(plain, i), _lane(planted, i)
        _assert_planted_reset(board, own)
        if RESET in own.grid.program:
            moved += 1
            [old] = np.flatnonzero(own.grid.program == RESET)
            [new] = np.flatnonzero(board.grid.program == RESET)
            if old != new:  # the swap: the old holder has the planted block's old content
                assert board.grid.program[old] == own.grid.program[new]
                assert board.grid.points[old] == own.grid.points[new]
                assert board.grid.spawn[old] == own.grid.spawn[new]
    assert moved >= 1  # the keys include boards that held RESET already (the swap is run)


def test_share_zero_and_no_pool_are_the_plain_game():
    """Share 0 plants nothing; without a pool (the default) the env's graph is the game's."""
    never = HackMatrix(program_block_pool=("reset",), program_block_share=0.0)
    same = jax.tree.map(np.array_equal, _resets(PLAIN), _resets(never))
    assert all(jax.tree.leaves(same))
    assert PLAIN.program_block_pool == () and PLAIN != PLANTED


def test_a_share_plants_on_about_that_share_of_boards():
    """Share 0.5: boards are drawn independently, so some but not all hold RESET nearest."""
    half = HackMatrix(program_block_pool=("reset",), program_block_share=0.5)
    boards = _resets(half)
    nearest_reset = [_lane(boards, i).grid.program[np.argmin(np.where(
        _lane(boards, i).grid.content == BLOCK, _distances(_lane(boards, i)), 99))] == RESET
        for i in range(len(KEYS))]
    assert 10 <= sum(nearest_reset) <= 38


def test_a_stage_advance_plants_on_the_next_stages_board():
    """Completing a stage generates the next board (game-rules §3.3): with the option, that
    board's block nearest the player (who stands on the old exit) is a RESET block too."""
    state = scenario(player={"row": 5, "col": 4}, stage=2)
    key = jax.random.PRNGKey(7)
    _, own, *_ = jax.jit(PLAIN.step_env)(key, state, jnp.int32(RIGHT), PARAMS)
    _, board, *_ = jax.jit(PLANTED.step_env)(key, state, jnp.int32(RIGHT), PARAMS)
    assert int(board.stage) == 3
    _assert_planted_reset(jax.device_get(board), jax.device_get(own))


def test_option_values_are_checked_and_travel_through_the_command_line():
    with pytest.raises(ValueError, match="program_block_pool must name distinct programs"):
        HackMatrix(program_block_pool=("resett",))
    with pytest.raises(ValueError, match="program_block_share must be in"):
        HackMatrix(program_block_pool=("reset",), program_block_share=2.0)
    with pytest.raises(ConfigError, match="program_block_share must be in"):
        validate_config(TrainConfig(env_options=dict(program_block_pool=("reset",),
                                                     program_block_share=-0.1)))
    from purejaxrl.cli.train import build_parser
    args = build_parser().parse_args(["--program-block-pool", "reset,siph+",
                                      "--program-block-share", "0.25"])
    assert args.program_block_pool == ("reset", "siph+") and args.program_block_share == 0.25
    config = TrainConfig(env_options=dict(program_block_pool=("reset",),
                                          program_block_share=0.25))
    assert TrainConfig.from_dict(config.to_dict()) == config
    older = config.to_dict()
    del older["env_options"]["program_block_pool"], older["env_options"]["program_block_share"]
    assert TrainConfig.from_dict(older).env_option("program_block_pool") == ()
    assert config.for_play().env_option("program_block_pool") == ()


def test_the_trainer_builds_it_and_toy_does_not_take_it():
    from purejaxrl import ppo
    env, _ = ppo.make_env(TrainConfig(env_options=dict(program_block_pool=("reset",),
                                                       program_block_share=0.3)))
    assert env.env.program_block_pool == ("reset",) and env.env.program_block_share == 0.3
    with pytest.raises(ConfigError, match="--program-block-pool needs an env that takes it"):
        ppo.make_env(TrainConfig(env="toy", env_options=dict(program_block_pool=("reset",))))
