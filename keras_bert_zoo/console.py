"""What the command line shows: status lines, and TensorFlow's C++ log lines filtered out.

`status` is the logger of the few lines a run always shows (a resume, a restart, what was
replaced): at INFO, so Python callers see them only when they configure logging, while
`show_status` prints them as plain lines on stdout for `kbz` at every verbosity.

TensorFlow and XLA write their own log lines straight to file descriptor 2 from C++ (absl /
glog format `W0000 00:00:1.2 123 file.cc:45] ...`: `cuInit` failures on machines without a
GPU, "Ignoring Assert operator", allocation warnings, the absl "InitializeLog" banner).
`TF_CPP_MIN_LOG_LEVEL` silences only part of them, and Python's logging cannot reach them,
so `quiet_tensorflow` routes descriptor 2 through a pipe whose reader thread drops exactly
those lines and forwards everything else (Python tracebacks, warnings, progress bars)
unchanged. `kbz --verbose` turns it off.
"""

import contextlib
import logging
import os
import re
import sys
import threading
from collections.abc import Iterator

# glog / absl line prefix: severity, MMDD, time, thread id, file:line]
_NATIVE_LOG = re.compile(rb"^[IWEF]\d{4} [\d:. ]+\s+\d+ \S+:\d+\] ")
_NATIVE_PREFIX = re.compile(rb"^[IWEF]\d{0,4}( |$)")
_BANNERS = (b"WARNING: All log messages before absl::InitializeLog() is called",)
status = logging.getLogger("keras_bert_zoo.status")


class _StdoutHandler(logging.Handler):
    """Writes to the `sys.stdout` of the moment (a test's capture, a redirected log)."""

    def emit(self, record):
        sys.stdout.write(self.format(record) + "\n")
        sys.stdout.flush()


def show_status() -> None:
    """`status` lines printed plainly on stdout (once, however often it is called)."""
    status.setLevel(logging.INFO)
    status.propagate = False
    if not any(isinstance(h, _StdoutHandler) for h in status.handlers):
        status.addHandler(_StdoutHandler())


def is_native_log(line: bytes) -> bool:
    """True for a C++ log line of TensorFlow / XLA / absl (one line, newline optional)."""
    return bool(_NATIVE_LOG.match(line)) or line.startswith(_BANNERS)


def _forward(read_end: int, write_end: int) -> None:
    pending = b""
    while True:
        chunk = os.read(read_end, 1 << 16)
        if not chunk:
            break
        lines = (pending + chunk).split(b"\n")
        pending = lines.pop()
        kept = b"".join(line + b"\n" for line in lines if not is_native_log(line))
        # A partial line that may still become a log line waits for its newline; anything
        # else (a progress bar redrawn with "\r") is shown at once.
        if pending and not (_NATIVE_PREFIX.match(pending) or _BANNERS[0].startswith(pending)):
            kept, pending = kept + pending, b""
        if kept:
            os.write(write_end, kept)
    if pending and not is_native_log(pending):
        os.write(write_end, pending)


@contextlib.contextmanager
def quiet_tensorflow(enabled: bool = True) -> Iterator[None]:
    """Within the block, C++ log lines written to stderr are dropped (see module docstring)."""
    if not enabled:
        yield
        return
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    sys.stderr.flush()
    saved = os.dup(2)
    read_end, write_end = os.pipe()
    os.dup2(write_end, 2)
    os.close(write_end)
    reader = threading.Thread(target=_forward, args=(read_end, saved), daemon=True)
    reader.start()
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)  # closes the pipe's last write end: the reader drains and stops
        reader.join(timeout=5)
        os.close(read_end)
        os.close(saved)
