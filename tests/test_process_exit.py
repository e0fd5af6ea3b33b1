"""The `kbz` entry point (`keras_bert_zoo.cli.run`) ends its process without the interpreter's
teardown: outputs flushed, threads waited for, atexit handlers run, the exit status kept
(keras_bert_zoo/cli/__init__.py)."""

import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.e2e  # every test here starts the interpreter it checks


def run_as_kbz(body: str) -> subprocess.CompletedProcess:
    """A fresh process whose `kbz` entry point runs `body` as its command (`main`)."""
    script = "import sys\nfrom keras_bert_zoo import cli\n\ndef command():\n"
    script += textwrap.indent(textwrap.dedent(body), "    ")
    script += "\ncli.main = lambda argv=None, restart=None: command()\nsys.exit(cli.run())\n"
    return subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )


def test_kbz_flushes_joins_runs_atexit_and_skips_teardown():
    done = run_as_kbz(
        """
        import atexit, threading, time

        class Held:
            def __del__(self):
                print("torn down", flush=True)

        global held
        held = Held()
        atexit.register(lambda: print("atexit ran"))

        def late_writer():
            time.sleep(0.3)
            print("thread finished")

        threading.Thread(target=late_writer).start()
        print("no newline yet", end="")
        print("stderr line", file=sys.stderr, end="")
        return 3
        """
    )
    assert done.returncode == 3
    assert done.stdout.startswith("no newline yet")
    assert "thread finished" in done.stdout  # the non-daemon thread was waited for
    assert "atexit ran" in done.stdout
    assert done.stderr.endswith("stderr line")
    assert "torn down" not in done.stdout  # no teardown of the objects still held


def test_a_held_object_is_torn_down_by_an_ordinary_exit():
    # The check above can fail: without the entry point, Python's exit does tear down.
    script = textwrap.dedent(
        """
        class Held:
            def __del__(self):
                print("torn down", flush=True)

        held = Held()
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.stdout == "torn down\n"


def test_kbz_ends_idle_executor_workers_instead_of_waiting_forever():
    # PyTorch's compile pool (and Keras' async callbacks) leave idle, non-daemon executor
    # workers that only their executor's threading shutdown hook wakes (issue 28).
    done = run_as_kbz(
        """
        import concurrent.futures

        global pool
        pool = concurrent.futures.ThreadPoolExecutor(2)
        print(pool.submit(sum, [1, 2]).result(), flush=True)
        return 0
        """
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "3\n"


@pytest.mark.parametrize(
    "body, status, stderr",
    [
        ("raise SystemExit(2)", 2, ""),  # argparse's usage errors
        ("return None", 0, ""),
        ("sys.exit('stopped')", 1, "stopped\n"),
        ("raise RuntimeError('boom')", 1, "RuntimeError: boom\n"),
    ],
)
def test_kbz_keeps_every_kind_of_exit_status(body, status, stderr):
    done = run_as_kbz(body)
    assert done.returncode == status, done.stderr
    assert done.stderr.endswith(stderr)


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
