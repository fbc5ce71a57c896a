"""The time model's fitted constants and their cross-validated error (generated)."""
LEVELS_FITTED: dict = {}
