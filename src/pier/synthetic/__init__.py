"""Synthetic models: loadable GGUF files with random weights and a whole-word vocabulary, built locally for
tests, `pier serve --demo` and benchmarks (speed does not depend on the weights' values)."""
