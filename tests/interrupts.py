"""Helpers for tests that interrupt a child process with SIGINT (Ctrl-C)."""
import signal


def interruptible() -> None:
    """Popen(preexec_fn=...): give the child the default SIGINT disposition. A shell that starts a job in the
    background without job control (`cmd &` in a script, a CI runner) ignores SIGINT in it, every child inherits
    that, and Python then installs no KeyboardInterrupt handler: the test's Ctrl-C would do nothing."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
