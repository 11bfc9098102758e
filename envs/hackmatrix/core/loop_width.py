"""How much work one iteration of the step's data-dependent loops does, by backend (SPEC §4.7).

On a GPU every ``while`` iteration is a kernel launch and a predicate read back by the host
(tens of microseconds, whatever the batch), and a batched loop runs until its slowest lane is
done, so a loop that does more per iteration and needs fewer of them is faster there; on the
CPU an iteration costs almost nothing and the extra work is all cost. A width is read when the
loop is traced: the backends that widen it, else 1; its variable overrides it on every backend,
to measure one width against another on the same machine. No result depends on a width.
"""

from __future__ import annotations

import dataclasses
import os

import jax


@dataclasses.dataclass(frozen=True)
class LoopWidth:
    variable: str
    gpu: int

    def __call__(self) -> int:
        override = os.environ.get(self.variable)
        if override:
            if not override.isdigit() or int(override) < 1:
                raise ValueError(f"{self.variable}={override!r}: expected a positive integer")
            return int(override)
        return self.gpu if jax.default_backend() == "gpu" else 1


# Board searches (bitboard.bfs_layers): layers per iteration. A layer is a handful of word
# operations; four cut a search's iterations to a quarter for at most three layers of extra
# work, which cost the CPU 1.6x the step's time. Fully unrolled searches (35 layers, no loop)
# compiled 4x slower and ran 50x slower on the CPU.
BFS_LAYERS = LoopWidth("HACKMATRIX_BFS_LAYERS_PER_ITERATION", gpu=4)
# Stage generation's layout attempts (decisions R2, up to 100) checked side by side per
# iteration, the first valid one kept: a batch of new boards otherwise waits for its unluckiest
# board's attempts one by one (about 47 in a chunk of 256 boards, each a flood fill).
LAYOUT_ATTEMPTS = LoopWidth("HACKMATRIX_LAYOUT_ATTEMPTS_PER_ITERATION", gpu=8)
# Ragged loops (sparse.ragged_loop, the enemy steps): the fewest lanes in a block of lanes that
# loop together. Smaller blocks waste fewer iterations on lanes that are done; on a GPU every
# block's iterations are kernel launches of their own, so blocks stay large there.
RAGGED_MIN_BLOCK = LoopWidth("HACKMATRIX_RAGGED_MIN_BLOCK", gpu=8192)
