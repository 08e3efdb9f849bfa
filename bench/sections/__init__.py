"""One module per measured thing, each with `TITLE` and `run(ctx, result)`; bench/run.py lists
them in running order."""
