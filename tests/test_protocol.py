"""The worker protocol's framing: round trips, and rejection of malformed, truncated or oversized messages."""

import io
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis.extra import numpy as hnp

from model_runtime import protocol


def roundtrip(type_, arrays=None, max_payload=protocol.MAX_PAYLOAD_BYTES, **fields):
    stream = io.BytesIO()
    protocol.write_message(stream, type_, arrays, **fields)
    stream.seek(0)
    return protocol.read_message(stream, max_payload), stream


def raw(header: dict | bytes, payload: bytes = b"") -> io.BytesIO:
    line = header if isinstance(header, bytes) else json.dumps(header).encode() + b"\n"
    return io.BytesIO(line + payload)


def test_roundtrip_fields_and_arrays():
    vertices = np.random.default_rng(0).normal(size=(7, 3)).astype(np.float32)
    faces = np.array([[0, 1, 2], [2, 3, 4]], np.int32)
    msg, stream = roundtrip("simulate", {"vertices": vertices, "faces": faces, "pins": np.zeros(0, np.int32)},
                            id=3, params={"frames": 10, "ground": None})
    assert msg.type == "simulate" and msg["id"] == 3 and msg["params"] == {"frames": 10, "ground": None}
    np.testing.assert_array_equal(msg.arrays["vertices"], vertices)
    np.testing.assert_array_equal(msg.arrays["faces"], faces)
    assert msg.arrays["pins"].shape == (0,) and msg.arrays["faces"].dtype == np.dtype("<i4")
    assert protocol.read_message(stream) is None  # clean end of stream between messages


def test_header_is_one_documented_json_line_followed_by_little_endian_payload():
    parts = protocol.encode("result", {"positions": np.arange(6, dtype=np.float64).reshape(1, 2, 3)}, id=1)
    header = json.loads(parts[0])
    assert parts[0].count(b"\n") == 1 and parts[0].endswith(b"\n")
    assert header == {"neurok": protocol.VERSION, "type": "result", "id": 1,
                      "arrays": [{"name": "positions", "dtype": "<f4", "shape": [1, 2, 3]}]}
    assert bytes(parts[1]) == np.arange(6, dtype="<f4").tobytes()


def test_several_messages_in_one_stream():
    stream = io.BytesIO()
    for i in range(3):
        protocol.write_message(stream, "progress", id=1, fraction=i / 2, message=f"step {i}")
    stream.seek(0)
    assert [protocol.read_message(stream)["fraction"] for _ in range(3)] == [0.0, 0.5, 1.0]


@settings(max_examples=50, deadline=None)
@given(hnp.arrays(np.float32, hnp.array_shapes(max_dims=4, max_side=5)),
       hnp.arrays(np.int32, hnp.array_shapes(min_dims=1, max_dims=2, max_side=5)))
def test_roundtrip_any_shape(floats, ints):
    msg, _ = roundtrip("x", {"a": floats, "b": ints})
    np.testing.assert_array_equal(msg.arrays["a"], floats)
    np.testing.assert_array_equal(msg.arrays["b"], ints)


@pytest.mark.parametrize("stream, match", [
    (raw(b"not json\n"), "not JSON"),
    (raw(b"\xff\xfe\n"), "not JSON"),
    (raw(b"[1, 2]\n"), "not a JSON object"),
    (raw({"type": "x"}), "version"),
    (raw({"neurok": 99, "type": "x"}), "version"),
    (raw({"neurok": 1}), "type"),
    (raw({"neurok": 1, "type": "x", "arrays": {}}), "list"),
    (raw({"neurok": 1, "type": "x", "arrays": [{"name": "a", "dtype": "<f8", "shape": [1]}]}), "dtype"),
    (raw({"neurok": 1, "type": "x", "arrays": [{"name": "a", "dtype": "|O", "shape": [1]}]}), "dtype"),
    (raw({"neurok": 1, "type": "x", "arrays": [{"name": "a", "dtype": "<f4", "shape": [-1]}]}), "shape"),
    (raw({"neurok": 1, "type": "x", "arrays": [{"name": "a", "dtype": "<f4", "shape": [1.5]}]}), "shape"),
    (raw({"neurok": 1, "type": "x", "arrays": [{"name": "a", "dtype": "<f4", "shape": [1] * 5}]}), "shape"),
    (raw({"neurok": 1, "type": "x", "arrays": [{"name": "a", "dtype": "<f4", "shape": [1]},
                                               {"name": "a", "dtype": "<f4", "shape": [1]}]}), "repeated"),
    (raw({"neurok": 1, "type": "x", "arrays": [{"name": "a", "dtype": "<f4", "shape": [4]}]}, b"\0" * 15),
     "ended after 15 of 16"),
    (raw(b'{"neurok": 1, "type": "x"'), "inside a header"),
])
def test_malformed_messages_are_rejected(stream, match):
    with pytest.raises(protocol.ProtocolError, match=match):
        protocol.read_message(stream)


def test_oversized_payload_is_rejected_before_reading_it():
    # Announces 4 TB; the reader must refuse from the header alone instead of allocating or waiting for it.
    stream = raw({"neurok": 1, "type": "x", "arrays": [{"name": "a", "dtype": "<f4", "shape": [1 << 20, 1 << 20]}]})
    with pytest.raises(protocol.ProtocolError, match="exceeds the limit"):
        protocol.read_message(stream)
    with pytest.raises(protocol.ProtocolError, match="exceeds the limit"):
        roundtrip("x", {"a": np.zeros(100, np.float32)}, max_payload=399)


def test_oversized_header_is_rejected():
    stream = io.BytesIO(b"{" + b" " * (protocol.MAX_HEADER_BYTES + 10) + b"}\n")
    with pytest.raises(protocol.ProtocolError, match="longer than"):
        protocol.read_message(stream)
    with pytest.raises(protocol.ProtocolError, match="exceeds"):
        protocol.encode("x", note="y" * protocol.MAX_HEADER_BYTES)


def test_only_numeric_arrays_and_finite_json_are_sent():
    with pytest.raises(protocol.ProtocolError, match="dtype"):
        protocol.encode("x", {"a": np.array(["text"])})
    with pytest.raises(ValueError):
        protocol.encode("x", value=float("nan"))  # JSON has no NaN
    with pytest.raises(protocol.ProtocolError, match="not JSON"):
        protocol.read_message(raw(b'{"neurok": 1, "type": "x", "value": NaN}\n'))


def test_empty_arrays_roundtrip():
    msg, _ = roundtrip("x", {"faces": np.zeros((0, 3), np.int32), "pins": []})
    assert msg.arrays["faces"].shape == (0, 3) and msg.arrays["pins"].shape == (0,)
