"""HackMatrix as a pure JAX environment (gymnax API), faithful to the Swift game.

The names below load on first use (PEP 562), so that host-side tools importing only a
submodule (``swift_io.swift_build`` for the Swift oracle) do not pay for JAX."""

import importlib

# Bumped whenever the observation, action or reward contract changes, so that checkpoints and
# recorded episodes from an incompatible engine are refused with a clear message.
ENV_VERSION = "hackmatrix-jax/1"
# The reward_shaping option's modes (the env validates it; host-side scripts list them).
SHAPING_MODES = ("swift", "potential")

# name -> the submodule that defines it
_EXPORTS = {"REWARD_COMPONENTS": "env", "EnvParams": "env", "HackMatrix": "env",
            "FLAT_SIZE": "observation", "Observation": "observation",
            "build_observation": "observation", "flatten": "observation",
            "ScenarioError": "swift_io.scenario", "set_state": "swift_io.scenario",
            "state_to_scenario": "swift_io.scenario", "EnvState": "core.state"}

__all__ = ["ENV_VERSION", "SHAPING_MODES", *sorted(_EXPORTS)]


def __getattr__(name):
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return __all__
