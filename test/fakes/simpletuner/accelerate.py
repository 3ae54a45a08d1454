# A stand-in for `accelerate launch` (accelerate 1.x, commands/launch.py simple_launcher), installed
# by test/helpers/simpletuner.ts as the fake virtual environment's bin/accelerate. Like the real
# one for a single process: it prints the warning for values it filled in, runs the script with
# its own Python as a child in the same process group, waits for it, forwards no signal (a
# SIGINT to the group interrupts its wait with KeyboardInterrupt; a SIGTERM to it alone leaves
# the child running), and when the child fails raises CalledProcessError naming the whole
# command line.
import subprocess
import sys


def main():
    args = sys.argv[1:]
    if not args or args[0] != "launch":
        sys.exit("usage: accelerate launch [options] script [script args]")
    args = args[1:]
    launch = {}
    while args and args[0].startswith("--"):
        name = args.pop(0)
        if "=" in name:
            key, value = name.split("=", 1)
        elif name in ("--multi_gpu", "--cpu"):
            key, value = name, "true"
        else:
            key, value = name, args.pop(0)
        launch[key] = value
    if not args:
        sys.exit("accelerate launch: the script to run is required")
    if "--cpu" in launch or "--num_cpu_threads_per_process" not in launch:
        print("The following values were not passed to `accelerate launch` and had defaults used instead:")
        print("\t`--num_cpu_threads_per_process` was set to `2` to improve out-of-box performance when training on CPUs")
        print("To avoid this warning pass in values for each of the problematic parameters or run `accelerate config`.", flush=True)
    cmd = [sys.executable, *args]
    process = subprocess.Popen(cmd)
    process.wait()
    if process.returncode != 0:
        raise subprocess.CalledProcessError(returncode=process.returncode, cmd=cmd)


if __name__ == "__main__":
    sys.exit(main())
