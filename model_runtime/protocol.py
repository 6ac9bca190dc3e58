"""Framing of the messages between the Blender add-on and the worker (``python -m model_runtime.worker``).

numpy only, no bpy, no torch, no pickle: Blender's Python imports this module, and neither side ever executes what
the other sends.

A message is one header line followed by a binary payload::

    {"neurok": 1, "type": "simulate", "id": 7, ..., "arrays": [{"name": "vertices", "dtype": "<f4",
     "shape": [V, 3]}, {"name": "faces", "dtype": "<i4", "shape": [F, 3]}]}\\n
    <V*3 little-endian float32><F*3 little-endian int32>

- The header is UTF-8 JSON on a single line (at most ``MAX_HEADER_BYTES``), a JSON object with the protocol version
  ``neurok``, a ``type`` string and any other JSON fields the message type defines.
- ``arrays`` lists the raw arrays that follow, in order, each C-contiguous little-endian float32 (``<f4``) or int32
  (``<i4``); the payload is exactly the sum of their sizes and at most ``max_payload`` bytes.

Message types (``id`` ties replies to their request):

- client -> worker: ``simulate`` {id, params: make_params keyword arguments} + vertices (V, 3) float32 in metres,
  faces (F, 3) int32, pins (P,) int32 and, for an animated object, frame_motion (frames+1, 4, 4) float32
  object-to-world transforms (SimParams.frame_motion); ``cancel`` {id}; ``shutdown``.
- worker -> client: ``progress`` {id, fraction, message}; ``result`` {id, seconds, warm} + positions
  (frames+1, V, 3) float32; ``error`` {id, kind, message}; ``cancelled`` {id}.
"""

import json
from dataclasses import dataclass, field
from typing import BinaryIO

import numpy as np

VERSION = 1
MAX_HEADER_BYTES = 1 << 20
MAX_PAYLOAD_BYTES = 2 << 30  # 2 GiB: e.g. 100 frames of 1.7M vertices; larger results should be split by frames
MAX_ARRAYS = 16
MAX_NDIM = 4
DTYPES = {"<f4": np.dtype("<f4"), "<i4": np.dtype("<i4")}


class ProtocolError(ValueError):
    """A message is malformed, truncated or too large; the stream cannot be trusted afterwards."""


@dataclass
class Message:
    type: str
    fields: dict = field(default_factory=dict)
    arrays: dict[str, np.ndarray] = field(default_factory=dict)

    def __getitem__(self, key: str):
        return self.fields[key]

    def get(self, key: str, default=None):
        return self.fields.get(key, default)


def positions_nbytes(frames: int, num_vertices: int) -> int:
    """Size of a simulation result's payload, so a client can refuse a request whose answer could not be framed."""
    return (frames + 1) * num_vertices * 3 * 4


def encode(type_: str, arrays: dict[str, np.ndarray] | None = None, **fields) -> list[bytes | memoryview]:
    """Header line and array buffers of one message, ready to be written in order (arrays are not copied twice)."""
    specs, buffers = [], []
    for name, a in (arrays or {}).items():
        a = np.asarray(a)
        kind = "<f4" if a.dtype.kind == "f" else "<i4"
        if a.dtype.kind not in "fiub":
            raise ProtocolError(f"array {name!r} has unsupported dtype {a.dtype}")
        a = np.ascontiguousarray(a, dtype=DTYPES[kind])
        specs.append({"name": name, "dtype": kind, "shape": list(a.shape)})
        buffers.append(memoryview(a.reshape(-1).view(np.uint8)))
    header = json.dumps({"neurok": VERSION, "type": type_, **fields, "arrays": specs}, separators=(",", ":"),
                        allow_nan=False).encode("utf-8") + b"\n"
    if len(header) > MAX_HEADER_BYTES:
        raise ProtocolError(f"header of {len(header)} bytes exceeds {MAX_HEADER_BYTES}")
    return [header, *buffers]


def write_message(stream: BinaryIO, type_: str, arrays: dict[str, np.ndarray] | None = None, **fields) -> None:
    for part in encode(type_, arrays, **fields):
        stream.write(part)
    stream.flush()


def read_message(stream: BinaryIO, max_payload: int = MAX_PAYLOAD_BYTES) -> Message | None:
    """Read one message; None at a clean end of stream (between messages). Raises ProtocolError otherwise."""
    line = stream.readline(MAX_HEADER_BYTES + 1)
    if not line:
        return None
    if not line.endswith(b"\n"):
        if len(line) > MAX_HEADER_BYTES:
            raise ProtocolError(f"header longer than {MAX_HEADER_BYTES} bytes")
        raise ProtocolError("stream ended inside a header")
    try:
        header = json.loads(line, parse_constant=_reject_constant)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ProtocolError(f"header is not JSON: {line[:80]!r}") from exc
    specs = _check_header(header)
    sizes = [int(np.prod(shape, dtype=np.int64)) * DTYPES[dtype].itemsize for _, dtype, shape in specs]
    total = sum(sizes)
    if total > max_payload:
        raise ProtocolError(f"payload of {total} bytes exceeds the limit of {max_payload}")
    payload = _read_exact(stream, total)
    arrays, offset = {}, 0
    for (name, dtype, shape), size in zip(specs, sizes):
        arrays[name] = np.frombuffer(payload, DTYPES[dtype], size // DTYPES[dtype].itemsize, offset).reshape(shape)
        offset += size
    fields = {k: v for k, v in header.items() if k not in ("neurok", "type", "arrays")}
    return Message(header["type"], fields, arrays)


def _reject_constant(name: str):
    raise json.JSONDecodeError(f"{name} is not JSON", name, 0)


def _check_header(header) -> list[tuple[str, str, tuple[int, ...]]]:
    if not isinstance(header, dict):
        raise ProtocolError("header is not a JSON object")
    if header.get("neurok") != VERSION:
        raise ProtocolError(f"unsupported protocol version {header.get('neurok')!r} (expected {VERSION})")
    if not isinstance(header.get("type"), str):
        raise ProtocolError("header has no message type")
    specs = header.get("arrays", [])
    if not isinstance(specs, list) or len(specs) > MAX_ARRAYS:
        raise ProtocolError("header 'arrays' must be a list of at most %d entries" % MAX_ARRAYS)
    out, names = [], set()
    for s in specs:
        if not isinstance(s, dict):
            raise ProtocolError("array description is not an object")
        name, dtype, shape = s.get("name"), s.get("dtype"), s.get("shape")
        if not isinstance(name, str) or name in names:
            raise ProtocolError(f"array name {name!r} is missing or repeated")
        if dtype not in DTYPES:
            raise ProtocolError(f"array {name!r} has unsupported dtype {dtype!r}")
        if (not isinstance(shape, list) or len(shape) > MAX_NDIM
                or not all(isinstance(n, int) and not isinstance(n, bool) and 0 <= n < 1 << 40 for n in shape)):
            raise ProtocolError(f"array {name!r} has an invalid shape {shape!r}")
        names.add(name)
        out.append((name, dtype, tuple(shape)))
    return out


def _read_exact(stream: BinaryIO, n: int) -> bytearray:
    buf = bytearray(n)
    view, got = memoryview(buf), 0
    while got < n:
        k = stream.readinto(view[got:])
        if not k:
            raise ProtocolError(f"stream ended after {got} of {n} payload bytes")
        got += k
    return buf
