"""Runs one command and prints its wall time, CPU times and peak RSS as one JSON line.

usage: python3 -S -I measure.py TIMEOUT_S STDOUT_FILE STDERR_FILE CMD [ARG...]

A tiny stand-in for GNU time (which a machine may lack), so that the peak RSS is the
command's own: Linux carries a process's RSS high-water mark across exec() (through the
memory it had before exec), so a command started by a big process reports at least that
process's peak. This one is started with -S -I (no site, a few imports) and forks for real
(no vfork): a forked child starts from a copy of this small process's current memory (its
peak, inherited from whoever started us, is not passed on), so the floor under ru_maxrss
is a few MB; `measure.py ... true` shows it.

The command's stdin is /dev/null; exit status as for subprocess (negative: killed by that
signal). After TIMEOUT_S seconds the command is killed and timed_out is true. SIGTERM or
SIGINT here kill the command too.
"""
import json
import os
import signal
import sys
import time


def main():
    timeout_s = float(sys.argv[1])
    out_path, err_path = sys.argv[2], sys.argv[3]
    cmd = sys.argv[4:]
    if not cmd:
        sys.exit("measure.py: no command")
    t0 = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        try:
            fd_in = os.open(os.devnull, os.O_RDONLY)
            fd_out = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            fd_err = os.open(err_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(fd_in, 0)
            os.dup2(fd_out, 1)
            os.dup2(fd_err, 2)
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.execvp(cmd[0], cmd)
        except OSError as e:
            os.write(2, f"measure.py: cannot run {cmd[0]}: {e}\n".encode())
        os._exit(127)

    timed_out = False

    def on_alarm(*_):
        nonlocal timed_out
        timed_out = True
        os.kill(pid, signal.SIGKILL)

    def on_term(signum, _):
        os.kill(pid, signal.SIGKILL)
        os.wait4(pid, 0)
        sys.exit(128 + signum)

    signal.signal(signal.SIGALRM, on_alarm)
    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    signal.setitimer(signal.ITIMER_REAL, timeout_s)
    while True:
        try:
            _, status, ru = os.wait4(pid, 0)
            break
        except InterruptedError:
            continue
    wall = time.perf_counter() - t0
    signal.setitimer(signal.ITIMER_REAL, 0)
    print(json.dumps({
        "status": os.waitstatus_to_exitcode(status),
        "wall_s": wall,
        "user_s": ru.ru_utime,
        "sys_s": ru.ru_stime,
        "maxrss_kb": ru.ru_maxrss,
        "timed_out": timed_out,
    }))


if __name__ == "__main__":
    main()
