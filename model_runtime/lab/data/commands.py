"""``python -m model_runtime data ...``: generate, preview, stats, validate."""

import json


def run(args) -> int:
    if args.data_command == "generate":
        from .generate import generate
        from .stats import format_stats

        config = None
        if args.config:
            with open(args.config, encoding="utf-8") as f:
                config = json.load(f)
        stats = generate(args.out, args.count, workers=args.workers, seed=args.seed, config=config,
                         split=args.split)
        print(format_stats(stats))
        return 0
    if args.data_command == "preview":
        from .preview import preview

        preview(args.sequence, args.out)
        print(f"wrote {args.out}")
        return 0
    if args.data_command == "stats":
        from .stats import dataset_stats, format_stats

        print(format_stats(dataset_stats(args.root)))
        return 0
    if args.data_command == "validate":
        from .validate import main

        return main(quick=args.quick)
    return 1
