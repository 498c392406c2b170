"""The web console at `/console`: a single-page app built from `console/` at the repo root (Vite + Preact + uPlot)
and shipped here as static files, so `pip install` needs no Node. `assets.py` serves them; `stamp.py` records
which sources they were built from."""
