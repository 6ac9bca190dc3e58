"""The rollout metrics: error against the reference as a fraction of the rest diagonal, next to two baselines (the
rest shape held still and rigid free fall), and the Chamfer-L1 distance of the reconstruction metric."""

import numpy as np
import torch

from ...mesh import bbox_diagonal
from ...params import SimParams


def chamfer_l1(a, b) -> float:
    """Chamfer-L1 of two point clouds (N, 3), (M, 3): mean of the two directed mean Euclidean NN distances."""
    a, b = torch.as_tensor(np.asarray(a), dtype=torch.float64), torch.as_tensor(np.asarray(b), dtype=torch.float64)
    d = torch.cdist(a, b, compute_mode="donot_use_mm_for_euclid_dist")  # exact: CD(P, P) == 0
    return float(0.5 * (d.min(1).values.mean() + d.min(0).values.mean()))


def vertex_error(pred: np.ndarray, ref: np.ndarray, diagonal: float) -> np.ndarray:
    """Per-frame mean vertex distance / diagonal for (T, V, 3) arrays."""
    return np.linalg.norm(np.asarray(pred, np.float64) - np.asarray(ref, np.float64), axis=-1).mean(-1) / diagonal


def rigid_fall(rest: np.ndarray, p: SimParams) -> np.ndarray:
    """Rigid free-fall baseline (T+1, V, 3), held still if pinned; else translated by v0 t + g t^2 / 2, or with
    air drag c > 0 by the exact solution of x'' = g - c x': g t / c + (v0 - g / c)(1 - exp(-c t)) / c."""
    t = np.arange(p.frames + 1)[:, None] / p.fps
    if len(p.pins):
        return np.repeat(rest[None].astype(np.float64), len(t), 0)
    v0, g, c = np.asarray(p.initial_velocity), np.asarray(p.gravity), p.drag
    if c > 1e-9:
        shift = g * t / c + (v0 - g / c) * (-np.expm1(-c * t)) / c
    else:
        shift = t * v0 + 0.5 * t**2 * g
    return rest[None].astype(np.float64) + shift[:, None, :]


def rollout_metrics(pred: np.ndarray, ref: np.ndarray, p: SimParams) -> dict:
    """Model and baseline errors (fractions of the rest diagonal) over all frames and over the first 2 s."""
    rest = np.asarray(ref[0], np.float64)
    diag = bbox_diagonal(rest)
    curves = {"model": vertex_error(pred, ref, diag),
              "rest": vertex_error(np.repeat(rest[None], len(ref), 0), ref, diag),
              "rigid": vertex_error(rigid_fall(rest, p), ref, diag)}
    n2 = min(len(ref), int(round(2.0 * p.fps)) + 1)
    out = {"frames": int(len(ref) - 1), "fps": float(p.fps)}
    for k, c in curves.items():
        out[f"{k}_error"] = float(c[1:].mean())
        out[f"{k}_error_2s"] = float(c[1:n2].mean())
    out["rest_over_model_2s"] = out["rest_error_2s"] / max(out["model_error_2s"], 1e-12)
    out["pin_error"] = pin_error(pred, p.pins, diag)
    out["curves"] = {k: [float(x) for x in c] for k, c in curves.items()}
    return out


def pin_error(positions: np.ndarray, pins: np.ndarray, diagonal: float) -> float | None:
    if not len(pins):
        return None
    return float(np.linalg.norm(positions[:, pins] - positions[0, pins], axis=-1).max() / diagonal)


def summarize(items: list[dict]) -> dict:
    if not items:
        return {}
    keys = ("model_error", "model_error_2s", "rest_error", "rest_error_2s", "rigid_error", "rigid_error_2s")
    s = {k: float(np.mean([it[k] for it in items])) for k in keys}
    s["rest_over_model_2s"] = s["rest_error_2s"] / max(s["model_error_2s"], 1e-12)
    s["median_rest_over_model_2s"] = float(np.median([it["rest_over_model_2s"] for it in items]))
    pins = [it["pin_error"] for it in items if it.get("pin_error") is not None]
    s["max_pin_error"] = max(pins) if pins else None
    s["count"] = len(items)
    return s
