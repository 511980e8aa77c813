#!/usr/bin/env python3
"""tpe_harness.py - Optuna's TPE sampler on a moetune contract, for bench_search.

Drives the same simulator through the same contract as `moetune tune
--executor model`: the declared space comes from `moetune space CONTRACT`,
and every trial is one screen of `moetune model-screen CONTRACT --stdin`
(search/exec.c's model-executor job, the tune's own accounting), the same
protocol grid and random follow: the contract's replicates screen runs,
replicates 0..R-1, the trial's value the median of the replicates' median
step times.

    tpe_harness.py --moetune BIN --contract CFG --run SEED:GPU_HOURS [--run ...]

One JSON line per --run on stdout:
    {"seed", "budget", "gpu_hours", "runs", "trials", "screened", "best_ms",
     "best": {knob: value} | null, "stopped"}

Rules (a plain Optuna loop over the contract, with the engine's accounting):
  * a categorical parameter per knob of the declared space, TPESampler(seed=SEED),
    every trial the contract's replicates screen runs, charged as the model
    executor charges them;
  * a config the plugins' rules refuse fails at start-up: each replicate is
    charged one start-up (what the model executor charges an oom job), and
    the trial gets the penalty value;
  * a launched config that ends oom or crashed, or whose measured peak memory
    exceeds the contract's headroom (the gate ofat applies): the penalty
    value, its GPU-hours charged;
  * a config proposed again is run again with the next replicates (fresh
    noise), as an Optuna loop would, and charged again;
  * before each trial, the budget must hold it at the mean cost per run so
    far (the engine's afford()); else the search stops;
  * the recommendation is Optuna's best trial (shortest median step).
"""
import argparse
import json
import subprocess
import sys

try:
    import optuna
except ImportError:  # bench_search prints TPE as unavailable
    print(json.dumps({"error": "python3-optuna is not installed"}))
    sys.exit(3)

PENALTY = 1e12
MAX_TRIALS = 5000        # a safety bound on trials


def run_one(moetune, contract, space, reps, seed, budget):
    proc = subprocess.Popen(
        [moetune, "model-screen", contract, "--stdin", "--json", "--seed", str(seed),
         "--replicates", str(reps)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
    sampler = optuna.samplers.TPESampler(seed=seed)
    study = optuna.create_study(direction="minimize", sampler=sampler)
    knobs = sorted(space)
    times = {}                      # screens of each config so far
    spent, runs, trials, refused, failed = 0.0, 0, 0, 0, 0
    stopped = "trial bound (%d)" % MAX_TRIALS
    try:
        while trials < MAX_TRIALS:
            per = spent / runs if runs else 0.0
            if spent + reps * per > budget:
                stopped = "GPU-hour budget (%.1f used of %.1f)" % (spent, budget)
                break
            trial = study.ask()
            trials += 1
            params = {k: trial.suggest_categorical(k, space[k]) for k in knobs}
            key = tuple(params[k] for k in knobs)
            n = times.get(key, 0)
            times[key] = n + 1
            proc.stdin.write(json.dumps({"set": params, "first_replicate": n * reps}) + "\n")
            proc.stdin.flush()
            line = proc.stdout.readline()
            if not line:
                raise RuntimeError("moetune model-screen ended early")
            r = json.loads(line)
            if "error" in r:
                raise RuntimeError("moetune model-screen: " + r["error"])
            if not r["legal"]:
                spent += reps * r["launch_gpu_hours"]
                runs += reps
                refused += 1
                value = PENALTY
            else:
                spent += r["gpu_hours"]
                runs += r["runs"]
                if r["outcome"] == "ok" and r["within_headroom"] and r["ms"] is not None:
                    value = float(r["ms"])
                else:
                    failed += 1
                    value = PENALTY
            study.tell(trial, value)
    finally:
        proc.stdin.close()
        proc.wait()
    best, best_ms = None, None
    if study.best_value < PENALTY:
        best, best_ms = dict(study.best_params), study.best_value
    return {"seed": seed, "budget": budget, "gpu_hours": spent, "runs": runs,
            "trials": trials, "distinct": len(times), "refused": refused, "failed": failed,
            "best_ms": best_ms, "best": best, "stopped": stopped}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--moetune", required=True)
    ap.add_argument("--contract", required=True)
    ap.add_argument("--run", action="append", required=True, metavar="SEED:GPU_HOURS")
    a = ap.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    sp = json.loads(subprocess.run([a.moetune, "space", a.contract, "--json"], check=True,
                                   stdout=subprocess.PIPE, text=True).stdout)
    reps = int(sp["replicates"])
    for r in a.run:
        seed, budget = r.split(":")
        out = run_one(a.moetune, a.contract, sp["space"], reps, int(seed), float(budget))
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
