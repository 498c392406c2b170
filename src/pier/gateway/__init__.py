"""The gateway (`pier up`): the SageMaker control plane, runtime and OpenAI routes on one port, wired to the
reconciler, the copy chooser and a backend."""
