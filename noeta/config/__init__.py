"""Low-level configuration shared by several layers: the worker's thread and cache sizes (tuning), and loading objects named by ``package.module:attribute`` (import_path)."""
