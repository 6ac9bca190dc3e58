"""The worker process (``python -m model_runtime.worker``) over its pipes, and the add-on's client around it."""

import io
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from model_runtime import protocol
from model_runtime.mesh import read_obj

ROOT = Path(__file__).resolve().parents[1]
CLOTH = read_obj(str(ROOT / "assets" / "meshes" / "cloth_grid.obj"))
EDGE = np.arange(16)  # the cloth's first row of vertices, pinned


def start_worker() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "model_runtime.worker"], cwd=ROOT, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


@pytest.fixture(scope="module")
def worker():
    process = start_worker()
    yield process
    process.kill()
    process.wait()
    for pipe in (process.stdin, process.stdout, process.stderr):
        pipe.close()


def request(process, request_id, vertices=CLOTH.vertices, faces=CLOTH.faces, pins=EDGE, **params):
    protocol.write_message(process.stdin, "simulate", {"vertices": vertices, "faces": faces, "pins": pins},
                           id=request_id, params={"frames": 6, "material": "cloth", **params})


def answer(process, request_id, on_progress=None) -> protocol.Message:
    """The final message for ``request_id`` (progress messages are checked and skipped)."""
    while True:
        msg = protocol.read_message(process.stdout)
        assert msg is not None, process.stderr.read().decode()
        assert msg["id"] == request_id
        if msg.type != "progress":
            return msg
        assert 0.0 <= msg["fraction"] <= 1.0 and isinstance(msg["message"], str)
        if on_progress is not None:
            on_progress(msg)


def test_simulate_then_warm_resimulate(worker):
    request(worker, 1)
    first = answer(worker, 1)
    assert first.type == "result", first.fields
    positions = first.arrays["positions"]
    assert positions.shape == (7, len(CLOTH.vertices), 3) and positions.dtype == np.float32
    np.testing.assert_allclose(positions[0], CLOTH.vertices, atol=1e-6)
    np.testing.assert_allclose(positions[:, :16], np.broadcast_to(positions[0, :16], (7, 16, 3)), atol=1e-5)
    request(worker, 2, stiffness=5e5)  # a tweak: same mesh, warm model, cached encoding
    second = answer(worker, 2)
    assert second.type == "result" and second["warm"] and not first["warm"]
    assert second["seconds"] < first["seconds"]


def test_an_animated_objects_transforms_travel_as_an_array(worker):
    motion = np.repeat(np.eye(4, dtype=np.float32)[None], 7, axis=0)
    motion[:, 2, 3] = 0.5 * (np.arange(7) / 24.0) ** 2 * 40.0  # 40 m/s^2 upwards
    arrays = {"vertices": CLOTH.vertices, "faces": CLOTH.faces, "pins": EDGE}
    protocol.write_message(worker.stdin, "simulate", {**arrays, "frame_motion": motion}, id=5,
                           params={"frames": 6, "material": "cloth"})
    moved = answer(worker, 5)
    request(worker, 6)
    still = answer(worker, 6)
    assert moved.type == still.type == "result", moved.fields
    sag = (moved.arrays["positions"] - still.arrays["positions"])[-1, 16:, 2]
    assert sag.mean() < -1e-3  # the free cloth lags below its rising pins, in object space
    np.testing.assert_allclose(moved.arrays["positions"][:, :16], still.arrays["positions"][:, :16], atol=1e-5)


@pytest.mark.parametrize("change, kind, match", [
    ({"vertices": np.full((4, 3), np.nan), "faces": np.array([[0, 1, 2]]), "pins": []}, "MeshError", "NaN"),
    ({"faces": np.zeros((0, 3), np.int32)}, "MeshError", "no faces"),
    ({"stiffness": -1.0}, "ParameterError", "stiffness"),
    ({"pins": np.arange(len(CLOTH.vertices))}, "ParameterError", "every vertex is pinned"),
    ({"colour": "red"}, "ProtocolError", "colour"),
])
def test_errors_are_reported_and_the_worker_carries_on(worker, change, kind, match):
    request(worker, 10, **change)
    msg = answer(worker, 10)
    assert (msg.type, msg["kind"]) == ("error", kind)
    assert match in msg["message"]
    request(worker, 11)
    assert answer(worker, 11).type == "result"


