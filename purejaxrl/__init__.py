"""PureJaxRL-style masked PPO trainer for HackMatrix.

Modules: ``config`` (TrainConfig, RunOptions, validation, batch auto-scaling), ``networks``
(actor-critic MLP, masked categorical), ``ppo`` (the algorithm, top to bottom: rollout, GAE,
loss, jitted chunks of updates over all local devices), ``train`` (host loop: logging,
evaluation, checkpoints, signals), ``checkpoint``, ``logger``, ``evaluation`` (greedy / sampled /
random / heuristic policies on separate envs), ``toy_env`` (a tiny deterministic corridor with
HackMatrix's interface, for tests), ``env_protocol`` (what the trainer needs from an env, and
the contract check run on both envs), ``env_throughput`` (the env-only benchmark), ``cli``
(the command lines of ``scripts/train_purejaxrl.py`` and ``scripts/evaluate.py``, also installed
as ``hackmatrix-train`` and ``hackmatrix-evaluate``).
"""
