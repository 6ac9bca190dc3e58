"""Dataset statistics: counts per family and split, parameter ranges in physical units, rejections, timing."""

import json
import os
from collections import Counter

import numpy as np

from .format import list_sequences, load_params

UNITS = {"stiffness": "Pa", "density": "kg/m^3", "poisson": "", "damping": "s", "thickness": "m (cloth)",
         "drag": "1/s", "gravity_magnitude": "m/s^2", "speed": "m/s", "spin": "rad/s"}


def _read_jsonl(path: str) -> list[dict]:
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _reason_kind(reason: str) -> str:
    """'edge' (stretched beyond the bound), 'diverged' (non-finite positions), 'collapsed' (a solid turned elements
    inside out) or the exception's name."""
    if reason.startswith("edge"):
        return "edge"
    if "inside out" in reason:
        return "collapsed"
    if "diverged" in reason:
        return "diverged"
    return reason.split(":")[0]


def dataset_stats(root: str) -> dict:
    paths = list_sequences(root)
    rows = [load_params(p) for p in paths]
    timings = _read_jsonl(os.path.join(root, "timings.jsonl"))
    rejected = _read_jsonl(os.path.join(root, "rejected.jsonl"))
    values: dict[str, list[float]] = {k: [] for k in UNITS}
    for r in rows:
        for k in ("stiffness", "density", "poisson", "damping", "drag"):
            values[k].append(r[k])
        if r["family"] in ("cloth", "cutout"):
            values["thickness"].append(r["thickness"])
        values["gravity_magnitude"].append(float(np.linalg.norm(r["gravity"])))
        values["speed"].append(float(np.linalg.norm(r["initial_velocity"])))
        values["spin"].append(float(np.linalg.norm(r["angular_velocity"])))
    ok_times = [t["seconds"] for t in timings if t.get("status") == "ok" and t.get("seconds") is not None]
    with_vertices = [t for t in timings if t.get("status") == "ok"]
    attempted = len(rows) + len(rejected)
    return {
        "sequences": len(rows),
        "per_family": dict(Counter(r["family"] for r in rows)),
        "per_variant": dict(Counter(f"{r['family']}/{r.get('variant', '?')}" for r in rows)),
        "per_split": dict(Counter(r["split"] for r in rows)),
        "shapes": len({r["shape_id"] for r in rows}),
        "with_ground": sum(r["ground"] is not None for r in rows),
        "parameter_ranges": {k: {"unit": UNITS[k], "min": float(np.min(v)), "median": float(np.median(v)),
                                 "max": float(np.max(v))} for k, v in values.items() if v},
        "rejected": len(rejected),
        "rejection_rate": round(len(rejected) / attempted, 4) if attempted else 0.0,
        "rejection_reasons": dict(Counter(_reason_kind(r.get("reason", "?")) for r in rejected)),
        "rejected_per_family": dict(Counter(r.get("family", "?") for r in rejected)),
        "rejected_per_variant": dict(Counter(f"{r.get('family', '?')}/{r.get('variant', '?')}" for r in rejected)),
        "seconds_per_sequence_one_process": {"mean": round(float(np.mean(ok_times)), 2),
                                             "max": round(float(np.max(ok_times)), 2)} if ok_times else None,
        "simulated_sequences_logged": len(with_vertices),
        # CPU time where it was logged (since v2); a worker's wall time before that.
        "cpu_seconds_total": round(float(sum(t.get("cpu_seconds") or t.get("seconds") or 0 for t in timings)), 1),
    }


def format_stats(s: dict) -> str:
    lines = [f"sequences: {s['sequences']}  shapes: {s['shapes']}  with ground: {s['with_ground']}",
             f"per family: {s['per_family']}", f"per split:  {s['per_split']}",
             f"rejected: {s['rejected']} (rate {s['rejection_rate']:.1%}) {s['rejection_reasons']}",
             f"rejected per family: {s.get('rejected_per_family', {})}",
             f"time per sequence (one process): {s['seconds_per_sequence_one_process']}; "
             f"CPU seconds total {s['cpu_seconds_total']}", "parameter ranges (min / median / max):"]
    for k, r in s["parameter_ranges"].items():
        lines.append(f"  {k:18s} {r['min']:10.4g} {r['median']:10.4g} {r['max']:10.4g}  {r['unit']}")
    lines.append("per variant: kept (rejected)")
    dropped = s.get("rejected_per_variant", {})
    lines += [f"  {k:28s} {s['per_variant'].get(k, 0):4d} ({dropped.get(k, 0)})"
              for k in sorted(set(s["per_variant"]) | set(dropped))]
    return "\n".join(lines)
