"""Writing dumps: miles' writer rules, a torch.save-compatible archive writer, the demo run."""
