"""Batch transform: SageMaker's CreateTransformJob and friends, run over copies started for each job."""
