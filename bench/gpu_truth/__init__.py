"""GPU truth (issues 22, 27, 30): loadeval_nb's GPU figures against truths taken without it.

    python -m bench.gpu_truth               # every check: at most 9 min on one H100
    python -m bench.gpu_truth --quick       # shorter runs (wider noise): at most 5 min
    python -m bench.gpu_truth --only split,seed
    python -m bench.gpu_truth --dry-run     # CPU, tiny sizes: runs the code, proves nothing
                                            # (also GPU_TRUTH_DRY_RUN=1)
    python -m bench.gpu_truth --quick --json out/gpu_truth.json --budget-s 270

Each figure is printed as "measured vs truth (ratio)" with PASS or FAIL, and the last line
says how many hold; ``--json`` writes the figures after every check. Every truth is taken
beside the tool, never through it; what each check measures is its module's docstring
(``checks/``). docs/gpu.md says how to run it on a lent GPU (``prepare.sh`` fetches the
wheels that machine lacks).

Without CUDA (and without --dry-run) it prints one line and exits 0. Exit status otherwise:
1 when a check fails (a dry run: when a check raised), else 0.

The modules, by job: ``report`` (records, their lines, the JSON file), ``maths`` (the
arithmetic, no torch), ``harness`` (where the checks run, timing beside the tool),
``smi`` (the nvidia-smi reader), ``fake_nvml`` (a dry run's NVML), ``workloads`` and
``pipeline`` (the GPU work and the seed study's image pipeline), ``checks/`` (one module
per check), ``notebook`` (the probe run in a real kernel), ``run`` (the command).
"""
