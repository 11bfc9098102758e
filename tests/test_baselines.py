"""The scripted HackMatrix baseline (envs/hackmatrix/baselines.py, run by scripts/evaluate.py;
issue P7): shoot what is in line (game-rules §5), else step along the BFS shortest path to the
exit (§8.5: blocks impassable).
Boards are built by hand; directions are U, D, L, R = actions 0..3 with up = row + 1."""

import jax
import jax.numpy as jnp
import numpy as np

from envs.hackmatrix.core.constants import BLOCK, EXIT, VIRUS
from envs.hackmatrix.core.entities import append_enemy
from envs.hackmatrix.core.mask import action_mask
from envs.hackmatrix.core.state import blank_state
from envs.hackmatrix.baselines import heuristic_policy


class _MaskOnly:
    """The heuristic reads only the mask from the observation."""

    def __init__(self, mask):
        self.action_mask = mask


def board(player, exit_cell=(0, 5), blocks=(), enemy=None):
    state = blank_state()
    content = state.grid.content
    for row, col in blocks:
        content = content.at[row * 6 + col].set(BLOCK)
    content = content.at[exit_cell[0] * 6 + exit_cell[1]].set(EXIT)
    state = state.replace(grid=state.grid.replace(content=content),
                          player=state.player.replace(row=jnp.int32(player[0]),
                                                      col=jnp.int32(player[1])),
                          exit_row=jnp.int32(exit_cell[0]), exit_col=jnp.int32(exit_cell[1]))
    if enemy is not None:
        state = append_enemy(state, True, VIRUS, enemy[0], enemy[1])
    return state


def test_heuristic_choices_on_hand_built_boards():
    states = [
        # Open row to the exit at (0, 5): step right.
        board(player=(0, 0)),
        # A block at (0, 1): right is masked; up (1, 0) starts a 6-step path round it.
        board(player=(0, 0), blocks=[(0, 1)]),
        # A virus in line above at (4, 0): shoot up rather than walk right.
        board(player=(0, 0), enemy=(4, 0)),
        # A virus behind a block is not in line: keep walking right.
        board(player=(0, 0), blocks=[(2, 0)], enemy=(4, 0)),
        # Next to the exit from above: step down onto it.
        board(player=(1, 5)),
    ]
    batch = jax.tree.map(lambda *xs: jnp.stack(xs), *states)
    masks = jax.vmap(action_mask)(batch)
    act = jax.jit(jax.vmap(lambda s, m: heuristic_policy(None, _MaskOnly(m), s)))
    actions = np.asarray(act(batch, masks))
    np.testing.assert_array_equal(actions, [3, 0, 0, 3, 1])
