"""The model server: one process serving one model through the SageMaker, TGI and OpenAI APIs."""
