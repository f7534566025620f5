"""Guest scenarios, one module each, named as the runner is asked for them
(golden-nft-check -> golden_nft_check.py). Each has TIME_LIMIT (seconds) and
run(ctx); it fails by raising. What the host tests assert on, it saves in ctx.dir."""
