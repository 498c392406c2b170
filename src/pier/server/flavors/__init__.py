"""API dialects at the edge. Each turns its JSON into one GenerateRequest and the engine's chunks back."""
