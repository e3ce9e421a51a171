"""Pure renderers: values in, Rich/Textual strips out; no widget state, no I/O."""
