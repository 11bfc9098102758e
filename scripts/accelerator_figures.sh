#!/usr/bin/env bash
# The accelerator figures of issue 26 (SPEC §4.2 and §4.4 on a GPU), in parts that each fit a
# command of at most 10 minutes on a machine that keeps nothing between sessions:
#
#   bash scripts/accelerator_figures.sh OUTDIR throughput   # check_runtime, then env and train
#                                                          # steps/s of the default network
#                                                          # at ENV_COUNTS envs
#   bash scripts/accelerator_figures.sh OUTDIR variants     # the flat network, --num-seeds 4
#                                                          # and 16 (one update per timed
#                                                          # chunk), the step's profile
#   bash scripts/accelerator_figures.sh OUTDIR learn [TIER] # learn_bench (default: the full
#                                                          # tier) at LEARN_ENVS envs (default
#                                                          # 16384), SEEDS (default "0") one
#                                                          # after another: 3 seeds in one
#                                                          # program at 16384 envs ran out of
#                                                          # an H100's memory (SPEC §4.7);
#                                                          # LEARN_FLAGS: more training flags
#                                                          # (e.g. "--lr-floor 0.2"),
#                                                          # LEARN_LABEL the ledger label
#                                                          # (default accelerator-TIER-SIZE),
#                                                          # BENCH_FLAGS learn_bench's own
#                                                          # (e.g. --vmap-seeds: the SEEDS
#                                                          # in one program);
#                                                          # each seed's newest checkpoint
#                                                          # comes back trimmed to 128 envs
#                                                          # (scripts/trim_checkpoint.py)
#   bash scripts/accelerator_figures.sh OUTDIR search-pair CHECKPOINT
#                                                          # issue 29's equal-wall-clock test:
#                                                          # PPO alone, then PPO with the
#                                                          # search teacher (TEACHER_FLAGS,
#                                                          # default the live 16 x 4 teacher,
#                                                          # critic leaf, raw Q), each for
#                                                          # PAIR_MINUTES (default 3: the part
#                                                          # fits one 10-minute command) from
#                                                          # CHECKPOINT's weights at PAIR_ENVS
#                                                          # envs (default 8192), compile
#                                                          # inside the budget and no compile
#                                                          # cache; both then evaluated on
#                                                          # the ledger's EVAL_EPISODES
#                                                          # (default 512) held-out boards
#                                                          # and compared board by board
#                                                          # (compare_evaluations.py);
#                                                          # PAIR_FLAGS: training flags of
#                                                          # both arms
#   bash scripts/accelerator_figures.sh OUTDIR session      # the essentials of throughput and
#                                                          # variants in one command for a
#                                                          # short lease: the default network
#                                                          # at ENV_COUNTS (the first also with
#                                                          # the main command's configuration,
#                                                          # 8 minibatches, 4 seeds, and the
#                                                          # CPU's loop widths), then
#                                                          # the profile, every step ending
#                                                          # before DEADLINE_S (default 330 s)
#
# Every figure goes to OUTDIR: results.jsonl (benchmark.py's rows, the device named in each),
# ledger.jsonl and the curve (learn_bench), and one log per step. Each step has its own time
# limit (STEP_LIMIT_S: default 280 s, 560 s for learn), so one slow step cannot eat the others'
# time; learn's checkpoints go to RUNS_DIR (default OUTDIR/runs). Python
# packages the machine lacks (gymnax, mctx: the repository's pure-Python needs) are installed
# from ./.whl if that folder holds wheels (no network is needed); everything else is the
# machine's own JAX with its CUDA plug-in. Fetch the wheels where pip has a network:
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 -d .whl \
#     gymnax==1.0.1 mctx==0.0.71 gymnasium==1.3.0 farama-notifications==0.0.6
# ENV_COUNTS overrides the env counts (default
# "2048 8192 32768 65536 131072": with the rollout stored as int8 counts an update at 65536
# envs needs about 19 GB of XLA temporaries, so 131072 should fit an H100 (SPEC §4.7);
# --num-seeds runs at the first), REPEATS the timed repeats (default
# 5), PROFILE_ENVS the profile's batch (default 32768), PYTHON the interpreter (python3).
set -uo pipefail

usage="usage: bash scripts/accelerator_figures.sh OUTDIR throughput|variants|learn|session [TIER] | search-pair CHECKPOINT"
out=${1:?$usage}
part=${2:?$usage}
tier=${3:-full}
case "$part" in
  throughput|variants|learn|session) ;;
  search-pair)
    source_checkpoint=${3:-}
    if [ -z "$source_checkpoint" ] || [ ! -e "$source_checkpoint" ]; then
      echo "error: search-pair needs the CHECKPOINT to start both arms from (file or run" \
        "directory); got '${source_checkpoint}'" >&2
      exit 2
    fi
    source_checkpoint=$(cd "$(dirname "$source_checkpoint")" && pwd)/$(basename "$source_checkpoint")
    ;;
  *) echo "error: unknown part '$part' ($usage)" >&2; exit 2 ;;
