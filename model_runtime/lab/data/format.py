"""The sequence format: one ``.npz`` per simulated sequence, loadable with ``allow_pickle=False``.

Keys: ``rest`` (V, 3) float32, ``faces`` (F, 3) int32, ``positions`` (T+1, V, 3) float32 with positions[0] == rest,
``fps`` float32 scalar, ``pin_mask`` (V,) bool, ``params`` JSON string of every physical parameter in SI units plus
family and shape_id, ``family``, ``shape_id`` and ``split`` (train/val/test) strings. Splits are decided by the
shape alone (a hash of shape_id), so no shape ever appears in two splits.
"""

import glob
import hashlib
import json
import os

import numpy as np

SPLITS = ("train", "val", "test")
SPLIT_FRACTIONS = (0.9, 0.05, 0.05)


def split_for_shape(shape_id: str) -> str:
    """Deterministic shape-wise split: a shape's hash, not its sequence, picks train/val/test."""
    u = int(hashlib.sha1(shape_id.encode()).hexdigest()[:8], 16) / 0x1_0000_0000
    edge = np.cumsum(SPLIT_FRACTIONS)
    return SPLITS[int(np.searchsorted(edge, u, side="right"))] if u < edge[-1] else SPLITS[-1]


def save_sequence(path: str, rest, faces, positions, fps: float, pin_mask, params: dict, family: str,
                  shape_id: str, split: str | None = None) -> None:
    """Write atomically (temporary file, then rename) so a reader never sees a half-written sequence."""
    positions = np.asarray(positions, np.float32)
    rest = np.asarray(rest, np.float32)
    if positions.ndim != 3 or positions.shape[1:] != rest.shape or not np.array_equal(positions[0], rest):
        raise ValueError("positions must be (T+1, V, 3) with positions[0] equal to rest")
    split = split or split_for_shape(shape_id)
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    meta = {**params, "family": family, "shape_id": shape_id}
    tmp = path + ".tmp.npz"
    np.savez_compressed(tmp, rest=rest, faces=np.asarray(faces, np.int32), positions=positions,
                        fps=np.float32(fps), pin_mask=np.asarray(pin_mask, bool), params=np.str_(json.dumps(meta)),
                        family=np.str_(family), shape_id=np.str_(shape_id), split=np.str_(split))
    os.replace(tmp, path)


def load_sequence(path: str) -> dict:
    """Arrays as saved; strings as str, ``fps`` as float and ``params`` parsed from JSON to a dict."""
    with np.load(path, allow_pickle=False) as z:
        d = {k: z[k] for k in z.files}
    for k in ("family", "shape_id", "split"):
        d[k] = str(d[k])
    d["fps"] = float(d["fps"])
    d["params"] = json.loads(str(d["params"]))
    return d


def load_params(path: str) -> dict:
    """Only the parameter JSON of a sequence (cheap: npz members load lazily)."""
    with np.load(path, allow_pickle=False) as z:
        return {**json.loads(str(z["params"])), "split": str(z["split"])}


def sequence_name(index: int) -> str:
    return f"seq_{index:06d}.npz"


def list_sequences(root: str, split: str | None = None) -> list[str]:
    """Finished sequence files under ``root`` (sorted), optionally only those of one split."""
    paths = sorted(p for p in glob.glob(os.path.join(root, "seq_*.npz")) if not p.endswith(".tmp.npz"))
    if split is None:
        return paths
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    out = []
    for p in paths:
        with np.load(p, allow_pickle=False) as z:
            if str(z["split"]) == split:
                out.append(p)
    return out
