"""The report's figures: loss curves of a training run, rollout error over time, and filmstrips (reference above,
NeuROK below)."""

import json
from pathlib import Path

import numpy as np


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_loss_curves(log_path: Path, out: Path) -> bool:
    rows = [json.loads(line) for line in log_path.read_text().splitlines() if line.strip()]
    if not rows:
        return False
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    steps = [r["step"] for r in rows]
    for key in ("loss", "recon"):
        axes[0].plot(steps, [r[key] for r in rows], label=key, lw=1)
    val = [r for r in rows if "val_recon" in r]
    if val:
        axes[0].plot([r["step"] for r in val], [r["val_recon"] for r in val], "o-", label="val_recon")
    axes[0].set_yscale("log")
    axes[0].set_xlabel("step")
    axes[0].legend()
    axes[0].set_title("reconstruction loss")
    axes[1].plot(steps, [r["kl"] for r in rows], label="kl", lw=1)
    if val and "val_vertex_error" in val[0]:
        ax2 = axes[1].twinx()
        ax2.plot([r["step"] for r in val], [r["val_vertex_error"] for r in val], "o-", color="C2",
                 label="val vertex error")
        ax2.plot([r["step"] for r in val], [r["val_rest_baseline"] for r in val], "s--", color="C3",
                 label="val rest baseline")
        ax2.set_ylabel("fraction of diagonal")
        ax2.legend(loc="upper right")
    axes[1].set_xlabel("step")
    axes[1].legend(loc="upper left")
    axes[1].set_title("KL and validation error")
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    plt.close(fig)
    return True


def plot_error_curves(items: list[dict], out: Path, title: str) -> None:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 4))
    for key, color in (("model", "C0"), ("rest", "C1"), ("rigid", "C2")):
        curves = [np.asarray(it["curves"][key]) for it in items]
        n = min(len(c) for c in curves)
        mean = np.mean([c[:n] for c in curves], axis=0)
        t = np.arange(n) / items[0]["fps"]
        for c in curves:
            ax.plot(np.arange(len(c)) / items[0]["fps"], c, color=color, alpha=0.15, lw=0.7)
        ax.plot(t, mean, color=color, lw=2, label=f"{key} (mean)")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("mean vertex error / diagonal")
    ax.set_yscale("log")
    ax.set_title(title)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    plt.close(fig)


def plot_filmstrip(ref: np.ndarray, pred: np.ndarray, faces: np.ndarray, out: Path, title: str,
                   n: int = 5) -> None:
    plt = _plt()
    picks = np.unique(np.linspace(0, len(ref) - 1, n).round().astype(int))
    both = np.concatenate([ref[picks], pred[picks]]).reshape(-1, 3)
    lo, hi = both.min(0), both.max(0)
    c, half = (lo + hi) / 2, max(float((hi - lo).max()) / 2, 1e-6)
    fig = plt.figure(figsize=(2.6 * len(picks), 5.4))
    for row, (name, data) in enumerate((("reference", ref), ("NeuROK", pred))):
        for col, f in enumerate(picks):
            ax = fig.add_subplot(2, len(picks), row * len(picks) + col + 1, projection="3d")
            x = data[f]
            ax.plot_trisurf(x[:, 0], x[:, 1], x[:, 2], triangles=faces, color="C0" if row == 0 else "C1",
                            linewidth=0, antialiased=False, shade=True)
            for setlim, k in ((ax.set_xlim, 0), (ax.set_ylim, 1), (ax.set_zlim, 2)):
                setlim(c[k] - half, c[k] + half)
            ax.set_box_aspect((1, 1, 1))
            ax.set_axis_off()
            ax.set_title(f"{name} f{f}", fontsize=8)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(out, dpi=70)
    plt.close(fig)
