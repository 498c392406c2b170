"""The model server's own middlewares, outside any flavor: the copy's guard (API key, copy secret), the body limit,
the gateway's request timeout, and the LoRA adapter a request names (with `GET /pier/adapters`)."""