def test_cancel_stops_a_running_simulation(worker):
    def cancel_once_running(msg):
        if msg["fraction"] > 0.05:
            protocol.write_message(worker.stdin, "cancel", id=20)

    request(worker, 20, frames=5000)
    assert answer(worker, 20, cancel_once_running).type == "cancelled"
    protocol.write_message(worker.stdin, "cancel", id=21)  # cancelled before it starts
    request(worker, 21)
    assert answer(worker, 21).type == "cancelled"


def test_malformed_input_is_answered_and_ends_the_worker():
    process = start_worker()
    out, err = process.communicate(b"this is not a header\n", timeout=60)
    msg = protocol.read_message(io.BytesIO(out))
    assert (msg.type, msg["kind"], msg["id"]) == ("error", "ProtocolError", None)
    assert process.returncode == 0


def test_library_prints_cannot_corrupt_the_stream():
    """The worker moves file descriptor 1 to stderr on start, so only protocol messages reach the client."""
    script = textwrap.dedent("""
        import os
        from model_runtime import worker

        def noisy_serve(self):  # stands in for a library that prints while the model runs
            os.write(1, b"C-level noise\\n")
            print("Python noise", flush=True)
            self.send("progress", id=1, fraction=0.0, message="ok")

        worker.Worker.serve = noisy_serve
        worker.main()
    """)
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, input=b"", capture_output=True, timeout=60)
    assert protocol.read_message(io.BytesIO(proc.stdout)).type == "progress"
    assert b"C-level noise" in proc.stderr and b"Python noise" in proc.stderr and b"noise" not in proc.stdout


# The add-on's client, with the real worker and with stand-ins that misbehave in ways a real one could.

@pytest.fixture
def client_module(addon):
    return addon.client


def fake_worker(tmp_path: Path, body: str) -> str:
    package = tmp_path / "model_runtime"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "worker.py").write_text(textwrap.dedent(body))
    return str(tmp_path)


@pytest.mark.bpy
def test_client_survives_worker_death(client_module):
    client = client_module.WorkerClient(sys.executable, timeout=120)
    try:
        job = client.submit(CLOTH.vertices.astype(np.float32), CLOTH.faces, EDGE, {"frames": 4})
        first_pid = client.pid
        os.kill(first_pid, signal.SIGKILL)
        with pytest.raises(client_module.WorkerError, match="restart on the next Simulate"):
            client.wait(job)
        assert not client.alive
        job = client.submit(CLOTH.vertices.astype(np.float32), CLOTH.faces, EDGE, {"frames": 4})
        assert client.pid != first_pid
        assert client.wait(job).shape == (5, len(CLOTH.vertices), 3)
    finally:
        client.stop()


@pytest.mark.bpy
@pytest.mark.parametrize("body, match", [
    ("import sys; sys.stdout.buffer.write(b'garbage\\n'); sys.stdout.flush(); sys.stdin.read()", "malformed"),
    ("import sys; sys.stderr.write('Traceback: no module named torch\\n'); sys.exit(3)", "exit code 3.*torch"),
    ("import time; time.sleep(60)", "did not respond for 1 s"),
])
def test_client_reports_a_broken_worker(client_module, tmp_path, body, match):
    client = client_module.WorkerClient(sys.executable, timeout=1, package_dir=fake_worker(tmp_path, body))
    started = time.monotonic()
    try:
        job = client.submit(CLOTH.vertices.astype(np.float32), CLOTH.faces, np.zeros(0, np.int32), {"frames": 4})
        with pytest.raises(client_module.WorkerError, match=match):
            while client.poll(job) is None:  # the modal operator's non-blocking path
                time.sleep(0.05)
        assert not client.alive and time.monotonic() - started < 30
    finally:
        client.stop()


@pytest.mark.bpy
def test_client_reports_a_missing_interpreter(client_module, tmp_path):
    client = client_module.WorkerClient(str(tmp_path / "no-python"))
    with pytest.raises(client_module.WorkerError, match="does not exist"):
        client.submit(CLOTH.vertices.astype(np.float32), CLOTH.faces, np.zeros(0, np.int32), {"frames": 4})
