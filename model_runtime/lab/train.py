"""Training: ``python -m model_runtime train --config configs/train_cpu.json [--resume]``.

A conditional VAE step: for a batch of (sequence, frame) pairs, sample points on the rest surface, read the
frame's displacement there, encode rest (prior) and rest + displacement (posterior), decode at other surface
points, and minimize the summed squared displacement error + kl_weight * KL(q || p) (the paper's 0.01).

Free bodies have their rigid motion removed from the targets (best-fit rotation and translation per frame):
the simulator moves them rigidly with explicit coordinates, so the latent only has to carry deformation.
The config's ``device`` picks where it runs: "auto" (a CUDA GPU when torch sees one, else the CPU), "cpu" or
"cuda[:N]". Multi-process training: ``torchrun --nproc_per_node N -m model_runtime train --config ...`` (gloo on
the CPU, NCCL on GPUs, one GPU per process by LOCAL_RANK).
Fine-tuning: a config's ``init`` names weights to start from, with their architecture (no ``model`` key).
"""

import json
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

from ..mesh import Mesh, bbox_diagonal, face_areas
from .model import ModelConfig, NeuROK
from .progress import ProgressBar
from .weights import load_model, read_info, save_model

DEFAULTS = {
    "data": "data/neurok-v1",
    "out": "runs/neurok",
    "model": {},
    "init": None,  # weights (.safetensors) to start from instead of random ones (fine-tuning), with their architecture
    "seed": 0,
    "steps": 20000,
    "batch_size": 16,
    "encoder_points": 512,
    "query_points": 512,
    "lr": 5e-4,
    "min_lr": 2e-5,
    "weight_decay": 0.01,
    "warmup_steps": 200,
    "kl_weight": 0.01,
    "kl_warmup_steps": 500,
    # Surface strain: the displacement difference between two surface points strain_length apart (a fraction of the
    # diagonal) along a random tangent must match the data's, weighted like the displacement error. The positions
    # alone leave the fields' stretch at that scale free, and the continuum energy reads it (docs/decisions.md).
    "strain_weight": 0.0,
    "strain_length": 0.05,
    "grad_clip": 1.0,
    "augment": True,  # random rotations of each sample: orientation must not matter
    "log_every": 25,
    "val_every": 500,
    "ckpt_every": 250,
    "max_sequences": None,
    "max_minutes": None,
    "threads": None,  # CPU threads per process (torch's default when None)
    "device": "auto",
}


def load_config(path: str) -> dict:
    with open(path) as f:
        user = json.load(f)
    unknown = set(user) - set(DEFAULTS)
    if unknown:
        raise ValueError(f"{path}: unknown config keys {sorted(unknown)}")
    if user.get("init") and user.get("model"):
        raise ValueError(f"{path}: 'init' and 'model' exclude each other (fine-tuning keeps the architecture of "
                         "the weights it starts from)")
    return {**DEFAULTS, **user}


@dataclass
class Shape:
    """One sequence prepared for sampling: normalized rest shape and per-frame displacement fields."""

    rest: np.ndarray  # (V, 3) float32, unit diagonal, centred
    faces: np.ndarray  # (F, 3)
    face_cdf: np.ndarray  # (F,) cumulative area for uniform surface sampling
    pin: np.ndarray  # (V,) float32
    disp: np.ndarray  # (T, V, 3) float32, frames 1..T in normalized units