esac
if [ -e "$out" ] && [ -n "$(ls -A "$out" 2>/dev/null)" ]; then
  echo "error: $out is not empty: choose a new OUTDIR (no figures are overwritten)" >&2
  exit 2
fi
mkdir -p "$out" && out=$(cd "$out" && pwd) || exit 2

cd "$(dirname "$0")/.." || exit 2
export PYTHONUNBUFFERED=1
python=${PYTHON:-python3}
if compgen -G ".whl/*.whl" > /dev/null; then
  "$python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/accelerator-site .whl/*.whl || exit 1
  export PYTHONPATH="/tmp/accelerator-site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
else
  export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
fi
env_counts=${ENV_COUNTS:-2048 8192 32768 65536 131072}
repeats=${REPEATS:-5}
pair_minutes=${PAIR_MINUTES:-3}
case "$part" in
  learn) limit=${STEP_LIMIT_S:-560} ;;
  search-pair)  # a training arm runs its budget, then ends its last chunk and saves
    limit=${STEP_LIMIT_S:-$(awk -v m="$pair_minutes" 'BEGIN { printf "%d", m * 60 + 150 }')} ;;
  session) limit=${STEP_LIMIT_S:-120} ;;
  *) limit=${STEP_LIMIT_S:-280} ;;
esac
runs=${RUNS_DIR:-$out/runs}
failed=0

deadline=${DEADLINE_S:-330}  # session: every step ends before this many seconds from the start

step() {  # step NAME COMMAND...: run with the step limit, log to OUTDIR/NAME.log
  local name=$1; shift
  local started=$SECONDS
  local allowed=$limit
  if [ "$part" = session ]; then  # capped by what is left before the deadline
    allowed=$(( deadline - SECONDS < limit ? deadline - SECONDS : limit ))
    if [ "$allowed" -lt 20 ]; then echo "== $name: skipped, ${allowed} s left"; failed=1; return; fi
  fi
  echo "== $name (limit $allowed s): $*"
  timeout --kill-after=10 "$allowed" "$@" > "$out/$name.log" 2>&1
  local code=$?
  tail -n 12 "$out/$name.log"
  echo "== $name: exit $code after $((SECONDS - started)) s"
  [ "$code" -eq 0 ] || failed=1
}

{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>/dev/null \
    || echo "nvidia-smi: not available"
  "$python" -c "import jax, jaxlib; print('jax', jax.__version__, 'jaxlib', jaxlib.__version__, \
jax.devices())"
} > "$out/machine.txt" 2>&1
cat "$out/machine.txt"

