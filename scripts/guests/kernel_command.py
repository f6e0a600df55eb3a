"""The QEMU command line of an example kernel for the Python scripts (the benchmark, the
measuring scripts): what `scripts/guests/run-kernel.sh --print0` prints, the one place that
builds it; and the Linux guest's, from `scripts/guests/run-linux.sh --print0`.
"""
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class KernelCommandError(Exception):
    pass


def qemu_command(arch, *args, qemu=None):
    """argv of `scripts/guests/run-kernel.sh --arch ARCH --print0 ARGS...` (options of
    run-kernel.sh, then QEMU arguments), with $QEMU set to `qemu` when given."""
    return _print0("run-kernel.sh", arch, args, {"QEMU": qemu})


def linux_command(arch, *args, plugin=None):
    """argv of `scripts/guests/run-linux.sh --arch ARCH --print0 ARGS...`, with $KP_PLUGIN set
    to `plugin` (the plugin's path) when given."""
    return _print0("run-linux.sh", arch, args, {"KP_PLUGIN": plugin})


def _print0(script, arch, args, env_set):
    env = dict(os.environ)
    env.update({k: v for k, v in env_set.items() if v})
    cmd = ["bash", os.path.join(ROOT, "scripts", "guests", script), "--arch", arch, "--print0",
           *map(str, args)]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, env=env)
    if p.returncode != 0:
        raise KernelCommandError(f"scripts/guests/{script} failed (status {p.returncode}): "
                                 f"{' '.join(cmd[2:])}")
    return p.stdout.decode().split("\0")[:-1]
