"""Draw fitting of the oracle lockstep: how the mirror is made to reproduce a random outcome of
Swift's (the enemy processing order, POLY's new types, WARP's pick) with its own engine.

The engine draws per enemy slot, and slots carry no meaning (list order is ``seq``), so placing
the enemies in chosen slots under a chosen step key realises any wanted processing order or
POLY type, and a key scan any WARP pick. Here: the draws of a batch of keys (``Draws``), the
score of a candidate outcome against Swift's (``SwiftOutcome``) and the placements;
``oracle.OracleLockstep`` runs the searches.
"""

from typing import NamedTuple

import jax
import numpy as np

from ..core.constants import ENEMY_NAMES

DRAW_KEYS = 8192  # keys whose per-slot draws the fitting searches choose from
ORDER_BUDGET = 400  # batches of candidate placements one order fit may evaluate
KEY_MOVES = 16  # other draw keys (other step-1 orders) among a hill-climbing step's moves


class Draws(NamedTuple):
    """What a batch of step keys makes the engine draw per enemy slot."""

    keys: np.ndarray  # [K, 2]
    shuffle0: np.ndarray  # [K, E]: ascending = processing order of enemy step 0
    shuffle1: np.ndarray  # [K, E]: the same for step 1 (viruses only act there)
    bits: np.ndarray  # [K, E + 1]: program bits (POLY per slot, WARP the last)
    rank0: np.ndarray  # [K, E]: slots in step-0 processing order


class SwiftOutcome:
    """Swift's enemy list and player after a step (``swift``: an ``oracle.SwiftStep``), to
    score candidate outcomes against."""

    def __init__(self, swift):
        self.enemies = np.array(
            [[1, ENEMY_NAMES.index(e["type"]), e["row"], e["col"], e["hp"], e["disabledTurns"],
              e["isStunned"], e["isFromScheduledTask"], e["spawnedFromSiphon"]]
             for e in swift.internal["enemies"]], np.int32).reshape(-1, 9)
        obs = swift.observation
        self.player = np.array([obs["playerRow"], obs["playerCol"], obs["playerHP"],
                                obs["credits"], obs["energy"], obs["dataSiphons"], obs["score"],
                                obs["baseAttack"]], np.int32)
        self.perfect = len(self.enemies) + 1

    def score(self, reported, players):
        """Per candidate: enemy-list entries equal to Swift's, +1 if the player is equal, and
        -1 per extra enemy."""
        n = len(self.enemies)
        equal = np.all(reported[:, :n] == self.enemies, axis=2).sum(axis=1)
        extra = reported[:, n:, 0].sum(axis=1)
        return equal - extra + np.all(players == self.player, axis=1)

    def matches(self, reported, players):
        return self.score(reported, players) == self.perfect

    def entries_equal(self, reported) -> int:
        """Entries of one candidate's enemy list equal to Swift's."""
        n = len(self.enemies)
        return int(np.sum(np.all(reported[:n] == self.enemies, axis=1)))


def stack_states(states):
    """Host states as one batch (a leading axis), for the vmapped mirror functions."""
    return jax.tree.map(lambda *xs: np.stack(xs), *states)


def swapped(order, i, j):
    order = list(order)
    order[i], order[j] = order[j], order[i]
    return order


def moved(order, i, j):
    order = list(order)
    order.insert(j, order.pop(i))
    return order


def move_enemies(state, placement):
    """``state`` with each enemy of ``placement`` (slot -> new slot) moved to its new slot and
    the other slots filling the rest: the same game, as slots carry no meaning."""
    n_slots = state.enemies.active.shape[0]
    source = np.full(n_slots, -1)
    for old, new in placement.items():
        source[new] = old
    rest = [s for s in range(n_slots) if s not in placement]
    source[source < 0] = rest
    return state.replace(enemies=jax.tree.map(lambda x: x[source], state.enemies))


def place_in_order(state, first, k: int, draws: Draws):
    """``state`` with the enemies of ``first`` moved to the slots that draw key ``k`` shuffles
    first in enemy step 0, in that order: under that key the engine processes them in that
    order in step 0 (and the viruses among them in step 1 in the order of their slots' step-1
    shuffle keys)."""
    return move_enemies(state, dict(zip(first, (int(x) for x in draws.rank0[k, :len(first)]))))