case "$part" in
  throughput)
    step check_runtime "$python" scripts/check_runtime.py
    # One step per env count: a count that runs out of time or memory keeps the others' rows.
    for envs in $env_counts; do
      step "default-$envs" "$python" scripts/benchmark.py --mode both --num-envs "$envs" \
        --repeats "$repeats" --label accelerator-default --ledger "$out/results.jsonl"
    done
    ;;
  variants)
    for envs in $env_counts; do
      step "flat-$envs" "$python" scripts/benchmark.py --mode train --num-envs "$envs" \
        --encoder flat --recurrent-core none --repeats "$repeats" --updates-per-chunk 1 \
        --label accelerator-flat \
        --ledger "$out/results.jsonl"
    done
    for seeds in 4 16; do
      step "seeds$seeds" "$python" scripts/benchmark.py --mode train --num-envs "${env_counts%% *}" \
        --num-seeds "$seeds" --repeats "$repeats" --updates-per-chunk 1 \
        --label "accelerator-seeds$seeds" \
        --ledger "$out/results.jsonl"
    done
    step profile "$python" scripts/profile_step.py --num-envs "${PROFILE_ENVS:-32768}"
    ;;
  learn)
    learn_envs=${LEARN_ENVS:-16384}
    if (( learn_envs % 1024 == 0 )); then size="$((learn_envs / 1024))k"; else size=$learn_envs; fi
    label=${LEARN_LABEL:-accelerator-$tier-$size}
    # shellcheck disable=SC2086  # SEEDS and LEARN_FLAGS are lists
    step "learn-$tier" "$python" scripts/learn_bench.py --tier "$tier" --seeds ${SEEDS:-0} \
      ${BENCH_FLAGS:-} --label "$label" --checkpoint-dir "$runs" --ledger "$out/ledger.jsonl" \
      --plot "$out/$label.png" -- --num-envs "$learn_envs" ${LEARN_FLAGS:-}
    # The network comes back: a copy of each seed's newest checkpoint with 128 envs' state
    # (about 11 MB; the whole one at 16384 envs is about 580 MB, over what a lease returns),
    # or all of them where the run has fewer (a trim keeps at most the envs it has).
    keep_envs=$(( learn_envs < 128 ? learn_envs : 128 ))
    for dir in "$runs/$label"-s* "$runs/$label"/seed-*; do  # one run per seed, or --vmap-seeds
      [ -d "$dir" ] && step "trim-${dir##*/}" "$python" scripts/trim_checkpoint.py "$dir" \
        "$out/$label-${dir##*/}" --envs "$keep_envs"
    done
    ;;
  search-pair)
    pair_envs=${PAIR_ENVS:-8192}
    teacher=${TEACHER_FLAGS:---distill-coef 1 --distill-simulations 16 --distill-worlds 4 --distill-leaf value --distill-raw-values}
    # Both arms: the same start, flags and budget, one after the other on the whole device,
    # each compiling from nothing (a cache filled by the first would favour the second).
    # shellcheck disable=SC2086  # PAIR_FLAGS and TEACHER_FLAGS are lists
    for arm in ppo taught; do
      flags=""
      [ "$arm" = taught ] && flags=$teacher
      step "train-$arm" "$python" scripts/train_purejaxrl.py --resume "$source_checkpoint" \
        --weights-only --num-envs "$pair_envs" --total-timesteps 100000000000 \
        --updates-per-chunk 1 --stop-after-minutes "$pair_minutes" --no-compile-cache \
        --no-wandb --checkpoint-dir "$runs" --run-name "pair-$arm" ${PAIR_FLAGS:-} $flags
    done
    eval_limit=${EVAL_LIMIT_S:-280}
    for arm in ppo taught; do
      limit=$eval_limit step "evaluate-$arm" "$python" scripts/evaluate.py \
        --checkpoint "$runs/pair-$arm" --episodes "${EVAL_EPISODES:-512}" --seed 20261123 \
        --close-undo-exploit --policies checkpoint-greedy,checkpoint-sampled \
        --json "$out/pair-$arm.json"
      step "trim-$arm" "$python" scripts/trim_checkpoint.py "$runs/pair-$arm" \
        "$out/pair-$arm-trimmed" --envs "$(( pair_envs < 128 ? pair_envs : 128 ))"
    done
    step compare "$python" scripts/compare_evaluations.py "$out/pair-ppo.json" \
      "$out/pair-taught.json" --json "$out/pair-compared.json"
    cat "$out/compare.log"
    ;;
  session)
    # One chunk of one update per timing: an update of the default network takes 4.8 s at
    # 2048 envs and 15.5 s at 32768 on an H100 (SPEC §4.7), so the 4-update chunks of the other
    # parts would not fit a step's limit. Every row lands in results.jsonl as it is measured.
    first=${env_counts%% *}
    step "default-$first" "$python" scripts/benchmark.py --mode both --num-envs "$first" \
      --repeats "$repeats" --updates-per-chunk 1 --label accelerator-default \
      --ledger "$out/results.jsonl"
    # What the main command trains (the trainer's defaults: the macro, the start curriculum,
    # the stage-count reward), beside the benchmark's plain configuration above.
    step "main-$first" "$python" scripts/benchmark.py --mode train --num-envs "$first" \
      --trainer-defaults --repeats "$repeats" --updates-per-chunk 1 --label accelerator-main \
      --ledger "$out/results.jsonl"
    # The update's minibatches: the auto-scaler keeps 2,048 samples (tuned on the CPU); on a
    # GPU 8 minibatches of 32,768 are the PureJaxRL-sized alternative.
    step "mb8-$first" "$python" scripts/benchmark.py --mode train --num-envs "$first" \
      --num-minibatches 8 --repeats "$repeats" --updates-per-chunk 1 \
      --label accelerator-mb8 --ledger "$out/results.jsonl"
    # The env step before the loop-width change (SPEC §4.7): the CPU's widths.
    HACKMATRIX_BFS_LAYERS_PER_ITERATION=1 HACKMATRIX_LAYOUT_ATTEMPTS_PER_ITERATION=1 \
      step "env-width1-$first" "$python" scripts/benchmark.py --mode env --num-envs "$first" \
      --repeats "$repeats" --label accelerator-width1 --ledger "$out/results.jsonl"
    step "seeds4" "$python" scripts/benchmark.py --mode train --num-envs "$first" --num-seeds 4 \
      --repeats "$repeats" --updates-per-chunk 1 --label accelerator-seeds4 \
      --ledger "$out/results.jsonl"
    for envs in ${env_counts#"$first"}; do
      step "default-$envs" "$python" scripts/benchmark.py --mode both --num-envs "$envs" \
        --repeats "$repeats" --updates-per-chunk 1 --label accelerator-default \
        --ledger "$out/results.jsonl"
    done
    step profile "$python" scripts/profile_step.py --num-envs "${PROFILE_ENVS:-32768}"
    ;;
esac
echo "== done after $SECONDS s"
exit "$failed"
