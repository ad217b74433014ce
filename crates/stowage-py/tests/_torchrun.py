"""torchrun for the tests: a job of `world` processes (gloo on the CPU).

gloo's transport now and then aborts a rank on a loaded machine (four
ranks on two cores: "terminate called without an active exception", an
uncaught exception in its listener thread), a death by SIGABRT that no
checkpoint can cause. Such a job runs once more; a rank that raised (a
wrong value, an exit code) or died by another signal fails the test at
once."""

import os
import re
import subprocess
import sys


def torchrun(world, script, *args, before_retry=None):
    """Runs `script ARGS…` under torchrun; asserts it succeeded."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={world}",
           str(script), *map(str, args)]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    for attempt in (1, 2):
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
        if done.returncode == 0 or attempt == 2 or not died_by_signal(done.stderr):
            break
        print(f"torchrun: a rank of {world} died by SIGABRT; running the job once more:\n"
              f"{done.stderr[-2000:]}", file=sys.stderr)
        if before_retry is not None:
            before_retry()
    assert done.returncode == 0, f"{' '.join(cmd[3:])}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def died_by_signal(stderr):
    """Whether torchrun's report names SIGABRT as the first failure (its
    "Root Cause"): gloo's abort. Any other signal (a segmentation fault in
    stowage's reader or writer, which these ranks run) or an exit code
    fails the test at once."""
    root = stderr.partition("Root Cause")[2]
    found = re.search(r"exitcode\s*:\s*(-?\d+)", root)
    return found is not None and int(found.group(1)) == -6
