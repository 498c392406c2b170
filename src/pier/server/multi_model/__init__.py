"""A multi-model copy (SageMaker's `Mode: MultiModel`): `app.py` sends each `/invocations` to its TargetModel's own
app; `cache.py` loads and unloads those models within the copy's memory budget."""
