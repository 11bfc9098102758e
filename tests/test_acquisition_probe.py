"""``scripts/acquisition_probe.py`` (SPEC §4.4): where it says a siphon would acquire a program,
one would; the state it values as owning the program owns it and nothing else changes; bad
input is one line and exit 2 before any work."""

import jax.numpy as jnp
import numpy as np

from envs.hackmatrix.core.constants import ACTION_SIPHON, BLOCK, RESET
from envs.hackmatrix.observation import build_observation
from tests.game_harness import scenario, step
from tests.script_harness import exit_and_stderr, load_script

probe = load_script("acquisition_probe")


def _with_block(state, cell, program, question=False, siphoned=False):
    grid = state.grid
    return state.replace(grid=grid.replace(
        content=grid.content.at[cell].set(BLOCK), program=grid.program.at[cell].set(program),
        question=grid.question.at[cell].set(question),
        siphoned=grid.siphoned.at[cell].set(siphoned)))


def test_acquirable_is_a_visible_unsiphoned_block_of_the_program_in_the_cross():
    """Player at (2,2) with a siphon: a RESET block at (2,3) is in the cross and the siphon then
    acquires RESET (the game's step agrees); at (3,3) (diagonal) it is not; hidden under a
    question block, already siphoned, or RESET owned: not acquirable."""
    base = scenario(player={"row": 2, "col": 2, "dataSiphons": 1})
    beside = _with_block(base, 2 * 6 + 3, RESET)
    assert bool(probe.acquirable(beside, RESET))
    _, after, *_ = step(beside, ACTION_SIPHON)
    assert bool(after.owned[RESET])
    assert not bool(probe.acquirable(_with_block(base, 3 * 6 + 3, RESET), RESET))
    assert not bool(probe.acquirable(_with_block(base, 2 * 6 + 3, RESET, question=True), RESET))
    assert not bool(probe.acquirable(_with_block(base, 2 * 6 + 3, RESET, siphoned=True), RESET))
    assert not bool(probe.acquirable(probe.owning(beside, RESET), RESET))
    assert not bool(probe.acquirable(beside, RESET + 1))


def test_owning_adds_the_program_last_and_changes_only_that():
    state = scenario(player={"row": 2, "col": 2}, ownedPrograms=[5])  # action 5: PUSH
    owned = probe.owning(state, RESET)
    assert int(owned.program_rank[RESET]) == int(jnp.max(state.program_rank)) + 1
    np.testing.assert_array_equal(np.delete(np.asarray(owned.program_rank), RESET),
                                  np.delete(np.asarray(state.program_rank), RESET))
    obs, obs_owned = build_observation(state), build_observation(owned)
    assert int(obs_owned.programs[RESET]) == 1 and int(obs.programs[RESET]) == 0
    np.testing.assert_array_equal(obs.grid, obs_owned.grid)
    np.testing.assert_array_equal(probe.owning(owned, RESET).program_rank, owned.program_rank)


def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    for args, message in ((["--checkpoint", str(tmp_path / "none")], "error:"),
                          (["--checkpoint", "x", "--planted-share", "2"], "--planted-share"),
                          (["--checkpoint", "x", "--program", "bogus"], "invalid choice")):
        code, err = exit_and_stderr(probe.main, args, capsys)
        assert code == 2, err
        assert message in err and len(err.strip().splitlines()) == 1
