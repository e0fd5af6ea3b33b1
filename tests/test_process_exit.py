"""`kbz` ends its process with `end_process`: outputs flushed, threads and atexit handlers run,
the interpreter's teardown of every object skipped (keras_bert_zoo/cli/__init__.py)."""

import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.e2e  # every test here starts the interpreter it checks

SCRIPT = textwrap.dedent(
    """
    import atexit, sys, threading, time
    from keras_bert_zoo.cli import end_process

    class Held:
        def __del__(self):
            print("torn down", flush=True)

    held = Held()
    atexit.register(lambda: print("atexit ran"))

    def late_writer():
        time.sleep(0.3)
        print("thread finished")

    threading.Thread(target=late_writer).start()
    print("no newline yet", end="")
    print("stderr line", file=sys.stderr, end="")
    end_process(3)
    """
)


def test_end_process_flushes_joins_runs_atexit_and_skips_teardown():
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True)
    assert done.returncode == 3
    assert done.stdout.startswith("no newline yet")
    assert "thread finished" in done.stdout  # the non-daemon thread was waited for
    assert "atexit ran" in done.stdout
    assert done.stderr.endswith("stderr line")
    assert "torn down" not in done.stdout  # no teardown of the objects still held


def test_end_process_ends_idle_executor_workers_instead_of_waiting_forever():
    # PyTorch's compile pool (and Keras' async callbacks) leave idle, non-daemon executor
    # workers that only their executor's threading shutdown hook wakes (issue 28).
    script = textwrap.dedent(
        """
        import concurrent.futures
        from keras_bert_zoo.cli import end_process

        pool = concurrent.futures.ThreadPoolExecutor(2)
        print(pool.submit(sum, [1, 2]).result(), flush=True)
        end_process(0)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "3\n"


def test_the_command_line_exits_with_each_commands_status(tmp_path):
    ok = subprocess.run(
        [sys.executable, "-m", "keras_bert_zoo.cli", "presets"], capture_output=True, text=True
    )
    assert ok.returncode == 0
    assert "bert_tiny_en_uncased" in ok.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "keras_bert_zoo.cli", "embed", "--model", str(tmp_path / "no")]
        + ["--input", str(tmp_path / "none.txt"), "--output", str(tmp_path / "out.npy")],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2, bad.stderr
    assert "kbz embed: error:" in bad.stderr
