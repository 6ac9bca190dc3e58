"""A short training run on a tiny config learns, checkpoints, resumes and exports loadable weights."""

import json

import numpy as np
import pytest
import torch

from model_runtime.lab.data.format import save_sequence
from model_runtime.lab.data.shapes import grid_sheet
from model_runtime.lab.train import kabsch, load_config, pick_device, train
from model_runtime.lab.weights import load_model, read_info, save_model

CONFIG = "configs/train_tiny.json"


def bending_sheets(root, count=10, frames=6, seed=0):
    """Sheets pinned along one edge that bend down as the squared distance from it: a cantilever-like family."""
    root.mkdir()
    rng = np.random.default_rng(seed)
    for i in range(count):
        n, size = int(rng.integers(6, 12)), rng.uniform(0.5, 2.0)
        v, f = grid_sheet(n - 1, n - 1, size, size)
        y = (v[:, 1] - v[:, 1].min()) / size
        amp = rng.uniform(0.05, 0.3) * size
        pos = [v + np.outer(y**2, [0, 0, -amp * t / frames]) for t in range(frames + 1)]
        save_sequence(str(root / f"seq_{i:06d}.npz"), v, f, np.stack(pos), 24.0, y == 0, {}, "sheet",
                      f"sheet{i}", split="val" if i >= count - 2 else "train")


@pytest.fixture
def tiny_config(tmp_path):
    bending_sheets(tmp_path / "data")
    cfg = load_config(CONFIG)
    cfg.update(data=str(tmp_path / "data"), out=str(tmp_path / "run"))
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    return path, cfg


def test_short_training_reduces_loss_and_resumes(tiny_config):
    path, cfg = tiny_config
    weights = train(str(path))
    log = [json.loads(line) for line in open(f"{cfg['out']}/log.jsonl")]
    assert log[0]["step"] == 1
    assert np.mean([r["recon"] for r in log[-10:]]) < 0.6 * np.mean([r["recon"] for r in log[:3]])
    assert log[-1]["val_vertex_error"] < 0.5 * log[-1]["val_rest_baseline"]
    load_model(weights)  # the exported file is a valid, loadable model
    assert read_info(weights)["device"] == str(pick_device("auto"))

    cfg["steps"] += 10
    path.write_text(json.dumps(cfg))
    train(str(path), resume=True)
    steps = [json.loads(line)["step"] for line in open(f"{cfg['out']}/log.jsonl")]
    assert steps[-1] == cfg["steps"] and max(steps[: len(log)]) < steps[-1]
    assert torch.load(f"{cfg['out']}/checkpoint.pt", weights_only=True)["step"] == cfg["steps"]


def test_fine_tuning_starts_from_the_given_weights(tiny_config, tmp_path):
    path, cfg = tiny_config
    trained = load_model(train(str(path)))
    save_model(trained, tmp_path / "trained.safetensors", {"steps": cfg["steps"]})

    # A vanishing learning rate: the tuned weights must be the given ones, not a fresh initialization.
    tuned_cfg = {**cfg, "init": str(tmp_path / "trained.safetensors"), "out": str(tmp_path / "tuned"), "steps": 2,
                 "lr": 1e-12, "min_lr": 1e-12, "model": {}}  # the architecture comes from the weights
    (tmp_path / "tuned.json").write_text(json.dumps(tuned_cfg))
    tuned = train(str(tmp_path / "tuned.json"))
    expected = trained.state_dict()
    assert all(torch.allclose(t, expected[k], atol=1e-6) for k, t in load_model(tuned).state_dict().items())
    assert read_info(tuned)["init"]["steps"] == cfg["steps"]

    (tmp_path / "both.json").write_text(json.dumps({**tuned_cfg, "model": cfg["model"]}))
    with pytest.raises(ValueError, match="exclude each other"):
        load_config(str(tmp_path / "both.json"))


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without a GPU")
def test_a_gpu_config_without_a_gpu_is_refused_clearly(tiny_config):
    path, cfg = tiny_config
    assert pick_device("auto") == torch.device("cpu")
    path.write_text(json.dumps({**cfg, "device": "cuda"}))
    with pytest.raises(ValueError, match="sees no CUDA GPU"):
        train(str(path))


def test_kabsch_recovers_a_rigid_motion():
    rng = np.random.default_rng(0)
    src = rng.normal(size=(30, 3))
    q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    q *= np.sign(np.linalg.det(q))
    R, t = kabsch(src, src @ q.T + [1.0, 2.0, 3.0])
    np.testing.assert_allclose(R, q, atol=1e-9)
    np.testing.assert_allclose(t, [1.0, 2.0, 3.0], atol=1e-9)


def test_torchrun_trains_with_two_processes(tiny_config, tmp_path):
    """DDP over gloo on the CPU: two ranks step together and rank 0 writes the log and the weights."""
    import subprocess
    import sys

    path, cfg = tiny_config
    cfg.update(steps=20, val_every=20, ckpt_every=20)
    path.write_text(json.dumps(cfg))
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "-m",
                           "model_runtime", "train", "--config", str(path)], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    steps = [json.loads(line)["step"] for line in open(f"{cfg['out']}/log.jsonl")]
    assert steps[-1] == 20
    load_model(f"{cfg['out']}/neurok.safetensors")


def test_surface_slopes_of_an_affine_displacement_are_its_matrix_along_the_tangent():
    from model_runtime.lab.train import surface_slopes

    rng = np.random.default_rng(0)
    corners = rng.normal(size=(50, 3, 3))
    A = rng.normal(size=(3, 3))
    tangent, slope = surface_slopes(corners, corners @ A.T, rng)
    normal = np.cross(corners[:, 1] - corners[:, 0], corners[:, 2] - corners[:, 0])
    np.testing.assert_allclose(np.linalg.norm(tangent, axis=1), 1.0, rtol=1e-5)
    np.testing.assert_allclose((tangent * normal).sum(1), 0.0, atol=1e-4 * np.abs(normal).max())
    np.testing.assert_allclose(slope, tangent @ A.T, rtol=1e-3, atol=1e-4)


def test_training_with_surface_strain_fits_the_datas_slopes_better(tiny_config, tmp_path):
    path, cfg = tiny_config
    val_strain = {}
    for weight in (0.0, 10.0):
        cfg.update(strain_weight=weight, val_every=cfg["steps"], out=str(tmp_path / f"run{weight}"))
        path.write_text(json.dumps(cfg))
        train(str(path))
        log = [json.loads(line) for line in open(f"{cfg['out']}/log.jsonl")]
        val_strain[weight] = log[-1]["val_strain"]
    assert val_strain[10.0] < 0.3 * val_strain[0.0], val_strain  # validation measures it either way


@pytest.mark.parametrize("name", ["train_cpu.json", "train_tiny.json", "train_v3.json", "finetune_v2.json"])
def test_every_training_config_loads(name):
    cfg = load_config(f"configs/{name}")
    assert cfg["steps"] > 0 and cfg["device"] in ("auto", "cpu")
