"""HackMatrix as a pure JAX environment (gymnax API), faithful to the Swift game."""

# Bumped whenever the observation, action or reward contract changes, so that checkpoints and
# recorded episodes from an incompatible engine are refused with a clear message.
ENV_VERSION = "hackmatrix-jax/1"

from .env import REWARD_COMPONENTS, EnvParams, HackMatrix  # noqa: E402
from .observation import FLAT_SIZE, Observation, build_observation, flatten  # noqa: E402
from .swift_io.scenario import ScenarioError, set_state, state_to_scenario  # noqa: E402
from .core.state import EnvState  # noqa: E402

__all__ = ["ENV_VERSION", "EnvParams", "EnvState", "FLAT_SIZE", "HackMatrix", "Observation",
           "REWARD_COMPONENTS", "ScenarioError", "build_observation", "flatten", "set_state",
           "state_to_scenario"]
