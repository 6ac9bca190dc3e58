"""The one module that talks to the NeuROK worker process (no bpy here, so it can be exercised on its own).

The worker (``python -m model_runtime.worker``, run by an interpreter that has torch) is started on first use and
kept alive between simulations so its model stays warm. A reader thread turns the worker's stdout into a queue of
messages, so the UI thread only ever polls (:meth:`WorkerClient.poll`) and never blocks on the pipe; background
mode uses the blocking :meth:`WorkerClient.wait`. Any sign of a broken worker (exit, garbage on the pipe, silence
past the timeout) kills it and raises :class:`WorkerError`; the next request starts a fresh one.
"""

import collections
import itertools
import os
import queue
import re
import subprocess
import threading
import time
from dataclasses import dataclass

import numpy as np

from ..model_runtime import protocol

PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # holds model_runtime/
STDERR_LINES = 20
MISSING_MODULE = re.compile(r"ModuleNotFoundError: No module named '([^']+)'")


class WorkerError(Exception):
    """The simulation failed; the message is meant for the artist's report."""


class WorkerCancelled(WorkerError):
    """The worker confirmed that a job was cancelled."""


@dataclass
class Job:
    id: int
    fraction: float = 0.0
    message: str = "starting the NeuROK worker"
    last_activity: float = 0.0
    warm: bool | None = None  # the worker's answer: was its model already loaded when this job started?
    superseded: bool = False  # a newer job was submitted: this one is cancelled and no longer read


class _Closed:
    """Queue marker from the reader thread: the worker's output ended or became unreadable."""

    def __init__(self, reason: str):
        self.reason = reason


