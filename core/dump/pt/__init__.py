"""The torch.save reader: a ``.pt`` archive's zip half and pickle half, read without torch and without executing
anything from the file (``pt_archive.load_pt``). It imports nothing else of ``dump`` (an import-linter contract in
pyproject.toml): what it returns is plain values, numpy arrays and inert records.
"""
