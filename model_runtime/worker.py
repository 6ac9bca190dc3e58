"""The simulation worker the Blender add-on starts: ``python -m model_runtime.worker``.

It reads requests from stdin and answers on stdout in the framing of :mod:`model_runtime.protocol`. One
:class:`~model_runtime.simulator.Simulator` stays loaded for the worker's lifetime (it keeps what the last mesh's path
built: its coarse sheet, or its lattice, subspace and cubature), so re-simulating after a parameter tweak only
integrates.

A reader thread keeps listening while a simulation runs, so a ``cancel`` stops it at the simulator's next check;
the client may also simply kill the process. Anything printed by libraries goes to stderr, never into the protocol.
"""

import os
import queue
import sys
import threading
import time
import traceback
from typing import BinaryIO

from . import protocol
from .errors import Cancelled, NeuROKError
from .mesh import validate
from .params import make_params


class RuntimeMissing(NeuROKError):
    """The worker's Python lacks a package the model needs (torch...)."""


PROGRESS_INTERVAL = 0.05  # s: more frequent progress messages would only cost the client redraws


class Worker:
    def __init__(self, out: BinaryIO):
        self.out = out
        self.simulator = None
        self.requests: queue.Queue = queue.Queue()
        self.cancelled: set[int] = set()
        self._write_lock = threading.Lock()

    def send(self, type_: str, arrays=None, **fields) -> None:
        with self._write_lock:
            protocol.write_message(self.out, type_, arrays, **fields)

    def listen(self, stdin: BinaryIO) -> None:
        """Reader thread: queue requests, flag cancellations at once; end of input means shut down."""
        try:
            while (msg := protocol.read_message(stdin)) is not None:
                if msg.type == "cancel":
                    self.cancelled.add(msg.get("id"))
                elif msg.type == "shutdown":
                    break
                else:
                    self.requests.put(msg)
        except protocol.ProtocolError as exc:
            # The input stream is out of step; nothing after this point can be trusted.
            self.send("error", id=None, kind="ProtocolError", message=f"malformed request: {exc}")
        self.requests.put(None)

    def serve(self) -> None:
        while (msg := self.requests.get()) is not None:
            request_id = msg.get("id")
            if msg.type != "simulate":
                self.send("error", id=request_id, kind="ProtocolError", message=f"unknown request {msg.type!r}")
            elif request_id in self.cancelled:
                self.send("cancelled", id=request_id)
            else:
                self.simulate(request_id, msg)

    def simulate(self, request_id, msg: protocol.Message) -> None:
        last = [0.0]

        def progress(fraction: float, message: str = "") -> None:
            now = time.monotonic()
            if now - last[0] >= PROGRESS_INTERVAL or fraction >= 1.0:
                last[0] = now
                self.send("progress", id=request_id, fraction=float(fraction), message=str(message))

        start = time.monotonic()
        warm = self.simulator is not None
        try:
            vertices, faces = msg.arrays.get("vertices"), msg.arrays.get("faces")
            if vertices is None or faces is None:
                raise protocol.ProtocolError("a simulate request needs 'vertices' and 'faces' arrays")
            options = msg.get("params") or {}
            if not isinstance(options, dict):
                raise protocol.ProtocolError("'params' must be a JSON object")
            try:
                params = make_params(**options, pins=msg.arrays.get("pins"),
                                     frame_motion=msg.arrays.get("frame_motion"), num_vertices=len(vertices))
            except TypeError as exc:  # an unknown or repeated option name
                raise protocol.ProtocolError(f"bad simulation options: {exc}") from exc
            validate(vertices, faces)  # a bad mesh is reported before the first request pays for loading torch
            if self.simulator is None:
                progress(0.0, "loading the NeuROK runtime")
                try:
                    from .simulator import Simulator  # torch loads here, not at worker start
                except ImportError as exc:
                    raise RuntimeMissing(f"{sys.executable} cannot run the NeuROK runtime ({exc}); choose a Python "
                                         "with its runtime requirements in the add-on preferences") from exc

                self.simulator = Simulator()
            positions = self.simulator.simulate(vertices, faces, params, progress=progress,
                                                should_cancel=lambda: request_id in self.cancelled)
        except Cancelled:
            self.send("cancelled", id=request_id)
        except (NeuROKError, protocol.ProtocolError) as exc:
            self.send("error", id=request_id, kind=type(exc).__name__, message=str(exc))
        except Exception as exc:  # a bug or an exhausted machine: report it instead of dying silently
            traceback.print_exc()
            self.send("error", id=request_id, kind="InternalError",
                      message=f"the NeuROK runtime failed unexpectedly: {type(exc).__name__}: {exc}")
        else:
            self.send("result", {"positions": positions}, id=request_id, seconds=time.monotonic() - start,
                      warm=warm)
        finally:
            self.cancelled.discard(request_id)


def main() -> int:
    # Keep the real stdout for the protocol and point file descriptor 1 at stderr, so that a stray print (ours,
    # torch's or a C library's) can never corrupt the message stream.
    out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    worker = Worker(out)
    threading.Thread(target=worker.listen, args=(sys.stdin.buffer,), daemon=True, name="neurok-reader").start()
    worker.serve()
    out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
