"""Bring-your-own-code mode: a model folder's `inference.py` served as SageMaker's inference toolkit serves it,
in worker processes (pool.py) that speak frames (frames.py) and run the toolkit's contract (toolkit.py)."""
