"""Dataset generation: many scenes through the reference simulator, in parallel processes, resumably.

Sequence ``i`` of a dataset with seed ``S`` is ``scenes.sample_scene(S, i, config)``: the same on every run and
machine count, so an interrupted run resumes where it stopped (finished ``seq_*.npz`` and logged rejections are
skipped). Exploded sequences (non-finite positions, or any edge stretched beyond ``max_edge_stretch`` x its rest
length) go to ``rejected.jsonl`` instead of the dataset. ``timings.jsonl`` logs every finished index.
"""

import json
import multiprocessing as mp
import os
import time

import numpy as np

from ...errors import SimulationError
from ...mesh import edge_strain
from ..progress import ProgressBar
from .format import save_sequence, sequence_name, split_for_shape
from .scenes import DEFAULT_CONFIG, sample_scene


def max_edge_stretch(positions: np.ndarray, faces: np.ndarray) -> float:
    """Largest ratio of an edge's length in any frame to its rest length."""
    return float(edge_strain(positions, faces).max()) + 1.0


def simulate_one(seed: int, index: int, config: dict, out_dir: str) -> dict:
    """Simulate, check and save sequence ``index``; return a log record (status ok/rejected, seconds, reason)."""
    from .reference import simulate_reference

    cfg = {**DEFAULT_CONFIG, **config}
    start, cpu = time.perf_counter(), time.process_time()
    scene = sample_scene(seed, index, cfg)
    record = {"index": index, "family": scene.family, "variant": scene.variant, "vertices": len(scene.vertices)}
    try:
        positions = simulate_reference(scene.vertices, scene.faces, scene.params, settings=cfg["solver"])
        stretch = max_edge_stretch(positions, scene.faces)
        reason = None if stretch <= cfg["max_edge_stretch"] else f"edge stretched {stretch:.2f}x its rest length"
    except SimulationError as exc:
        reason, stretch = str(exc), float("nan")
    # Wall time, and this process's CPU time, which a busy machine does not inflate.
    record.update(seconds=round(time.perf_counter() - start, 3), cpu_seconds=round(time.process_time() - cpu, 3),
                  stretch=round(stretch, 3))
    if reason is not None:
        return {**record, "status": "rejected", "reason": reason, "params": scene.params.to_dict()}
    pin_mask = np.zeros(len(scene.vertices), bool)
    pin_mask[scene.params.pins] = True
    params = scene.params.to_dict()
    del params["pins"]  # stored as pin_mask
    params["variant"] = scene.variant
    save_sequence(os.path.join(out_dir, sequence_name(index)), positions[0], scene.faces, positions,
                  scene.params.fps, pin_mask, params, scene.family, scene.shape_id)
    return {**record, "status": "ok"}


def _worker_init(cache_dir: str) -> None:
    os.environ["WARP_CACHE_PATH"] = cache_dir


def _task(job):
    seed, index, config, out_dir = job
    try:
        return simulate_one(seed, index, config, out_dir)
    except Exception as exc:  # a crash in one scene must not stop the dataset; it is logged as a rejection
        return {"index": index, "status": "rejected", "reason": f"{type(exc).__name__}: {exc}"}


def _done_indices(out_dir: str) -> set[int]:
    done = {int(n[4:10]) for n in os.listdir(out_dir) if n.startswith("seq_") and n.endswith(".npz")
            and not n.endswith(".tmp.npz")}
    path = os.path.join(out_dir, "rejected.jsonl")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            done |= {json.loads(line)["index"] for line in f if line.strip()}
    return done


def generate(out_dir: str, count: int, workers: int = 1, seed: int = 0, config: dict | None = None,
             show_progress: bool = True, split: str | None = None) -> dict:
    """Make sequences 0..count-1 that are not on disk yet; return the dataset statistics (also in stats.json).

    ``split``: only the sequences whose shape falls in that split, the same files the full dataset holds (a test
    split to evaluate on without simulating the training data)."""
    from .stats import dataset_stats

    config = dict(config or {})
    os.makedirs(out_dir, exist_ok=True)
    cache = os.environ.get("WARP_CACHE_PATH") or os.path.join(out_dir, ".warp_cache")
    done = _done_indices(out_dir)
    todo = [i for i in range(count) if i not in done]
    if split is not None:
        cfg = {**DEFAULT_CONFIG, **config}
        todo = [i for i in todo if split_for_shape(sample_scene(seed, i, cfg).shape_id) == split]
    with open(os.path.join(out_dir, "generation.json"), "w", encoding="utf-8") as f:
        json.dump({"seed": seed, "count": count, "config": {**DEFAULT_CONFIG, **config}}, f, indent=1)
    bar = ProgressBar("generate") if show_progress else None
    jobs = [(seed, i, config, out_dir) for i in todo]
    start = time.perf_counter()
    finished = 0
    with open(os.path.join(out_dir, "rejected.jsonl"), "a", encoding="utf-8") as rejected, \
            open(os.path.join(out_dir, "timings.jsonl"), "a", encoding="utf-8") as timings:
        if workers <= 1:
            _worker_init(cache)
            results = map(_task, jobs)
            pool = None
        else:
            pool = mp.get_context("spawn").Pool(workers, initializer=_worker_init, initargs=(cache,))
            results = pool.imap_unordered(_task, jobs)
        try:
            for rec in results:
                finished += 1
                if rec["status"] == "rejected":
                    rejected.write(json.dumps(rec) + "\n")
                    rejected.flush()
                keys = ("index", "status", "family", "seconds", "cpu_seconds")
                timings.write(json.dumps({k: rec.get(k) for k in keys}) + "\n")
                timings.flush()
                if bar is not None:
                    bar.update(finished / max(len(jobs), 1), f"{finished}/{len(jobs)} seq {rec['index']}")
        finally:
            if pool is not None:
                pool.terminate()
    if bar is not None:
        bar.close()
    stats = dataset_stats(out_dir)
    stats["last_run_wall_seconds"] = round(time.perf_counter() - start, 1)
    stats["last_run_sequences"] = len(jobs)
    with open(os.path.join(out_dir, "stats.json"), "w", encoding="utf-8") as f:
        json.dump(stats, f, indent=1)
    return stats
