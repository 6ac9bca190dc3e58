"""A quick look at a sequence: a few frames side by side, drawn with matplotlib (headless, Agg)."""

import numpy as np

from .format import load_sequence


def preview(sequence_path: str, out_png: str, columns: int = 5) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    seq = load_sequence(sequence_path)
    pos, faces, pins = seq["positions"], seq["faces"], seq["pin_mask"]
    frames = np.unique(np.linspace(0, len(pos) - 1, columns).round().astype(int))
    lo, hi = pos.reshape(-1, 3).min(0), pos.reshape(-1, 3).max(0)
    centre, half = (lo + hi) / 2, (hi - lo).max() / 2
    body = float(np.ptp(pos[0], 0).max()) / 2
    # A thrown body travels many times its size and would be a speck in the whole flight's box: follow it instead,
    # each panel centred on that frame's centroid at the body's own scale (the titles say so).
    follow = half > 3 * body
    if follow:
        half = 1.5 * body
    fig = plt.figure(figsize=(3.2 * len(frames), 3.6))
    p = seq["params"]
    fig.suptitle(f"{seq['family']} / {p.get('variant', '')}  {seq['shape_id']} ({seq['split']})  "
                 f"E={p['stiffness']:.3g} Pa  rho={p['density']:.0f}  g={np.round(p['gravity'], 1).tolist()}  "
                 f"drag={p['drag']:.2f}", fontsize=9)
    for k, t in enumerate(frames):
        ax = fig.add_subplot(1, len(frames), k + 1, projection="3d")
        ax.plot_trisurf(pos[t, :, 0], pos[t, :, 1], pos[t, :, 2], triangles=faces, color="#8ab", edgecolor="#345",
                        linewidth=0.1, alpha=0.9)
        if pins.any():
            ax.scatter(*pos[t, pins].T, color="red", s=3)
        c = pos[t].mean(0) if follow else centre
        ax.set_xlim(c[0] - half, c[0] + half)
        ax.set_ylim(c[1] - half, c[1] + half)
        ax.set_zlim(c[2] - half, c[2] + half)
        where = f", centroid moved {np.linalg.norm(c - pos[0].mean(0)):.2f} m" if follow else ""
        ax.set_title(f"t = {t / seq['fps']:.2f} s{where}", fontsize=8)
        ax.tick_params(labelsize=5)
    fig.tight_layout()
    fig.savefig(out_png, dpi=90)
    plt.close(fig)
