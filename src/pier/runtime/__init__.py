"""The endpoint data plane: which copy answers an invocation, how many may wait, and how it is forwarded."""
