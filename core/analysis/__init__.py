"""What the monitor concludes from a run: advisories, compare, outliers, view models."""