def kabsch(src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rotation R and translation t minimizing |R src + t - dst|^2."""
    cs, cd = src.mean(0), dst.mean(0)
    u, _, vt = np.linalg.svd((src - cs).T @ (dst - cd))
    d = np.sign(np.linalg.det(vt.T @ u.T))
    R = vt.T @ np.diag([1.0, 1.0, d]) @ u.T
    return R, cd - R @ cs


def prepare(seq: dict) -> Shape:
    rest = seq["rest"].astype(np.float64)
    center, scale = (rest.min(0) + rest.max(0)) / 2, bbox_diagonal(rest)
    pin = seq["pin_mask"].astype(np.float32)
    frames = seq["positions"][1:].astype(np.float64)
    if not pin.any():
        aligned = []
        for x in frames:
            R, t = kabsch(x, rest)
            aligned.append(x @ R.T + t)
        frames = np.stack(aligned)
    area = face_areas(Mesh(rest, seq["faces"]))
    return Shape(rest=((rest - center) / scale).astype(np.float32), faces=seq["faces"].astype(np.int64),
                 face_cdf=np.cumsum(area) / area.sum(), pin=pin, disp=((frames - rest) / scale).astype(np.float32))


def load_shapes(root: str, split: str, limit: int | None = None) -> list[Shape]:
    from .data.format import list_sequences, load_sequence

    paths = list_sequences(root, split)[:limit]
    return [prepare(load_sequence(p)) for p in paths]


def random_rotation(rng: np.random.Generator) -> np.ndarray:
    q, r = np.linalg.qr(rng.normal(size=(3, 3)))
    q = q * np.sign(np.diag(r))
    return q * np.sign(np.linalg.det(q))


def sample_points(shape: Shape, frame: int, n: int, rng: np.random.Generator):
    """n area-uniform surface points: rest positions, pinned flags and displacements at that frame, and the face
    each lies on."""
    face = np.minimum(np.searchsorted(shape.face_cdf, rng.random(n)), len(shape.faces) - 1)
    r1, r2 = rng.random(n), rng.random(n)
    s = np.sqrt(r1)
    bary = np.stack([1 - s, s * (1 - r2), s * r2], 1).astype(np.float32)
    tri = shape.faces[face]
    x = np.einsum("nk,nkd->nd", bary, shape.rest[tri])
    pin = (bary * shape.pin[tri]).sum(1)
    d = np.einsum("nk,nkd->nd", bary, shape.disp[frame][tri])
    return x, pin, d, face


def surface_slopes(corners: np.ndarray, disp: np.ndarray, rng: np.random.Generator):
    """A random unit tangent t (n, 3) of each triangle (n, 3 corners, 3) and the derivative of the displacement
    interpolated linearly over it along t (n, 3)."""
    e = corners[:, 1:] - corners[:, :1]  # (n, 2, 3) edges from corner 0
    turn = rng.uniform(0, 2 * np.pi, len(e))
    u = e[:, 0] / np.linalg.norm(e[:, 0], axis=1, keepdims=True).clip(1e-12)
    w = e[:, 1] - (e[:, 1] * u).sum(1, keepdims=True) * u
    w = w / np.linalg.norm(w, axis=1, keepdims=True).clip(1e-12)
    tangent = np.cos(turn)[:, None] * u + np.sin(turn)[:, None] * w
    # t = a e0 + b e1, so the slope is a (d1 - d0) + b (d2 - d0)
    gram = np.einsum("nid,njd->nij", e, e) + 1e-12 * np.eye(2)
    coef = np.linalg.solve(gram, np.einsum("nid,nd->ni", e, tangent)[..., None])[..., 0]
    slope = np.einsum("ni,nid->nd", coef, disp[:, 1:] - disp[:, :1])
    return tangent.astype(np.float32), slope.astype(np.float32)


def make_batch(shapes: list[Shape], cfg: dict, rng: np.random.Generator, augment: bool = True,
               device: torch.device | None = None, slopes: bool = False):
    """Encoder points (positions, pins, displacements) and query points (the same), and with ``slopes`` a random
    surface tangent at each query point and the data's slope along it."""
    cols = [[] for _ in range(8 if slopes else 6)]
    for i in rng.integers(len(shapes), size=cfg["batch_size"]):
        shape = shapes[i]
        frame = int(rng.integers(len(shape.disp)))
        R = random_rotation(rng).astype(np.float32) if augment else np.eye(3, dtype=np.float32)
        for offset, n in ((0, cfg["encoder_points"]), (3, cfg["query_points"])):
            x, pin, d, face = sample_points(shape, frame, n, rng)
            vectors = [x, d]
            if offset and slopes:
                tri = shape.faces[face]
                vectors += surface_slopes(shape.rest[tri], shape.disp[frame][tri], rng)
            for column, value in zip((offset, offset + 2, 6, 7), vectors):
                cols[column].append(value @ R.T)
            cols[offset + 1].append(pin)
    return [torch.as_tensor(np.stack(c), device=device) for c in cols]


def losses(model, batch, cfg: dict):
    """Displacement error, KL and surface strain error (0 for a batch without slopes), each per shape."""
    pts, pin, disp, q, q_pin, q_disp = batch[:6]
    n = q.shape[1]
    step = 0.5 * cfg["strain_length"]
    strained = len(batch) == 8
    if strained:
        tangent, slope = batch[6:]  # two more points per query, +-step along its tangent, decoded with the same latent
        q, q_pin = torch.cat([q, q + step * tangent, q - step * tangent], 1), q_pin.repeat(1, 3)
    pred, kl = model(pts, pin, disp, q, q_pin)
    # Summed (not averaged) over points, rescaled to a fixed count: with a per-coordinate mean, 0.01 x KL
    # dominated and the latent collapsed (measured on this machine).
    scale = cfg["query_points"] / n
    recon = ((pred[:, :n] - q_disp) ** 2).sum((1, 2)) * scale
    strain = torch.zeros_like(recon)
    if strained:
        difference = pred[:, n:2 * n] - pred[:, 2 * n:]
        strain = ((difference - 2 * step * slope) ** 2).sum((1, 2)) * scale
    return recon.mean(), kl.mean(), strain.mean()


def lr_at(step: int, cfg: dict) -> float:
    if step < cfg["warmup_steps"]:
        return cfg["lr"] * (step + 1) / cfg["warmup_steps"]
    progress = min(1.0, (step - cfg["warmup_steps"]) / max(1, cfg["steps"] - cfg["warmup_steps"]))
    return cfg["min_lr"] + 0.5 * (cfg["lr"] - cfg["min_lr"]) * (1 + math.cos(math.pi * progress))


@torch.no_grad()
def validate(model: NeuROK, shapes: list[Shape], cfg: dict, seed: int = 1234) -> dict:
    """Validation loss and mean displacement error (fraction of the diagonal) on a fixed set of samples."""
    model.eval()
    rng = np.random.default_rng(seed)
    device = next(model.parameters()).device
    rec, kls, strain, err, base = [], [], [], [], []
    for _ in range(max(1, 256 // cfg["batch_size"])):
        batch = make_batch(shapes, cfg, rng, cfg["augment"], device, slopes=True)  # strain measured either way
        pts, pin, disp, q, q_pin, q_disp = batch[:6]
        tokens, mu_cond, code = model.prior(pts, pin)
        mu, _ = model.posterior(pts, pin, disp, tokens)
        pred = model.decoder(mu, code, q, q_pin, tokens)
        r, k, s = losses(model, batch, cfg)
        rec.append(float(r))
        kls.append(float(k))
        strain.append(float(s))
        err.append(float((pred - q_disp).norm(dim=-1).mean()))
        base.append(float(q_disp.norm(dim=-1).mean()))
    model.train()
    return {"val_recon": np.mean(rec), "val_kl": np.mean(kls), "val_strain": np.mean(strain),
            "val_vertex_error": np.mean(err), "val_rest_baseline": np.mean(base)}


def pick_device(name: str, local_rank: int = 0) -> torch.device:
    """The config's device: "auto" is CUDA when torch sees a GPU, else the CPU; a plain "cuda" is this process's GPU
    (LOCAL_RANK under torchrun)."""
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name.startswith("cuda"):
        if not torch.cuda.is_available():
            raise ValueError(f"the config asks for device {name!r}, but this torch ({torch.__version__}) sees no CUDA "
                             "GPU; use \"auto\" or \"cpu\"")
        if name == "cuda":
            name = f"cuda:{local_rank}"
    return torch.device(name)


def train(config_path: str, resume: bool = False) -> Path:
    cfg = load_config(config_path)
    distributed = int(os.environ.get("WORLD_SIZE", "1")) > 1
    device = pick_device(cfg["device"], int(os.environ.get("LOCAL_RANK", "0")))
    if device.type == "cuda":
        torch.cuda.set_device(device)
    rank = 0
    if distributed:
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
        rank = dist.get_rank()
    if cfg["threads"]:
        torch.set_num_threads(cfg["threads"])
    out = Path(cfg["out"])
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(cfg["seed"])
    rng = np.random.default_rng([cfg["seed"], rank])
    if cfg["init"]:
        model = load_model(cfg["init"]).train()
        model_cfg = model.cfg
    else:
        model_cfg = ModelConfig(**cfg["model"])
        model = NeuROK(model_cfg)
    model.to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg["lr"], weight_decay=cfg["weight_decay"])
    step, elapsed = 0, 0.0
    ckpt = out / "checkpoint.pt"
    if resume and ckpt.exists():
        state = torch.load(ckpt, weights_only=True, map_location=device)  # tensors and containers: no pickled code
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        step, elapsed = int(state["step"]), float(state["elapsed"])
        rng = np.random.default_rng([cfg["seed"], rank, step])
    gpus = [device.index] if device.type == "cuda" else None
    net = torch.nn.parallel.DistributedDataParallel(model, device_ids=gpus) if distributed else model

    t_load = time.time()
    train_shapes = load_shapes(cfg["data"], "train", cfg["max_sequences"])
    val_shapes = load_shapes(cfg["data"], "val", 64)
    if not train_shapes:
        raise FileNotFoundError(f"no training sequences under {cfg['data']}")
    if rank == 0:
        print(f"{len(train_shapes)} train / {len(val_shapes)} val sequences loaded in {time.time() - t_load:.0f}s, "
              f"{sum(p.numel() for p in model.parameters()) / 1e6:.2f}M parameters, on {device}")
        (out / "config.json").write_text(json.dumps({**cfg, "model": model_cfg.to_dict()}, indent=2) + "\n")
    log = open(out / "log.jsonl", "a") if rank == 0 else None
    bar = ProgressBar("train") if rank == 0 else None
    net.train()
    start = time.time() - elapsed
    while step < cfg["steps"]:
        if cfg["max_minutes"] and (time.time() - start) / 60 > cfg["max_minutes"]:
            break
        for group in opt.param_groups:
            group["lr"] = lr_at(step, cfg)
        batch = make_batch(train_shapes, cfg, rng, cfg["augment"], device, slopes=cfg["strain_weight"] > 0)
        recon, kl, strain = losses(net, batch, cfg)
        beta = cfg["kl_weight"] * min(1.0, (step + 1) / cfg["kl_warmup_steps"])
        loss = recon + beta * kl + cfg["strain_weight"] * strain
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg["grad_clip"])
        opt.step()
        step += 1
        if rank:
            continue
        record = {"step": step, "loss": loss.item(), "recon": recon.item(), "kl": kl.item(), "strain": strain.item(),
                  "lr": opt.param_groups[0]["lr"], "time": time.time() - start}
        if val_shapes and (step % cfg["val_every"] == 0 or step == cfg["steps"]):
            record.update(validate(model, val_shapes, cfg))
        if step == 1 or step % cfg["log_every"] == 0 or "val_recon" in record:
            log.write(json.dumps(record) + "\n")
            log.flush()
        bar.update(step / cfg["steps"], f"loss {record['loss']:.3f} kl {record['kl']:.1f}")
        if step % cfg["ckpt_every"] == 0 or step == cfg["steps"]:
            _checkpoint(model, opt, step, time.time() - start, out)
    if rank == 0:
        bar.close()
        _checkpoint(model, opt, step, time.time() - start, out)
        info = {"steps": step, "wall_minutes": (time.time() - start) / 60, "data": cfg["data"], "seed": cfg["seed"],
                "device": str(device)}
        if cfg["init"]:
            info["init"] = {"weights": str(cfg["init"]), **read_info(cfg["init"])}
        save_model(model, out / "neurok.safetensors", info)
        print(f"saved {out / 'neurok.safetensors'} after {step} steps")
    if distributed:
        dist.destroy_process_group()
    return out / "neurok.safetensors"


def _checkpoint(model, opt, step, elapsed, out: Path) -> None:
    tmp = out / "checkpoint.pt.tmp"
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "step": step, "elapsed": elapsed}, tmp)
    os.replace(tmp, out / "checkpoint.pt")  # atomic: an interrupted save never corrupts the last checkpoint