class WorkerClient:
    def __init__(self, python: str, timeout: float = 300.0, package_dir: str = PACKAGE_DIR):
        self.python, self.timeout, self.package_dir = python, timeout, package_dir
        self._process: subprocess.Popen | None = None
        self._messages: queue.Queue = queue.Queue()
        self._stderr: collections.deque[str] = collections.deque(maxlen=STDERR_LINES)
        self._ids = itertools.count(1)
        # One job reads the worker's answers at a time (messages for other ids are dropped), so a new submit
        # cancels the job still in flight instead of leaving it to wait for answers it would never see.
        self._current: Job | None = None
        self._warmed = False

    @property
    def pid(self) -> int | None:
        return self._process.pid if self.alive else None

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def _start(self) -> None:
        if not os.path.isfile(self.python):
            raise WorkerError(f"The NeuROK runtime Python {self.python!r} does not exist; "
                              "set it up in the add-on preferences")
        env = dict(os.environ, PYTHONPATH=self.package_dir, PYTHONUNBUFFERED="1")
        # A solid's steps solve ~47 x 47 systems, where BLAS threads only contend with Blender for the CPU: on this
        # 2-core machine, beside other work, one thread halved a 100-frame jelly's integration (10.1 -> 5.0 s).
        env.setdefault("OPENBLAS_NUM_THREADS", "1")
        try:
            self._process = subprocess.Popen([self.python, "-m", "model_runtime.worker"], cwd=self.package_dir,
                                             env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                             stderr=subprocess.PIPE)
        except OSError as exc:
            raise WorkerError(f"Could not start the NeuROK worker with {self.python!r}: {exc}") from exc
        # Fresh queue and log per process: nothing a dead worker said may be taken for the new one's answer.
        self._messages, self._stderr = queue.Queue(), collections.deque(maxlen=STDERR_LINES)
        threading.Thread(target=self._read_stdout, args=(self._process, self._messages), daemon=True,
                         name="neurok-client-stdout").start()
        threading.Thread(target=self._read_stderr, args=(self._process, self._stderr), daemon=True,
                         name="neurok-client-stderr").start()

    @staticmethod
    def _read_stdout(process: subprocess.Popen, messages: queue.Queue) -> None:
        try:
            while (msg := protocol.read_message(process.stdout)) is not None:
                messages.put(msg)
            messages.put(_Closed("exited"))
        except protocol.ProtocolError as exc:
            messages.put(_Closed(f"sent malformed data ({exc})"))
        except (OSError, ValueError) as exc:  # the pipe was closed under us by stop()
            messages.put(_Closed(f"could not be read ({exc})"))

    @staticmethod
    def _read_stderr(process: subprocess.Popen, lines: collections.deque) -> None:
        for raw in process.stderr:
            lines.append(raw.decode("utf-8", "replace").rstrip())

    def submit(self, vertices: np.ndarray, faces: np.ndarray, pins: np.ndarray, params: dict,
               frame_motion: np.ndarray | None = None) -> Job:
        """Send one simulation request (vertices in metres; frame_motion: (frames + 1, 4, 4) rigid transforms of an
        animated object, the vertices then in its moving frame); returns at once. Supersedes the job in flight."""
        if self._current is not None and self.alive:
            self.cancel(self._current)
            self._current.superseded = True
        arrays = {"vertices": vertices, "faces": faces, "pins": pins}
        if frame_motion is not None:
            arrays["frame_motion"] = frame_motion
        self._current = self._send(arrays, params)
        return self._current

    def _send(self, arrays: dict, params: dict) -> Job:
        if not self.alive:
            self._start()
        job = Job(next(self._ids), last_activity=time.monotonic())
        try:
            protocol.write_message(self._process.stdin, "simulate", arrays, id=job.id, params=params)
        except (OSError, ValueError) as exc:
            self._fail(f"stopped accepting requests ({exc})")
        return job

    def warm_up(self) -> Job | None:
        """Start the worker and have it load torch now, with a one-frame simulation of a
        tetrahedron whose result nobody reads (a Simulate submitted meanwhile waits behind it, never cancels it),
        so that the first real Simulate does not wait for them. Only once per client: a worker that failed is not
        restarted behind the artist's back."""
        if self._warmed or self.alive:
            return None
        self._warmed = True
        vertices = np.array([[0, 0, 0], [0.1, 0, 0], [0, 0.1, 0], [0, 0, 0.1]], np.float32)
        faces = np.array([[0, 2, 1], [0, 1, 3], [0, 3, 2], [1, 2, 3]], np.int32)
        return self._send({"vertices": vertices, "faces": faces, "pins": np.zeros(0, np.int32)}, {"frames": 1})

    def poll(self, job: Job) -> np.ndarray | None:
        """Apply what the worker has said so far: the positions when done, None while running; raises on failure."""
        self._check_current(job)
        while True:
            try:
                msg = self._messages.get_nowait()
            except queue.Empty:
                break
            result = self._handle(job, msg)
            if result is not None:
                return result
        if time.monotonic() - job.last_activity > self.timeout:
            self._fail(f"did not respond for {self.timeout:.0f} s")
        return None

    def wait(self, job: Job, progress=None) -> np.ndarray:
        """Block until the job ends; progress(fraction, message) is called on every progress message."""
        self._check_current(job)
        while True:
            remaining = job.last_activity + self.timeout - time.monotonic()
            try:
                msg = self._messages.get(timeout=max(remaining, 0.0))
            except queue.Empty:
                self._fail(f"did not respond for {self.timeout:.0f} s")
            result = self._handle(job, msg)
            if result is not None:
                return result
            if progress is not None:
                progress(job.fraction, job.message)

    @staticmethod
    def _check_current(job: Job) -> None:
        if job.superseded:
            raise WorkerCancelled("Simulation cancelled: a newer one replaced it")

    def _handle(self, job: Job, msg) -> np.ndarray | None:
        if isinstance(msg, _Closed):
            self._fail(msg.reason)
        if msg.type == "error" and msg.get("id") is None:
            self._fail(f"rejected a request: {msg.get('message')}")
        if msg.get("id") != job.id:
            return None  # a late answer to a job that was cancelled or abandoned
        job.last_activity = time.monotonic()
        if msg.type in ("result", "cancelled", "error") and self._current is job:
            self._current = None  # ended: nothing left to cancel when the next job comes
        if msg.type == "progress":
            job.fraction, job.message = float(msg.get("fraction", 0.0)), str(msg.get("message", ""))
        elif msg.type == "result":
            positions = msg.arrays.get("positions")
            if positions is None or positions.ndim != 3 or positions.shape[2] != 3:
                self._fail("returned a result without valid positions")
            job.warm = bool(msg.get("warm"))
            return positions
        elif msg.type == "cancelled":
            raise WorkerCancelled("Simulation cancelled")
        elif msg.type == "error":
            raise WorkerError(str(msg.get("message")))
        return None

    def cancel(self, job: Job) -> None:
        """Ask the worker to stop the job; its late answers are ignored. A worker that cannot be told is killed."""
        try:
            protocol.write_message(self._process.stdin, "cancel", id=job.id)
        except (OSError, ValueError, AttributeError):
            self.stop()

    def stop(self) -> None:
        """Kill the worker (if any); the next request starts a new one."""
        process, self._process, self._current = self._process, None, None
        if process is None:
            return
        if process.poll() is None:
            process.kill()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        for pipe in (process.stdin, process.stdout, process.stderr):
            try:
                pipe.close()
            except OSError:
                pass

    def _fail(self, what: str):
        process = self._process
        if process is not None and process.poll() is None:
            process.kill()
        try:
            code = process.wait(timeout=5) if process is not None else None
        except subprocess.TimeoutExpired:
            code = None
        time.sleep(0.05)  # let the stderr thread collect the worker's last words
        details = " | ".join(line for line in self._stderr if line.strip())[-600:]
        self.stop()
        if missing := MISSING_MODULE.search(details):  # a traceback in one line would bury the one fact that matters
            raise WorkerError(f"The NeuROK runtime Python {self.python} lacks the module '{missing.group(1)}': press "
                              "Set up Runtime, or choose a Python that has the runtime requirements, in Edit > "
                              "Preferences > Add-ons > NeuROK")
        message = f"The NeuROK worker {what}"
        if code not in (None, 0, -9):
            message += f" (exit code {code})"
        if details:
            message += f": {details}"
        raise WorkerError(message + ". It will restart on the next Simulate.")


_client: WorkerClient | None = None


def get_client(python: str, timeout: float) -> WorkerClient:
    """The shared client; a changed interpreter replaces (and stops) the running worker."""
    global _client
    if _client is None or _client.python != python:
        shutdown()
        _client = WorkerClient(python, timeout)
    _client.timeout = timeout
    return _client


def shutdown() -> None:
    global _client
    if _client is not None:
        _client.stop()
        _client = None
