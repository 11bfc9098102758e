"""A checkpoint of a network at initialisation, written by the trainer's own writer: what the
viewers, the evaluation and the search read like any trained one, without the compile of a
PPO update."""


def save_initial_checkpoint(config, run_dir: str, name: str) -> str:
    """``config``'s network and runner state at initialisation, saved in ``run_dir`` as the
    checkpoint of update 0 of the run ``name``; returns ``run_dir``."""
    from purejaxrl import ppo
    from purejaxrl.checkpoint import save_checkpoint
    env, env_params, network, optimizer, components = ppo.build(config)
    runner = ppo.init_runner_state(config, env, env_params, network, optimizer, len(components))
    save_checkpoint(run_dir, runner_state=runner, config=config.to_dict(), update=0,
                    env_steps=0, run_name=name, wandb_run_id=None, elapsed_seconds=0.0,
                    keep=1)
    return run_dir
