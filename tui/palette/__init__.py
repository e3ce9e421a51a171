"""The command palette's own commands (ctrl+p): views, steps, follow, poll interval, baselines."""
