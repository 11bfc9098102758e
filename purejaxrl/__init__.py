"""PureJaxRL-style masked PPO trainer for HackMatrix, or any env of ``envs.registry`` (the toy
corridor, gymnax's envs by id).

Modules: ``config`` (TrainConfig, RunOptions, validation, batch auto-scaling), ``networks``
(actor-critic MLP, masked categorical), ``ppo`` (the algorithm, top to bottom: rollout, GAE,
loss, jitted chunks of updates over all local devices), ``train`` (host loop: logging,
evaluation, checkpoints, signals), ``checkpoint``, ``logger``, ``evaluation`` (greedy / sampled /
random / heuristic policies on separate envs), ``env_protocol`` (``TrainerEnv``: an env and its
optional hooks, read once with their defaults; the contract is ``envs/contract.py``),
``env_throughput`` (the env-only benchmark), ``cli``
(the command lines of ``scripts/train_purejaxrl.py`` and ``scripts/evaluate.py``, also installed
as ``hackmatrix-train`` and ``hackmatrix-evaluate``).
"""
