"""The ``undo_pays_once`` training option (``core/reward_ledger.py``): a reward that UNDO took
back is not paid again, a penalty it took back is not charged again, and without an UNDO every
step pays exactly Swift's components. The option changes rewards only, never the game.
Expected values are derived by hand."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from envs.hackmatrix.core.reward_ledger import empty_ledger, pay_once
from envs.hackmatrix.env import HackMatrix
from tests.game_harness import ENV, PARAMS, scenario, step

ONCE = HackMatrix(undo_pays_once=True)
UP, DOWN, LEFT, RIGHT = 0, 1, 2, 3
WAIT, UNDO = 10, 14
# Two components: the first paid once, the second (a per-step cost) paid as it comes.
LEDGERED = jnp.array([True, False])


def _pay(ledger, first, second=-0.01, *, undid=False, popped=0, pushed=False, slot=0):
    paid, ledger = pay_once(ledger, jnp.array([first, second], jnp.float32), LEDGERED,
                            jnp.bool_(undid), jnp.int32(popped), jnp.bool_(pushed),
                            jnp.int32(slot))
    return np.asarray(paid), ledger


def test_without_undo_every_step_pays_its_own_components_exactly():
    ledger = empty_ledger(4, 2)
    for first in (1.0, -0.5, 0.25, 0.01, -3.0):
        paid, ledger = _pay(ledger, first)
        assert paid[0] == np.float32(first) and paid[1] == np.float32(-0.01)


def test_reearning_what_undo_took_back_pays_only_beyond_the_best_total():
    """Snapshot 0 saved with gains 0; +1 collected and snapshot 1 saved; UNDO, UNDO back to
    snapshot 0 (both pay nothing of the ledgered component, the per-step cost as usual);
    the same +1 again pays 0; then +1.5 pays only 0.5, what goes beyond the best total 1."""
    ledger = empty_ledger(4, 2)
    _, ledger = _pay(ledger, 0.0, pushed=True, slot=0)
    paid, ledger = _pay(ledger, 1.0, pushed=True, slot=1)
    assert paid[0] == 1.0
    for popped in (1, 0):
        paid, ledger = _pay(ledger, 0.7, undid=True, popped=popped)  # UNDO's own deltas ignored
        assert paid[0] == 0.0 and paid[1] == np.float32(-0.01)
    assert float(ledger.gains[0]) == 0.0 and float(ledger.best_gains[0]) == 1.0
    paid, ledger = _pay(ledger, 1.0)
    assert paid[0] == 0.0
    _, ledger = _pay(ledger, 0.0, undid=True, popped=0)
    paid, ledger = _pay(ledger, 1.5)
    assert paid[0] == pytest.approx(0.5)
    paid, ledger = _pay(ledger, 0.25)  # at the mark again: paid as it comes
    assert paid[0] == np.float32(0.25)


def test_a_penalty_undo_took_back_is_not_charged_again():
    ledger = empty_ledger(4, 2)
    _, ledger = _pay(ledger, 0.0, pushed=True, slot=2)
    paid, ledger = _pay(ledger, -1.0)
    assert paid[0] == -1.0
    _, ledger = _pay(ledger, 0.0, undid=True, popped=2)
    paid, ledger = _pay(ledger, -1.0)
    assert paid[0] == 0.0
    paid, ledger = _pay(ledger, -1.0)
    assert paid[0] == -1.0


def _farm_start():
    """A floor data siphon at (0, 0), the player two cells right of it, UNDO owned."""
    return scenario(player={"row": 0, "col": 2, "credits": 1}, ownedPrograms=[UNDO],
                    resources=[{"row": 0, "col": 0, "dataSiphon": True}])


def _start(state, env):
    """A scenario state as ``env`` starts it (with the option: an empty reward ledger)."""
    return state.replace(ledger=env.fresh_ledger())


def _farm(env):
    """Left, left onto the siphon, UNDO, UNDO (back before it, §5.5 item 1), left onto it again:
    the data-siphon rewards of the two visits and the final state."""
    _, s, _, _, _ = step(_start(_farm_start(), env), LEFT, env=env)
    _, s, _, _, first = step(s, LEFT, env=env)
    for _ in range(2):
        _, s, _, _, info = step(s, UNDO, env=env)
        assert not bool(info["invalid_action"])
    assert (int(s.player.row), int(s.player.col)) == (0, 1) and int(s.player.data_siphons) == 0
    _, s, _, _, again = step(s, LEFT, env=env)
    return (float(first["reward_breakdown"]["data_siphon"]),
            float(again["reward_breakdown"]["data_siphon"])), s


def test_the_data_siphon_farm_pays_once_and_the_game_is_unchanged():
    """Swift pays the dataSiphon reward (§8) for every visit, the one undone included (SPEC
    §4.4: a trained agent farms it); with the option the second visit pays 0. Both games end
    in the same state: the siphon collected once, the player on its cell."""
    swift_rewards, swift_state = _farm(ENV)
    once_rewards, once_state = _farm(ONCE)
    assert swift_rewards == (1.0, 1.0)
    assert once_rewards == (1.0, 0.0)
    assert swift_state.ledger is None

    def game(s):
        return jax.tree.leaves(s.replace(ledger=None))

    assert all(np.array_equal(a, b) for a, b in zip(game(swift_state), game(once_state)))
    assert int(once_state.player.data_siphons) == 1


def test_cross_stage_undo_pays_only_the_stage_total_beyond_its_best():
    """Errata O1 loop with the option on and R9 open: the first completion pays 1 (stage 2);
    UNDO restores the stage-1 board and the ledger's totals (0), so the completion on the old
    board, which Swift pays 2 (stage 3), pays only 2 - 1 = 1."""
    start = scenario(player={"row": 5, "col": 3, "credits": 1, "energy": 10},
                     ownedPrograms=[UNDO, WAIT])
    _, s, _, _, _ = step(_start(start, ONCE), RIGHT, env=ONCE)
    _, s, _, _, info = step(s, RIGHT, env=ONCE)
    assert float(info["reward_breakdown"]["stage_completion"]) == 1.0
    _, s, _, _, _ = step(s, UNDO, env=ONCE)
    _, s, _, _, info = step(s, RIGHT, env=ONCE)
    assert bool(info["undo_exploit_completion"]) and int(s.stage) == 3
    assert float(info["reward_breakdown"]["stage_completion"]) == 1.0


@functools.cache
def _rollouts(num_envs=16, num_steps=120):
    """Uniformly random legal play of the same episodes in the Swift-reward env and the
    option's env (one compiled program): actions, rewards, done flags, whether each step was a
    successful UNDO, both envs' observations, and the option's ledger totals."""
    def policy_and_step(carry, key):
        (obs, s_swift, s_once) = carry
        k_act, k_step = jax.random.split(key)
        logits = jnp.where(obs.action_mask, 0.0, -jnp.inf)
        actions = jax.random.categorical(k_act, logits)
        keys = jax.random.split(k_step, num_envs)

        def step_all(env, s):
            return jax.vmap(env.step, in_axes=(0, 0, 0, None))(keys, s, actions, PARAMS)

        obs_swift, s_swift, r_swift, term, trunc, info = step_all(ENV, s_swift)
        obs_once, s_once, r_once, _, _, _ = step_all(ONCE, s_once)
        undid = (actions == UNDO) & ~info["invalid_action"]
        out = dict(r_swift=r_swift, r_once=r_once, done=term | trunc, undid=undid,
                   same_obs=jnp.all(jnp.stack([jnp.all(a == b, axis=tuple(range(1, a.ndim)))
                                               for a, b in zip(jax.tree.leaves(obs_swift),
                                                               jax.tree.leaves(obs_once))]),
                                    axis=0),
                   best=(jnp.sum(s_once.ledger.best_gains, -1)
                         - jnp.sum(s_once.ledger.worst_losses, -1)))
        return (obs_swift, s_swift, s_once), out

    @jax.jit
    def run(key):
        reset_keys = jax.random.split(key, num_envs)
        obs, s_swift = jax.vmap(ENV.reset, in_axes=(0, None))(reset_keys, PARAMS)
        _, s_once = jax.vmap(ONCE.reset, in_axes=(0, None))(reset_keys, PARAMS)
        return jax.lax.scan(policy_and_step, (obs, s_swift, s_once),
                            jax.random.split(key, num_steps))[1]
    return jax.device_get(run(jax.random.PRNGKey(11)))


def test_random_play_is_the_same_game_and_pays_swift_until_an_undo():
    """Same keys and actions: every observation is equal (the option changes no rule); every
    step of an episode before its first successful UNDO pays exactly Swift's reward; an ended
    episode's successor starts a fresh ledger (its totals read 0 after the resetting step)."""
    out = _rollouts()
    assert out["same_obs"].all()
    undone = np.zeros_like(out["undid"][0])
    compared = 0
    for t in range(len(out["done"])):
        undone |= out["undid"][t]
        clean = ~undone
        np.testing.assert_array_equal(out["r_once"][t][clean], out["r_swift"][t][clean])
        compared += int(clean.sum())
        assert (out["best"][t][out["done"][t]] == 0).all()
        undone &= ~out["done"][t]
    assert compared > 1000 and out["done"].sum() > 10
